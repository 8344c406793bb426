import { execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { isRunning, waitGone } from './helpers'

import { executeAndCapture, liveProcessGroups } from '../index.js'


describe('executeAndCapture: results', () => {
  it('fills every result field', async () => {
    const r = await executeAndCapture('echo out; echo err >&2', 'bash')
    expect(r).toMatchObject({
      stdout: 'out\n',
      stderr: 'err\n',
      exitCode: 0,
      success: true,
      timedOut: false,
      canceled: false,
      signal: null,
      stdoutBytes: 4,
      stderrBytes: 4,
      truncated: false,
    })
    expect(r.error).toBeUndefined()
    expect(r.executionTime).toBeGreaterThan(0)
    expect(r.pid).toBeGreaterThan(0)
  })

  it('reports a signal death as 128+N with the signal name', async () => {
    const r = await executeAndCapture('kill -KILL $$', 'bash')
    expect(r.exitCode).toBe(137)
    expect(r.signal).toBe('SIGKILL')
    expect(r.success).toBe(false)
  })

  it('gives input on stdin, and EOF without it', async () => {
    const r = await executeAndCapture('print(input()[::-1])', 'python', { input: 'olleh\n' })
    expect(r.stdout).toBe('hello\n')
    const b = await executeAndCapture('import sys; print(len(sys.stdin.buffer.read()))', 'python', {
      input: Buffer.from([0, 1, 2]),
    })
    expect(b.stdout).toBe('3\n')
    const eof = await executeAndCapture('x = input()', 'python', { timeout: 10000 })
    expect(eof.timedOut).toBe(false)
    expect(eof.stderr).toContain('EOFError')
    expect(eof.exitCode).toBe(1)
    expect(eof.executionTime).toBeLessThan(5000)
  })

  it('merges env over the host env, or replaces it', async () => {
    process.env.EXEC_NATIVE_HOST_VAR = 'host'
    const merged = await executeAndCapture('echo "$EXEC_NATIVE_HOST_VAR $MINE"', 'bash', { env: { MINE: 'x' } })
    expect(merged.stdout).toBe('host x\n')
    const bash = execFileSync('which', ['bash']).toString().trim()
    const alone = await executeAndCapture('echo "[$EXEC_NATIVE_HOST_VAR] $MINE"', 'bash', {
      env: { MINE: 'y', PATH: bash.replace(/\/bash$/, '') },
      extendEnv: false,
    })
    expect(alone.stdout).toBe('[] y\n')
  })
})

describe('executeAndCapture: errors before execution resolve', () => {
  it('missing working directory', async () => {
    const r = await executeAndCapture('echo', 'bash', { cwd: '/tmp/ghost' })
    expect(r).toMatchObject({
      success: false,
      exitCode: -1,
      errorCode: 'ENOENT',
      error: "exec: Working directory does not exist '/tmp/ghost' (ENOENT)",
    })
  })

  it('cwd that is a file', async () => {
    const r = await executeAndCapture('echo', 'bash', { cwd: '/etc/hostname' })
    expect(r.errorCode).toBe('ENOTDIR')
    expect(r.error).toMatch(/^exec: .*\(ENOTDIR\)$/)
  })

  it('missing interpreter', async () => {
    const r = await executeAndCapture('print(1)', 'python', { env: { PATH: '/nonexistent' } })
    expect(r.error).toBe('exec: python3 not found in PATH (ENOENT)')
    expect(r.exitCode).toBe(-1)
  })

  it('unsupported language', async () => {
    const r = await executeAndCapture('puts 1', 'ruby' as never)
    expect(r.error).toBe("exec: Unsupported language 'ruby' (EINVAL)")
    expect(r.errorCode).toBe('EINVAL')
  })

  it('wrong argument types reject with a TypeError', async () => {
    await expect(executeAndCapture(42 as never, 'bash')).rejects.toThrow(TypeError)
    await expect(executeAndCapture('x', 'bash', { timeout: -1 })).rejects.toMatchObject({
      code: 'EINVAL',
      message: 'exec: options.timeout must not be negative, got -1 (EINVAL)',
    })
    await expect(executeAndCapture('x', 'bash', { timeout: Number.NaN })).rejects.toThrow(TypeError)
    await expect(executeAndCapture('x', 'bash', { env: { A: 1 as never } })).resolves.toBeTruthy()
    await expect(executeAndCapture('x', 'bash', { env: { 'A=B': 'x' } })).rejects.toThrow(/contains '='/)
    await expect(executeAndCapture('x', 'bash', 'nope' as never)).rejects.toThrow(/options must be an object/)
  })
})

describe('executeAndCapture: timeout, cancel, cleanup', () => {
  it('timeout keeps partial output and reports 124', async () => {
    const r = await executeAndCapture('echo partial; sleep 30', 'bash', { timeout: 300 })
    expect(r).toMatchObject({ timedOut: true, exitCode: 124, stdout: 'partial\n', errorCode: 'TIMEOUT' })
    expect(r.error).toBe('exec: Process timeout after 0.3s (TIMEOUT)')
    expect(r.executionTime).toBeLessThan(5000)
  })

  it('a SIGTERM-ignoring child is SIGKILLed and the result still comes', async () => {
    const r = await executeAndCapture(
      'import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint("ready", flush=True)\ntime.sleep(30)',
      'python',
      // the timeout leaves python time to start and ignore SIGTERM, even on a loaded machine
      { timeout: 2000, forceKillAfterDelay: 300 },
    )
    expect(r.stdout).toBe('ready\n')
    expect(r.timedOut).toBe(true)
    expect(r.signal).toBe('SIGKILL')
    expect(r.executionTime).toBeLessThan(10000)
  })

  it('a grandchild holding stdout open does not delay the result', async () => {
    // The grandchild leaves the group and ignores SIGTERM, so it holds the pipe
    // until the SIGKILL 3 s later: only the drain bounds the wait for the result.
    const r = await executeAndCapture(
      "setsid bash -c 'trap \"\" TERM; echo $$ > /tmp/exec-native-gc.pid; sleep 30' & sleep 0.5; echo done; exit 0",
      'bash',
      { timeout: 30000, forceKillAfterDelay: 3000 },
    )
    expect(r.stdout).toBe('done\n')
    expect(r.exitCode).toBe(0)
    expect(r.executionTime).toBeLessThan(2500)
    // and it does not survive: SIGKILLed by the sweep after the kill delay
    const gc = Number(readFileSync('/tmp/exec-native-gc.pid', 'utf8'))
    expect(isRunning(gc)).toBe(true)
    expect(await waitGone([gc], 8000)).toEqual([])
  })

  it('background members of the group are killed when the child exits', async () => {
    const r = await executeAndCapture('sleep 30 & echo $!', 'bash')
    const pid = Number(r.stdout.trim())
    expect(pid).toBeGreaterThan(0)
    expect(await waitGone([pid])).toEqual([])
  })

  it('AbortSignal cancels the run; an aborted signal never starts it', async () => {
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 200)
    const r = await executeAndCapture('echo started; sleep 30', 'bash', { signal: ac.signal })
    expect(r.canceled).toBe(true)
    expect(r.errorCode).toBe('ECANCELED')
    expect(r.error).toBe('exec: Process canceled (ECANCELED)')
    expect(r.stdout).toBe('started\n')
    const pre = await executeAndCapture('sleep 30', 'bash', { signal: AbortSignal.abort() })
    expect(pre.canceled).toBe(true)
    expect(pre.executionTime).toBeLessThan(3000)
  })

  it('leaves no tracked process group behind', async () => {
    await executeAndCapture('sleep 30 &', 'bash', { forceKillAfterDelay: 100 })
    for (let i = 0; i < 100 && liveProcessGroups() > 0; i++) await new Promise((res) => setTimeout(res, 20))
    expect(liveProcessGroups()).toBe(0)
  })
})

