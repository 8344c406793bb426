import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { isRunning, sleep, waitGone } from './helpers'

import {
  checkBackground,
  CommandRunner,
  commandTool,
  killBackground,
  listBackground,
  runCommand,
  sanitize,
  truncateTail,
} from '../index.js'

const work = mkdtempSync(join(tmpdir(), 'exec-native-cmd-test-'))
const logs = join(work, 'logs')
mkdirSync(logs)
afterAll(() => rmSync(work, { recursive: true, force: true }))

const opts = { cwd: work, outputDir: logs }

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (cond()) return true
    await new Promise((r) => setTimeout(r, 20))
  }
  return cond()
}

function rssBytes(): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) * 1024 : process.memoryUsage().rss
}

describe('sanitize', () => {
  it('printf with SGR colour comes back clean', async () => {
    const r = await runCommand("printf '\\e[31mred\\e[0m'", opts)
    expect(r.stdout).toBe('red')
    expect(r.exitCode).toBe(0)
    expect(r.isError).toBe(false)
    expect(r.text).toBe('stdout:\nred\n\nexit code: 0')
  })

  it('ls --color=always comes back clean', async () => {
    const dir = join(work, 'colours')
    mkdirSync(join(dir, 'subdir'), { recursive: true })
    writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 })
    const raw = execFileSync('ls', ['--color=always'], { cwd: dir, encoding: 'utf8' })
    expect(raw).toContain('\x1b[') // the command really paints
    const r = await runCommand('ls --color=always', { ...opts, cwd: dir })
    expect(r.stdout).toBe('run.sh\nsubdir\n')
  })

  it('strips OSC, cursor movement and control bytes, keeps tab and CR, normalizes CRLF', () => {
    expect(sanitize('\x1b]0;title\x07a\tb\x00\x08c\r\n10%\r20%\x1b[2K\x1b[?25l\n')).toBe('a\tbc\n10%\r20%\n')
    expect(sanitize('\x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\')).toBe('link')
    expect(() => sanitize(42 as unknown as string)).toThrow(expect.objectContaining({ code: 'EINVAL' }))
  })
})

