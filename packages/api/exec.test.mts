import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { executeAndCapture, node, spawnCall, tsx } from './exec.mts'

// The five cases of SPEC-DB-003, unchanged in meaning.
describe('executeAndCapture', () => {
  it('captures stdout from simple script', async () => {
    const result = await executeAndCapture('console.log("hello world")', 'javascript', { cwd: '/tmp' })
    expect(result.stdout).toContain('hello world')
    expect(result.exitCode).toBe(0)
  })

  it('captures stderr from erroring script', async () => {
    const result = await executeAndCapture('console.error("error message"); process.exit(1)', 'javascript', {
      cwd: '/tmp',
    })
    expect(result.stderr).toContain('error message')
    expect(result.exitCode).toBe(1)
  })

  it('handles TypeScript execution', async () => {
    const result = await executeAndCapture('const x: number = 42; console.log(x)', 'typescript', { cwd: '/tmp' })
    expect(result.stdout).toContain('42')
    expect(result.exitCode).toBe(0)
  })

  it('respects timeout', async () => {
    const result = await executeAndCapture('while(true) {}', 'javascript', { cwd: '/tmp', timeout: 1000 })
    expect(result.exitCode).not.toBe(0)
    expect(result.executionTime).toBeLessThan(2000)
  })

  it('truncates large output', async () => {
    const result = await executeAndCapture(
      'for(let i=0; i<1000000; i++) console.log("x".repeat(100))',
      'javascript',
      { cwd: '/tmp' },
    )
    expect(result.stdout.length).toBeLessThanOrEqual(1024 * 1024 + 50)
    expect(result.stdout).toContain('[Output truncated]')
  })
})

describe('host extras', () => {
  it('reports a timeout in the seed form with partial output', async () => {
    const r = await executeAndCapture('console.log("early"); setInterval(() => {}, 1000)', 'javascript', {
      timeout: 1000,
    })
    expect(r.timedOut).toBe(true)
    expect(r.exitCode).toBe(124)
    expect(r.stdout).toBe('early\n')
    expect(r.error).toBe('exec: Process timeout after 1s (TIMEOUT)')
    expect(r.errorCode).toBe('TIMEOUT')
    expect(r.success).toBe(false)
  })

  it('runs python and bash', async () => {
    const py = await executeAndCapture('print(6*7)', 'python')
    expect(py.stdout).toBe('42\n')
    expect(py.success).toBe(true)
    const sh = await executeAndCapture('echo $((6*7)); exit 3', 'bash')
    expect(sh.stdout).toBe('42\n')
    expect(sh.exitCode).toBe(3)
    expect(sh.success).toBe(false)
  })

  it('node() and tsx() stream output through callbacks', async () => {
    const out: string[] = []
    const err: string[] = []
    const r = await node('console.log("a"); console.error("b")', '/tmp', undefined, (d) => out.push(d), (d) => err.push(d))
    expect(r.exitCode).toBe(0)
    expect(out.join('')).toBe('a\n')
    expect(err.join('')).toBe('b\n')
    const t: string[] = []
    const r2 = await tsx('const n: number = 7; console.log(n * 6)', '/tmp', undefined, (d) => t.push(d), () => {})
    expect(r2.exitCode).toBe(0)
    expect(t.join('')).toBe('42\n')
  })

  it('node() passes env and enforces its timeout', async () => {
    const out: string[] = []
    const r = await node('console.log(process.env.EXEC_NATIVE_X)', '/tmp', { EXEC_NATIVE_X: 'yes' }, (d) => out.push(d), () => {})
    expect(out.join('')).toBe('yes\n')
    expect(r.exitCode).toBe(0)
    const r2 = await node('setTimeout(() => {}, 60000)', '/tmp', undefined, () => {}, () => {}, 300)
    expect(r2.timedOut).toBe(true)
    expect(r2.exitCode).toBe(124)
  })

  it('spawnCall streams a command', async () => {
    const out: string[] = []
    const r = await spawnCall('printf', ['%s-%s', 'a', 'b'], {}, (d) => out.push(d), () => {})
    expect(r.exitCode).toBe(0)
    expect(out.join('')).toBe('a-b')
  })

  it('resolves relative require from cwd, inline and for large code', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-'))
    writeFileSync(join(dir, 'helper.js'), 'module.exports = 41')
    const small = await executeAndCapture('console.log(require("./helper") + 1)', 'javascript', { cwd: dir })
    expect(small.stdout).toBe('42\n')
    const pad = `/*${'x'.repeat(200 * 1024)}*/\n`
    const big = await executeAndCapture(`${pad}console.log(require("./helper") + 1)`, 'javascript', { cwd: dir })
    expect(big.stderr).toBe('')
    expect(big.stdout).toBe('42\n')
  })
})