describe('executeAndCapture: output', () => {
  it('keeps head and tail of huge output with the marker, within cap + 50', async () => {
    const r = await executeAndCapture('seq 1 1000000', 'bash', { maxOutputBytes: 1000 })
    expect(r.truncated).toBe(true)
    expect(r.stdout.startsWith('1\n2\n3\n')).toBe(true)
    expect(r.stdout.endsWith('999999\n1000000\n')).toBe(true)
    expect(r.stdout).toMatch(/\[Output truncated\] \d+ bytes omitted/)
    expect(r.stdout.length).toBeLessThanOrEqual(1050)
    expect(r.stdoutBytes).toBe(6888896)
  })

  it('cuts multi-byte characters on boundaries', async () => {
    const r = await executeAndCapture('for i in $(seq 1 2000); do printf "€😀"; done', 'bash', { maxOutputBytes: 101 })
    expect(r.stdout).not.toContain('\uFFFD')
    expect(r.errorCode).toBeUndefined()
  })

  it('captures 1 GiB with bounded memory', async () => {
    const before = process.memoryUsage().rss
    const r = await executeAndCapture('head -c 1073741824 /dev/zero', 'bash', { encoding: 'buffer', timeout: 120000 })
    const grown = process.memoryUsage().rss - before
    expect(r.stdoutBytes).toBe(1073741824)
    expect(Buffer.isBuffer(r.stdout)).toBe(true)
    expect((r.stdout as Buffer).length).toBeLessThanOrEqual(1024 * 1024 + 50)
    expect(grown).toBeLessThan(64 * 1024 * 1024)
  })

  it('runs a program of 1 MB', async () => {
    const code = `${'x = 1\n'.repeat(1024 * 1024 / 6)}print("big ok", x)`
    expect(code.length).toBeGreaterThan(1_000_000)
    const py = await executeAndCapture(code, 'python')
    expect(py.stdout).toBe('big ok 1\n')
    const js = await executeAndCapture(`${'var a = 1;\n'.repeat(100_000)}console.log("js ok", a)`, 'javascript')
    expect(js.stdout).toBe('js ok 1\n')
    const sh = await executeAndCapture(`${': noop\n'.repeat(150_000)}echo sh ok`, 'bash')
    expect(sh.stdout).toBe('sh ok\n')
  })

  it('invalid UTF-8 is flagged EBINARY; encoding buffer gives raw bytes', async () => {
    const r = await executeAndCapture("printf 'a\\xffb'", 'bash')
    expect(r.errorCode).toBe('EBINARY')
    expect(r.error).toMatch(/not valid UTF-8/)
    expect(r.stdout).toBe('a\uFFFDb')
    const raw = await executeAndCapture("printf 'a\\xffb\\x00'", 'bash', { encoding: 'buffer' })
    expect(Buffer.compare(raw.stdout as Buffer, Buffer.from([0x61, 0xff, 0x62, 0]))).toBe(0)
    expect(raw.success).toBe(true)
  })

  it('uses the cwd-local tsx when there is one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-tsx-'))
    execFileSync('mkdir', ['-p', join(dir, 'node_modules/.bin')])
    const fake = join(dir, 'node_modules/.bin/tsx')
    writeFileSync(fake, '#!/bin/sh\necho "local tsx $1"\n')
    chmodSync(fake, 0o755)
    const r = await executeAndCapture('let x: number = 1', 'typescript', { cwd: dir })
    expect(r.stdout).toBe('local tsx -e\n')
  })
})

describe('executeAndCapture: concurrency', () => {
  it('100 concurrent calls return correct, separate results', async () => {
    const runs = Array.from({ length: 100 }, (_, i) =>
      executeAndCapture(`echo ${i}; echo e${i} >&2; exit ${i % 7}`, 'bash'),
    )
    const results = await Promise.all(runs)
    results.forEach((r, i) => {
      expect(r.stdout).toBe(`${i}\n`)
      expect(r.stderr).toBe(`e${i}\n`)
      expect(r.exitCode).toBe(i % 7)
    })
    expect(new Set(results.map((r) => r.pid)).size).toBe(100)
  })
})