describe('truncation and offload', () => {
  it('8500 lines: the last 2000 and the exact notice; the log holds all 8500', async () => {
    const r = await runCommand('seq 1 8500', opts)
    const full = execFileSync('seq', ['1', '8500'], { encoding: 'utf8' })
    const expected = Array.from({ length: 2000 }, (_, i) => `${6501 + i}\n`).join('')
    expect(r.stdout).toBe(expected)
    expect(r.truncation.stdout).toEqual({
      truncated: true,
      truncatedBy: 'lines',
      totalLines: 8500,
      totalBytes: Buffer.byteLength(full),
      outputLines: 2000,
      outputBytes: expected.length,
      lastLinePartial: false,
      binary: false,
    })
    expect(r.truncation.stderr.truncated).toBe(false)
    const path = r.fullOutputPath!
    expect(path).toMatch(new RegExp(`^${logs}/exec-native-[0-9a-f]{16}\\.log$`))
    expect(r.text).toBe(
      `stdout:\n${expected.slice(0, -1)}\n\nexit code: 0\n\n` +
        `[stdout: Showing last 2000 of 8500 lines. Full output: ${path}]`,
    )
    expect(readFileSync(path, 'utf8')).toBe(full)
  })

  it('3000 short lines under 50 KB: line-truncated, with a log file', async () => {
    const r = await runCommand('seq 1 3000', opts)
    expect(r.truncation.stdout.truncatedBy).toBe('lines')
    expect(r.truncation.stdout.totalBytes).toBeLessThan(51200)
    expect(r.truncation.stdout.outputLines).toBe(2000)
    expect(r.stdout.startsWith('1001\n')).toBe(true)
    expect(readFileSync(r.fullOutputPath!, 'utf8').split('\n').length - 1).toBe(3000)
    expect(r.text).toContain(`[stdout: Showing last 2000 of 3000 lines. Full output: ${r.fullOutputPath}]`)
  })

  it('output within both limits: no log file, no notice', async () => {
    const r = await runCommand('seq 1 2000', opts)
    expect(r.truncation.stdout.truncated).toBe(false)
    expect(r.fullOutputPath).toBeUndefined()
    expect(r.text).not.toContain('Full output')
  })

  it('one 200 KB line keeps its last 51200 bytes', async () => {
    const r = await runCommand("head -c 204800 /dev/zero | tr '\\0' x", opts)
    expect(r.stdout).toBe('x'.repeat(51200))
    expect(r.truncation.stdout).toMatchObject({
      truncatedBy: 'bytes',
      lastLinePartial: true,
      totalLines: 1,
      totalBytes: 204800,
      outputBytes: 51200,
    })
    expect(statSync(r.fullOutputPath!).size).toBe(204800)
    expect(r.text).toContain(
      `[stdout: Showing last 51200 bytes of line 1 of 1 (50KB limit). Full output: ${r.fullOutputPath}]`,
    )
  })

  it('one 200 KB line of 3-byte characters is cut on a character boundary', async () => {
    // 68267 x '✓' = 204801 bytes; 51200 is not a multiple of 3
    const r = await runCommand("yes '✓' | head -n 68267 | tr -d '\\n'", opts)
    expect(r.stdout).toBe('✓'.repeat(17066))
    expect(Buffer.byteLength(r.stdout)).toBe(51198)
    expect(r.truncation.stdout).toMatchObject({ totalBytes: 204801, outputBytes: 51198, lastLinePartial: true })
  })

  it('byte limit keeps complete lines and one budget covers both streams, split fairly', async () => {
    const r = await runCommand('for i in $(seq 1 1000); do printf "%099d\\n" $i; printf "e%098d\\n" $i >&2; done', opts)
    expect(r.truncation.stdout).toMatchObject({ truncatedBy: 'bytes', outputLines: 256, outputBytes: 25600 })
    expect(r.truncation.stderr).toMatchObject({ truncatedBy: 'bytes', outputLines: 256, totalLines: 1000 })
    expect(Buffer.byteLength(r.stdout) + Buffer.byteLength(r.stderr)).toBeLessThanOrEqual(51200)
    expect(Buffer.byteLength(r.text)).toBeLessThan(51200 + 1024)
    expect(r.stderr.endsWith(`e${'1000'.padStart(98, '0')}\n`)).toBe(true)
    expect(r.text).toContain('[stdout: Showing last 256 of 1000 lines (50KB limit). Full output: ')
    expect(r.text).toContain('[stderr: Showing last 256 of 1000 lines (50KB limit). Full output: ')
    // one log, both streams
    expect(readFileSync(r.fullOutputPath!, 'utf8').split('\n').length - 1).toBe(2000)
  })

  it('custom limits', async () => {
    const r = await runCommand('seq 1 100', { ...opts, maxLines: 10, maxBytes: 1000 })
    expect(r.stdout).toBe(Array.from({ length: 10 }, (_, i) => `${91 + i}\n`).join(''))
    expect(r.text).toContain('[stdout: Showing last 10 of 100 lines. Full output: ')
  })

  it('a log that cannot be written is reported instead of named', async () => {
    const r = await runCommand('seq 1 8500', { ...opts, outputDir: join(work, 'missing', 'dir') })
    expect(r.fullOutputPath).toBeUndefined()
    expect(r.offloadError).toContain('cannot create a log file')
    expect(r.text).toContain('[stdout: Showing last 2000 of 8500 lines. Full output could not be saved: cannot create a log file in ')
    expect(r.stdout.startsWith('6501\n')).toBe(true)
  })

  it('1 GB of output keeps memory bounded and counts lines right', async () => {
    const dir = mkdtempSync(join(work, 'big-'))
    const before = rssBytes()
    let peak = before
    const timer = setInterval(() => {
      peak = Math.max(peak, rssBytes())
    }, 10)
    const t0 = Date.now()
    const r = await runCommand('yes | head -c 1073741824', { ...opts, outputDir: dir })
    const elapsed = Date.now() - t0
    clearInterval(timer)
    peak = Math.max(peak, rssBytes())
    expect(r.exitCode).toBe(0)
    expect(r.truncation.stdout.totalBytes).toBe(1073741824)
    expect(r.truncation.stdout.totalLines).toBe(536870912)
    expect(r.truncation.stdout.outputLines).toBe(2000)
    expect(r.stdout).toBe('y\n'.repeat(2000))
    expect(r.text).toContain('[stdout: Showing last 2000 of 536870912 lines. Full output: ')
    expect(statSync(r.fullOutputPath!).size).toBe(1073741824)
    rmSync(dir, { recursive: true, force: true })
    console.log(`1 GB: ${elapsed} ms, RSS growth ${((peak - before) / 1048576).toFixed(1)} MiB`)
    expect(peak - before).toBeLessThan(64 * 1024 * 1024)
  }, 120_000)
})

