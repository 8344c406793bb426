import { spawnSync } from 'node:child_process'
import { writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

const cli = join(__dirname, '..', 'bin', 'exec-native.mjs')
const run = (args: string[], input?: string) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 30000, input })

describe('exec-native CLI', () => {
  it('runs the README example', () => {
    const r = run(['-l', 'python', '-e', 'print(6*7)'])
    expect(r.stdout).toBe('42\n')
    expect(r.status).toBe(0)
  })

  it('exits with the child code, 124 on timeout', () => {
    expect(run(['-l', 'bash', '-e', 'exit 7']).status).toBe(7)
    const t = run(['-l', 'bash', '-e', 'sleep 10', '--timeout', '300'])
    expect(t.status).toBe(124)
    expect(t.stderr).toContain('exec: Process timeout after 0.3s (TIMEOUT)')
  })

  it('runs a file, guessing the language from its extension, and stdin with -', () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-cli-'))
    const f = join(dir, 'prog.js')
    writeFileSync(f, 'console.log("from " + "file")')
    expect(run([f]).stdout).toBe('from file\n')
    expect(run(['-l', 'python', '-'], 'print("stdin")').stdout).toBe('stdin\n')
  })

  it('prints the structured result with --json and caps output with --max-output', () => {
    const r = run(['--json', '--max-output', '100', '-l', 'bash', '-e', 'seq 1 10000'])
    const j = JSON.parse(r.stdout)
    expect(j.exitCode).toBe(0)
    expect(j.truncated).toBe(true)
    expect(j.stdout).toContain('[Output truncated]')
    expect(j.stdoutBytes).toBe(48894)
  })

  it('refuses bad usage clearly', () => {
    const r = run(['-l', 'ruby', '-e', 'x'])
    expect(r.stderr).toContain("exec: Unsupported language 'ruby' (EINVAL)")
    expect(r.status).toBe(127)
    const u = run(['--bogus'])
    expect(u.status).toBe(2)
    expect(u.stderr).toContain('unknown option --bogus')
  })
})

describe('exec-native serve', () => {
  it('answers JSON-RPC on stdio through the main CLI', () => {
    const input = [
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} },
      { jsonrpc: '2.0', id: 2, method: 'process/start', params: { argv: ['echo', 'hi'], io: { type: 'pipe' } } },
    ]
      .map((m) => JSON.stringify(m))
      .join('\n')
    const r = run(['serve'], `${input}\n`)
    const msgs = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
    expect(msgs.find((m) => m.id === 1)?.result).toBeTruthy()
    expect(msgs.find((m) => m.id === 2)?.result?.pid).toBeGreaterThan(0)
    expect(r.status).toBe(0)
  })
})