describe('environment', () => {
  it('is non-interactive by default, each variable overridable', async () => {
    const cmd = 'echo "$PAGER|$GIT_PAGER|$GIT_TERMINAL_PROMPT|$TERM|$NO_COLOR"'
    expect((await runCommand(cmd, opts)).stdout).toBe('cat|cat|0|dumb|1\n')
    const r = await runCommand(cmd, { ...opts, env: { PAGER: 'less', TERM: 'xterm', NO_COLOR: undefined as unknown as string } })
    expect(r.stdout).toBe('less|cat|0|xterm|\n')
  })

  it('a command that waits for input ends at once', async () => {
    const t0 = Date.now()
    const r = await runCommand('read x; echo "got:$x:$?"', opts)
    expect(r.stdout).toBe('got::1\n')
    expect(Date.now() - t0).toBeLessThan(5000)
  })

  it('is stateless with cwd fixed per call', async () => {
    const r1 = await runCommand('cd / && export FOO=1 && pwd', opts)
    expect(r1.stdout).toBe('/\n')
    const r2 = await runCommand('pwd; echo "[$FOO]"', opts)
    expect(r2.stdout).toBe(`${work}\n[]\n`)
  })

  it('non-zero exit sets isError; a bad cwd resolves with an error', async () => {
    const r = await runCommand('echo oops >&2; exit 7', opts)
    expect(r).toMatchObject({ exitCode: 7, isError: true, stderr: 'oops\n' })
    expect(r.text).toBe('stderr:\noops\n\nexit code: 7')
    const bad = await runCommand('echo hi', { cwd: join(work, 'nope') })
    expect(bad).toMatchObject({ exitCode: -1, isError: true, errorCode: 'ENOENT' })
    expect(bad.text).toMatch(/^exec: Working directory does not exist '.*nope' \(ENOENT\)$/)
  })

  it('the runner\'s shell: powershell through pwsh with its flags, cmd ENOENT off Windows, stateful only with bash, an unknown one EINVAL', async () => {
    const fake = mkdtempSync(join(tmpdir(), 'exec-native-pwsh-runner-'))
    writeFileSync(join(fake, 'pwsh'), '#!/bin/sh\nprintf "%s|" "$@"\n', { mode: 0o755 })
    const ps = new CommandRunner({ ...opts, shell: 'powershell', env: { PATH: `${fake}:${process.env.PATH}` } })
    try {
      const r = await ps.run('Write-Output 42')
      expect(r.exitCode).toBe(0)
      expect(r.stdout).toBe('-NoLogo|-NoProfile|-NonInteractive|-Command|Write-Output 42|')
    } finally {
      await ps.close()
      rmSync(fake, { recursive: true, force: true })
    }
    const cmd = new CommandRunner({ ...opts, shell: 'cmd' })
    try {
      const r = await cmd.run('echo hi')
      expect(r).toMatchObject({ isError: true, errorCode: 'ENOENT' })
      expect(r.text).toBe("exec: cmd is Windows' shell: there is no cmd.exe on this system (ENOENT)")
    } finally {
      await cmd.close()
    }
    expect(() => new CommandRunner({ shell: 'cmd', stateful: true })).toThrow(
      /^exec: options.stateful needs shell 'bash': cmd runs each command in its own process \(EINVAL\)$/,
    )
    expect(() => new CommandRunner({ shell: 'fish' as 'bash' })).toThrow(
      /^exec: options.shell must be 'bash', 'powershell' or 'cmd', got 'fish' \(EINVAL\)$/,
    )
  })

  it('bad argument types reject with a TypeError', async () => {
    await expect(runCommand(42 as unknown as string)).rejects.toThrow(
      expect.objectContaining({ code: 'EINVAL', name: 'TypeError' }),
    )
    await expect(runCommand('true', { maxLines: 0 })).rejects.toThrow(/options.maxLines must be a positive integer/)
    await expect(runCommand('true', { timeout: 'x' as unknown as number })).rejects.toThrow(/options.timeout must be a number/)
  })
})

describe('background', () => {
  it('sleep 5; echo done with timeout 500 is backgrounded; a later check shows done and exit 0 once', async () => {
    const runner = new CommandRunner({ outputDir: logs, cwd: work })
    const t0 = Date.now()
    const r = await runner.run('echo started; sleep 5; echo done', { timeout: 500 })
    expect(Date.now() - t0).toBeLessThan(2000)
    expect(r.timedOut).toBe(true)
    expect(r.exitCode).toBeNull()
    expect(r.isError).toBe(false)
    const pid = r.background!.pid
    expect(pid).toBe(r.pid)
    expect(r.background!.logPath).toBe(r.fullOutputPath)
    expect(r.text).toBe(
      `[Command backgrounded after 0.5s timeout (pid ${pid}). Partial output:\n\nstdout:\nstarted\n\n` +
        `Full output: ${r.fullOutputPath}\nUse checkBackground(pid) or killBackground(pid) to manage.]`,
    )
    expect(runner.listBackground()).toMatchObject([{ pid, running: true, command: 'echo started; sleep 5; echo done' }])

    const first = runner.checkBackground(pid)
    expect(first.running).toBe(true)
    expect(first.text).toContain(`[Process ${pid} still running.`)

    // wait for the exit without consuming output (listBackground does not), then check once
    await until(() => runner.listBackground().some((b) => b.pid === pid && !b.running), 10_000)
    const last = runner.checkBackground(pid)
    expect(last.running).toBe(false)
    expect(last.exitCode).toBe(0)
    expect(last.stdout).toBe('done\n')
    expect(last.text).toBe(`[Process ${pid} exited with code 0.\n\nstdout:\ndone\n\nFull output: ${r.fullOutputPath}]`)
    const again = runner.checkBackground(pid)
    expect(again).toMatchObject({ running: false, exitCode: 0, stdout: '' })
    expect(again.text).toContain('No new output since last check.')
    expect(readFileSync(r.fullOutputPath!, 'utf8')).toBe('started\ndone\n')
    expect(runner.listBackground()).toMatchObject([{ pid, running: false, exitCode: 0, killed: false }])
    await runner.close()
  }, 20_000)

  it('a backgrounded yes is killed with its whole tree', async () => {
    const runner = new CommandRunner({ outputDir: logs, cwd: work })
    const r = await runner.run('yes | cat > /dev/null & yes > /dev/null & yes', { background: true })
    const pid = r.background!.pid
    expect(r.text).toMatch(new RegExp(`^\\[Command started in the background \\(pid ${pid}\\)\\.`))
    expect(r.text).toContain(`Full output: ${r.background!.logPath}\nUse checkBackground(pid) or killBackground(pid) to manage.]`)
    await new Promise((res) => setTimeout(res, 200))
    expect(groupAlive(pid)).toBe(true)
    const check = runner.checkBackground(pid)
    expect(check.running).toBe(true)
    expect(check.truncation.stdout.truncated).toBe(true) // yes floods stdout; the check is bounded
    expect(Buffer.byteLength(check.stdout)).toBeLessThanOrEqual(51200)
    const k = await runner.killBackground(pid)
    expect(k).toMatchObject({ pid, running: false, killed: true, isError: false, signal: 'SIGTERM', exitCode: 143 })
    expect(k.text).toMatch(new RegExp(`^\\[Process ${pid} killed \\(SIGTERM, exit code 143\\)\\.`))
    expect(await until(() => !groupAlive(pid), 3000)).toBe(true)
    expect(runner.listBackground()).toMatchObject([{ pid, running: false, killed: true }])
    // killing again returns the final state
    expect(await runner.killBackground(pid)).toMatchObject({ running: false, killed: true })
    await runner.close()
  })

  it('unknown pids get a clear error', async () => {
    const runner = new CommandRunner()
    expect(() => runner.checkBackground(999999)).toThrow(
      expect.objectContaining({ code: 'ESRCH', message: 'exec: no background process with pid 999999 in this runner (ESRCH)' }),
    )
    await expect(runner.killBackground(999999)).rejects.toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(() => checkBackground(999999)).toThrow(/ESRCH/)
    expect(() => runner.checkBackground(-1)).toThrow(expect.objectContaining({ code: 'EINVAL', name: 'TypeError' }))
    await runner.close()
  })

  it('module-level functions share a default runner', async () => {
    const r = await runCommand('sleep 30', { ...opts, background: true })
    const pid = r.background!.pid
    expect(listBackground().some((p) => p.pid === pid && p.running)).toBe(true)
    expect(checkBackground(pid).running).toBe(true)
    const k = await killBackground(pid)
    expect(k.killed).toBe(true)
    expect(await until(() => !groupAlive(pid), 3000)).toBe(true)
  })

  it('close() kills what the runner still runs; later runs fail with ECANCELED', async () => {
    const runner = new CommandRunner({ outputDir: logs, cwd: work, timeout: 200 })
    const a = await runner.run('sleep 30')
    const b = await runner.run('sleep 30', { background: true })
    const fg = runner.run('sleep 30', { timeout: 0 })
    await new Promise((res) => setTimeout(res, 200))
    expect(await runner.close()).toBe(3)
    const fgResult = await fg
    expect(fgResult.exitCode).toBe(143)
    for (const pid of [a.background!.pid, b.background!.pid, fgResult.pid]) {
      expect(await until(() => !groupAlive(pid), 3000)).toBe(true)
    }
    expect(runner.listBackground().every((p) => !p.running && p.killed)).toBe(true)
    const after = await runner.run('echo hi')
    expect(after).toMatchObject({ isError: true, errorCode: 'ECANCELED' })
  })

  it('log files older than the retention age are swept', async () => {
    const dir = mkdtempSync(join(work, 'sweep-'))
    const old = join(dir, 'exec-native-0123456789abcdef.log')
    const fresh = join(dir, 'exec-native-fedcba9876543210.log')
    const other = join(dir, 'unrelated.log')
    for (const f of [old, fresh, other]) writeFileSync(f, 'x')
    const past = new Date(Date.now() - 25 * 3600 * 1000)
    utimesSync(old, past, past)
    utimesSync(other, past, past)
    const runner = new CommandRunner({ outputDir: dir })
    expect(await until(() => !existsSync(old), 3000)).toBe(true)
    expect(existsSync(fresh)).toBe(true)
    expect(existsSync(other)).toBe(true)
    await runner.close()
  })
})

describe('truncateTail', () => {
  it('keeps the last lines within both limits and reports what it did', () => {
    const text = Array.from({ length: 10 }, (_, i) => `line${i}`).join('\n')
    expect(truncateTail(text, { maxLines: 3, maxBytes: 1000 })).toEqual({
      content: 'line7\nline8\nline9',
      truncated: true,
      truncatedBy: 'lines',
      totalLines: 10,
      totalBytes: text.length,
      outputLines: 3,
      outputBytes: 17,
      lastLinePartial: false,
    })
    expect(truncateTail(text, { maxLines: 100, maxBytes: 11 })).toMatchObject({
      content: 'line8\nline9',
      truncatedBy: 'bytes',
      outputLines: 2,
    })
    expect(truncateTail(text, { maxLines: 100, maxBytes: 10 })).toMatchObject({
      content: 'line9',
      truncatedBy: 'bytes',
      outputLines: 1,
    })
    expect(truncateTail('short')).toMatchObject({ content: 'short', truncated: false, truncatedBy: null })
  })

  it('a single long line keeps its tail on a UTF-8 boundary', () => {
    // 900 bytes of 3-byte characters; the last 100 bytes start inside one
    const r = truncateTail('日本語'.repeat(100), { maxBytes: 100 })
    expect(r.content).toBe('日本語'.repeat(11))
    expect(r).toMatchObject({ lastLinePartial: true, truncatedBy: 'bytes', outputBytes: 99, totalBytes: 900 })
  })
})

describe('issue 15: the tool a model uses best', () => {
  it('a server started with & is adopted: listed in the text, alive after the run, killed by kill_pid', async () => {
    const runner = new CommandRunner({ outputDir: logs, cwd: work })
    const r = await runner.run('python3 -m http.server 0 --bind 127.0.0.1 & sleep 0.5; echo started', { timeout: 10_000 })
    expect(r.exitCode).toBe(0)
    expect(r.adopted).toHaveLength(1)
    const { pid, command } = r.adopted[0]
    expect(command).toMatch(/(^|\/)python3 -m http\.server 0 --bind 127\.0\.0\.1$/) // a pyenv shim execs the full path
    // the server's own 'Serving HTTP' line may come before or after 'started' (a slow start under load)
    expect(r.stdout).toContain('started\n')
    expect(r.text).toMatch(/^stdout:\n[^]*started\n[^]*?\nexit code: 0\n\n\[Left running/)
    expect(r.text.endsWith(
      `exit code: 0\n\n[Left running in the background:\npid ${pid}: ${command}\n` +
        `Full output: ${r.fullOutputPath}\nUse checkBackground(pid) or killBackground(pid) to manage.]`,
    )).toBe(true)
    expect(isRunning(pid)).toBe(true)
    expect(runner.listBackground()).toMatchObject([{ pid, running: true, command }])
    const k = await runner.call({ kill_pid: pid })
    expect(k.text).toMatch(new RegExp(`^\\[Process ${pid} killed \\(SIGTERM\\)\\.`))
    expect(await waitGone([pid])).toEqual([])
    // setsid nohup leaves the group; close() still finds it
    const s = await runner.run('setsid nohup sleep 60 > /dev/null 2>&1 & sleep 0.2', {})
    expect(s.adopted).toHaveLength(1)
    expect(await runner.close()).toBe(1)
    expect(await waitGone([s.adopted[0].pid])).toEqual([])
  }, 20_000)

  it('what a command printed just before it exited is in the result although its leftovers keep the pipe open; a job started in the last instant is adopted', async () => {
    const runner = new CommandRunner({ outputDir: logs, cwd: work })
    try {
      let missing = 0
      for (let i = 0; i < 15; i++) {
        // no pause: the background job may still be in its exec when bash exits
        const r = await runner.run(`sleep 60 & printf 'line ${i}\\n'`, { timeout: 10_000 })
        expect(r.adopted).toHaveLength(1)
        if (r.stdout !== `line ${i}\n`) missing++
      }
      // before: the result was made before the pump read the pipe (about half were empty)
      expect(missing).toBe(0)
    } finally {
      await runner.close()
    }
  }, 60_000)

  it('commandTool is the seed schema and runner.call dispatches it', async () => {
    const t = commandTool()
    expect(t.name).toBe('bash')
    expect(Object.keys(t.parameters.properties).sort()).toEqual(['check_pid', 'command', 'kill_pid', 'timeout'])
    expect(t.parameters.properties.timeout).toEqual({ type: 'integer', description: 'Timeout in ms before auto-backgrounding (default: 120000)' })
    const runner = new CommandRunner({ outputDir: logs, cwd: work })
    expect(await runner.call({ command: 'echo hi' })).toEqual({ text: 'stdout:\nhi\n\nexit code: 0', isError: false })
    const bg = await runner.call({ command: 'echo a; sleep 0.3; echo b; sleep 5', timeout: 100 })
    const pid = Number(/\(pid (\d+)\)/.exec(bg.text)![1])
    await sleep(600)
    const c = await runner.call({ check_pid: pid })
    expect(c.text).toMatch(new RegExp(`^\\[Process ${pid} still running\\.\\n\\nNew output since last check \\(1 line\\):\\n\\nstdout:\\nb\\n`))
    expect(await runner.call({ command: 'ls', kill_pid: pid })).toEqual({
      text: 'exec: give exactly one of command, check_pid, kill_pid (EINVAL)',
      isError: true,
    })
    expect((await runner.call({ check_pid: 999999 })).isError).toBe(true)
    await expect(runner.call(3 as never)).rejects.toThrow(expect.objectContaining({ code: 'EINVAL' }))
    await runner.close()
  }, 15_000)

  it('a progress bar of 20,000 redraws costs one line; the log keeps the raw bytes', async () => {
    const r = await runCommand(
      `python3 -c "
import sys
for i in range(20001):
    sys.stdout.write('\\r[%-50s] %d/20000' % ('#' * (i * 50 // 20000), i))
print()
print('done')"`,
      opts,
    )
    expect(r.stdout).toBe(`[${'#'.repeat(50)}] 20000/20000\ndone\n`)
    expect(r.text).toBe(`stdout:\n[${'#'.repeat(50)}] 20000/20000\ndone\n\nexit code: 0`)
  })

  it('binary output is named with its size and kept in the log', async () => {
    const r = await runCommand('head -c 1000 /dev/urandom', opts)
    expect(r.truncation.stdout.binary).toBe(true)
    expect(r.text).toBe(`stdout:\n[binary output: 1000 bytes, saved to ${r.fullOutputPath}]\n\nexit code: 0`)
    expect(readFileSync(r.fullOutputPath!).length).toBe(1000)
  })

  it('no output prints (no output) once; a tiny maxBytes keeps the last character', async () => {
    expect((await runCommand('true', opts)).text).toBe('(no output)\n\nexit code: 0')
    const r = await runCommand('printf abc', { ...opts, maxBytes: 1 })
    expect(r.stdout).toBe('c')
  })

  it('exec-native mcp answers initialize, tools/list and tools/call over stdio', async () => {
    const child = spawn(process.execPath, [join(__dirname, '..', 'bin', 'exec-native.mjs'), 'mcp', '-C', work], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines: string[] = []
    let buf = ''
    child.stdout.on('data', (d) => {
      buf += d
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push(buf.slice(0, i))
        buf = buf.slice(i + 1)
      }
    })
    const reply = async (id: number) => {
      const end = Date.now() + 10_000
      while (Date.now() < end) {
        const m = lines.map((l) => JSON.parse(l)).find((m) => m.id === id)
        if (m) return m
        await sleep(20)
      }
      throw new Error(`no reply to ${id}`)
    }
    const send = (m: object) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`)
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })
    expect((await reply(1)).result.serverInfo.name).toBe('exec-native')
    send({ method: 'notifications/initialized' })
    send({ id: 2, method: 'tools/list' })
    expect((await reply(2)).result.tools.map((t: { name: string }) => t.name)).toEqual(['bash', 'exec_command', 'write_stdin', 'execute_code'])
    send({ id: 3, method: 'tools/call', params: { name: 'bash', arguments: { command: 'pwd' } } })
    expect((await reply(3)).result).toMatchObject({ content: [{ type: 'text', text: `stdout:\n${work}\n\nexit code: 0` }], isError: false })
    child.stdin.end()
    const code = await new Promise((res) => child.on('exit', res))
    expect(code).toBe(0)
  }, 20_000)
})

describe('interactive commands: runner.start / runner.write', () => {
  it('a prompt is answered at once with awaitingInput, and write sends the answer', { timeout: 30_000 }, async () => {
    const r = new CommandRunner({ cwd: tmpdir() })
    try {
      const t0 = Date.now()
      const a = await r.start(`read -p 'Continue? ' x; echo "got $x"`)
      // well before the 10 s yield: the prompt was seen waiting
      expect(Date.now() - t0).toBeLessThan(5000)
      expect(a).toMatchObject({ output: 'Continue? ', awaitingInput: true, exitCode: null })
      expect(typeof a.sessionId).toBe('number')
      expect(a.text).toBe(`Continue? \n\n[waiting for input: session ${a.sessionId} (pid ${a.pid}) is reading its terminal; send keys with write(${a.sessionId}, ...)]`)
      expect(r.sessions()).toEqual([a.sessionId])
      const b = await r.write(a.sessionId!, 'yes\r')
      expect(b).toMatchObject({ output: 'yes\ngot yes\n', exitCode: 0, sessionId: null, awaitingInput: false })
      expect(b.text).toBe('yes\ngot yes\n\nexit code: 0')
      expect(r.sessions()).toEqual([])
      const gone = await r.write(a.sessionId!, 'x')
      expect(gone).toMatchObject({ isError: true, errorCode: 'ESRCH' })
    } finally {
      await r.close()
    }
  })

  it('python input(), Ctrl-C, pipes, and a command that just ends', { timeout: 30_000 }, async () => {
    const r = new CommandRunner({ cwd: tmpdir() })
    try {
      const py = await r.start(`python3 -c "x = input('name? '); print('hi', x)"`)
      expect(py).toMatchObject({ output: 'name? ', awaitingInput: true })
      expect((await r.write(py.sessionId!, 'bob\r')).output).toBe('bob\nhi bob\n')

      const sl = await r.start('sleep 30', { yieldMs: 300 })
      // sleeping is not waiting for input
      expect(sl).toMatchObject({ awaitingInput: false, exitCode: null })
      expect(sl.text).toContain(`[still running after 300 ms: session ${sl.sessionId}`)
      const c = await r.write(sl.sessionId!, '\u0003', { yieldMs: 5000 })
      expect(c).toMatchObject({ signal: 'SIGINT', sessionId: null })
      expect(isRunning(sl.pid)).toBe(false)

      const done = await r.start('echo hi; sleep 0.2; echo bye')
      expect(done).toMatchObject({ output: 'hi\nbye\n', exitCode: 0, sessionId: null })

      const cat = await r.start('cat', { tty: false, yieldMs: 5000 })
      expect(cat).toMatchObject({ awaitingInput: true, output: '' })
      expect(cat.text).toContain('is reading its stdin')
      const echoed = await r.write(cat.sessionId!, 'piped\n')
      expect(echoed).toMatchObject({ output: 'piped\n', awaitingInput: true })
      const killed = await r.killSession(cat.sessionId!)
      expect(killed.sessionId).toBe(null)
      expect(isRunning(cat.pid)).toBe(false)
    } finally {
      await r.close()
    }
  })

  it('output is tail-truncated per answer; close() kills running sessions; checkBackground reports awaitingInput', { timeout: 30_000 }, async () => {
    const r = new CommandRunner({ cwd: tmpdir(), maxLines: 5 })
    const many = await r.start('seq 1 100; read x')
    expect(many.output).toBe('96\n97\n98\n99\n100\n')
    expect(many.truncation).toMatchObject({ truncated: true, truncatedBy: 'lines', totalLines: 100 })
    expect(many.awaitingInput).toBe(true)
    // background commands read /dev/null; a pipe inside a pipeline is not input
    const bg = await r.run('sleep 1000 | cat', { background: true })
    await sleep(300)
    expect(r.checkBackground(bg.pid).awaitingInput).toBe(false)
    // while a session's own pipeline is not waiting for its input either
    const pipeline = await r.start('sleep 1000 | cat', { tty: false, yieldMs: 600 })
    expect(pipeline).toMatchObject({ awaitingInput: false, exitCode: null })
    expect(await r.close()).toBeGreaterThanOrEqual(3)
    expect(isRunning(many.pid)).toBe(false)
    expect((await r.start('true')).errorCode).toBe('ECANCELED')
  })
})
