import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ProcessManager } from '../index.js'
import type { ProcessEvent } from '../index.js'

const PY = 'python3'

/** Read with long polls until `pred(text)` holds or the process closes. */
async function readUntil(
  m: ProcessManager,
  id: string,
  pred: (text: string) => boolean,
  state: { after: number; text: string },
  limitMs = 15000,
) {
  const deadline = Date.now() + limitMs
  while (Date.now() < deadline) {
    const r = await m.read(id, { afterSeq: state.after, waitMs: 500 })
    for (const c of r.chunks) state.text += c.data.toString('utf8')
    state.after = r.lastSeq
    if (pred(state.text)) return state.text
    if (r.closed) break
  }
  throw new Error(`timed out waiting; got: ${JSON.stringify(state.text.slice(-500))}`)
}

function alive(pid: number) {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

async function gone(pid: number, ms = 5000) {
  const deadline = Date.now() + ms
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  return !alive(pid)
}

describe('ProcessManager over a PTY', () => {
  it('drives a python REPL: 1+1, resize + stty size, Ctrl-C survives', async () => {
    const m = new ProcessManager()
    const { processId, pid } = await m.start({
      processId: 'repl',
      argv: [PY, '-i', '-q'],
      env: { PYTHON_BASIC_REPL: '1' },
      io: { type: 'pty', rows: 24, cols: 80 },
    })
    expect(processId).toBe('repl')
    expect(pid).toBeGreaterThan(0)
    const st = { after: 0, text: '' }
    await readUntil(m, 'repl', (t) => t.includes('>>> '), st)
    await m.write('repl', '1+1\r')
    await readUntil(m, 'repl', (t) => /\r\n2\r\n/.test(t), st)

    m.resize('repl', { rows: 40, cols: 132 })
    await m.write('repl', "import subprocess; subprocess.run(['stty', 'size'])\r")
    await readUntil(m, 'repl', (t) => t.includes('40 132'), st)

    // Ctrl-C interrupts the foreground program, the REPL survives
    await m.write('repl', 'import time; time.sleep(100)\r')
    await new Promise((r) => setTimeout(r, 300))
    const t0 = Date.now()
    await m.write('repl', '\x03')
    await readUntil(m, 'repl', (t) => t.includes('KeyboardInterrupt'), st)
    expect(Date.now() - t0).toBeLessThan(5000)
    await m.write('repl', '6*7\r')
    await readUntil(m, 'repl', (t) => t.includes('42'), st)
    expect((await m.wait('repl', { timeoutMs: 50 })).running).toBe(true)

    await m.write('repl', 'exit()\r')
    const exit = await m.wait('repl', { timeoutMs: 10000 })
    expect(exit).toEqual({ running: false, exitCode: 0, signal: null })
    const snap = m.snapshot('repl')
    expect(snap.terminal.toString()).toContain('KeyboardInterrupt')
    expect(snap.stdout.length).toBe(0)
  })

  it('Ctrl-C interrupts sleep 100 in a shell and the shell survives', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: ['bash', '--norc', '-i'], io: { type: 'pty', rows: 24, cols: 80 } })
    const st = { after: 0, text: '' }
    await m.write(processId, 'stty size; sleep 100; echo after-$?\r')
    await readUntil(m, processId, (t) => t.includes('24 80'), st)
    await new Promise((r) => setTimeout(r, 200))
    const t0 = Date.now()
    await m.write(processId, '\x03')
    await m.write(processId, 'echo still-here\r')
    await readUntil(m, processId, (t) => t.includes('still-here\r\n'), st)
    expect(Date.now() - t0).toBeLessThan(5000)
    await m.close()
    expect((await m.wait(processId)).running).toBe(false)
  })

  it('delivers all output written before a fast exit, before exited and closed', async () => {
    const m = new ProcessManager()
    for (let i = 0; i < 5; i++) {
      const events: ProcessEvent[] = []
      let closed!: () => void
      const done = new Promise<void>((r) => (closed = r))
      await m.start({ argv: ['sh', '-c', 'seq 1 3000; echo LAST'], io: { type: 'pty', rows: 24, cols: 80 } }, (e) => {
        events.push(e)
        if (e.type === 'closed') closed()
      })
      await done
      const types = events.map((e) => e.type)
      expect(types[0]).toBe('started')
      expect(types.slice(-2)).toEqual(['exited', 'closed'])
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1))
      const text = events
        .filter((e) => e.type === 'output')
        .map((e) => e.data!.toString())
        .join('')
      expect(text).toContain('2999\r\n3000\r\nLAST\r\n')
      expect(events.every((e) => e.type !== 'output' || e.stream === 'pty')).toBe(true)
    }
  })

  it('the child does not inherit the SIGXFSZ and SIGPIPE that Node ignores', async () => {
    const ignored = (status: string) => BigInt(`0x${/SigIgn:\s*([0-9a-f]+)/.exec(status)![1]}`)
    const bit = (sig: number) => 1n << BigInt(sig - 1)
    // the premise: Node ignores both (SIGPIPE 13, SIGXFSZ 25)
    const mine = ignored(readFileSync('/proc/self/status', 'utf8'))
    expect(mine & bit(13)).toBe(bit(13))
    expect(mine & bit(25)).toBe(bit(25))
    const m = new ProcessManager()
    const dir = mkdtempSync(join(tmpdir(), 'exec-pty-'))
    try {
      const script = `grep SigIgn /proc/self/status; (ulimit -f 1; head -c 100000 /dev/zero > ${dir}/f); echo rc=$?`
      const { processId } = await m.start({ argv: ['bash', '-c', script], io: { type: 'pty', rows: 24, cols: 80 } })
      expect((await m.wait(processId, { timeoutMs: 10000 })).exitCode).toBe(0)
      const text = m.snapshot(processId).terminal.toString()
      const child = ignored(text)
      expect(child & (bit(13) | bit(25))).toBe(0n)
      // head dies of SIGXFSZ (128+25) instead of seeing EFBIG
      expect(text).toContain('rc=153')
    } finally {
      await m.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('rejects resize and closeStdin where they do not apply', async () => {
    const m = new ProcessManager()
    const p = await m.start({ argv: ['true'] })
    expect(() => m.resize(p.processId, { rows: 10, cols: 10 })).toThrow(expect.objectContaining({ code: 'EINVAL' }))
    const t = await m.start({ argv: ['sleep', '5'], io: { type: 'pty', rows: 5, cols: 5 } })
    await expect(m.closeStdin(t.processId)).rejects.toMatchObject({ code: 'EINVAL' })
    await m.close()
  })
})

describe('ProcessManager over pipes', () => {
  it('cat: write, closeStdin, read it all back, exit 0', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: ['cat'], io: { type: 'pipe', stdin: 'open' } })
    await m.write(processId, 'hello ')
    await m.write(processId, Buffer.from('world\n'))
    await m.closeStdin(processId)
    expect(await m.wait(processId, { timeoutMs: 10000 })).toEqual({ running: false, exitCode: 0, signal: null })
    expect(m.snapshot(processId).stdout.toString()).toBe('hello world\n')
    const r = await m.read(processId)
    expect(Buffer.concat(r.chunks.map((c) => c.data)).toString()).toBe('hello world\n')
    expect(r.closed).toBe(true)
    await expect(m.write(processId, 'more')).rejects.toMatchObject({ code: 'EPIPE' })
  })

  it('drives python3 -i over pipes', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: [PY, '-i', '-q', '-u'], io: { type: 'pipe', stdin: 'open' } })
    await m.write(processId, 'print(6*7)\n')
    await readUntil(m, processId, (t) => t.includes('42'), { after: 0, text: '' })
    await m.closeStdin(processId)
    expect((await m.wait(processId, { timeoutMs: 10000 })).exitCode).toBe(0)
  })

  it('stdin is closed by default: write gives EPIPE, not a crash', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: ['sh', '-c', 'read x; echo "got:$x:$?"'] })
    await expect(m.write(processId, 'x\n')).rejects.toMatchObject({
      code: 'EPIPE',
      message: expect.stringMatching(/^exec: .*\(EPIPE\)$/),
    })
    await m.wait(processId)
    expect(m.snapshot(processId).stdout.toString()).toBe('got::1\n')
  })

  it('64 writes of 64 KiB to stderr with nothing on stdout never deadlock', async () => {
    const m = new ProcessManager()
    const t0 = Date.now()
    const { processId } = await m.start({
      argv: [PY, '-c', "import sys\nfor _ in range(64):\n  sys.stderr.buffer.write(b'e' * 65536); sys.stderr.flush()"],
    })
    const exit = await m.wait(processId, { timeoutMs: 20000 })
    expect(exit.exitCode).toBe(0)
    expect(Date.now() - t0).toBeLessThan(20000)
    const s = m.snapshot(processId)
    expect(s.stdout.length).toBe(0)
    expect(s.truncated).toBe(true)
    expect(s.omittedBytes + 1024 * 1024).toBe(64 * 65536)
  })

  it('100 MB of output keeps memory bounded; snapshot has head + marker + tail', async () => {
    const m = new ProcessManager({ retainedOutputBytes: 64 * 1024 })
    const before = process.memoryUsage().rss
    const { processId } = await m.start({
      argv: ['sh', '-c', "echo HEAD; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo TAIL"],
    })
    const exit = await m.wait(processId, { timeoutMs: 60000 })
    expect(exit.exitCode).toBe(0)
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024)
    const s = m.snapshot(processId)
    const text = s.stdout.toString()
    expect(text.startsWith('HEAD\nxxxx')).toBe(true)
    expect(text).toMatch(/\n\[Output truncated\] \d+ bytes omitted\n/)
    expect(text.endsWith('xxxx\nTAIL\n')).toBe(true)
    expect(s.stdout.length).toBeLessThanOrEqual(64 * 1024 + 50)
    expect(s.omittedBytes).toBeGreaterThan(99_000_000)
    // a late reader gets the retained tail, and is told it missed some
    const r = await m.read(processId)
    expect(r.truncated).toBe(true)
    const tail = Buffer.concat(r.chunks.map((c) => c.data))
    expect(tail.length).toBeLessThanOrEqual(64 * 1024)
    expect(tail.toString().endsWith('\nTAIL\n')).toBe(true)
  })

  it('streams 100 MB through onEvent with bounded memory', async () => {
    const m = new ProcessManager({ retainedOutputBytes: 64 * 1024 })
    const before = process.memoryUsage().rss
    let bytes = 0
    let maxRss = 0
    let closed!: () => void
    const done = new Promise<void>((r) => (closed = r))
    await m.start({ argv: ['head', '-c', '100000000', '/dev/zero'] }, (e) => {
      if (e.type === 'output') bytes += e.data!.length
      if (e.type === 'closed') closed()
      maxRss = Math.max(maxRss, process.memoryUsage().rss)
    })
    await done
    expect(bytes).toBe(100_000_000)
    expect(maxRss - before).toBeLessThan(128 * 1024 * 1024)
  })

  it('read with afterSeq returns each chunk exactly once and in order', async () => {
    const m = new ProcessManager()
    const events: ProcessEvent[] = []
    const { processId } = await m.start(
      { argv: ['sh', '-c', 'for i in $(seq 1 20); do echo out$i; echo err$i >&2; sleep 0.01; done'] },
      (e) => events.push(e),
    )
    let after = 0
    const seen: number[] = []
    const got: Record<string, string> = { stdout: '', stderr: '' }
    for (;;) {
      const r = await m.read(processId, { afterSeq: after, waitMs: 2000, maxBytes: 8 })
      for (const c of r.chunks) {
        expect(c.seq).toBeGreaterThan(after)
        seen.push(c.seq)
        got[c.stream] += c.data.toString()
      }
      expect(r.truncated).toBe(false)
      after = r.lastSeq
      if (r.closed) break
    }
    expect(new Set(seen).size).toBe(seen.length)
    expect([...seen].sort((a, b) => a - b)).toEqual(seen)
    expect(got.stdout).toBe(Array.from({ length: 20 }, (_, i) => `out${i + 1}\n`).join(''))
    expect(got.stderr).toBe(Array.from({ length: 20 }, (_, i) => `err${i + 1}\n`).join(''))
    // the chunks are the output events, same seqs
    await new Promise((r) => setTimeout(r, 100))
    expect(events.filter((e) => e.type === 'output').map((e) => e.seq)).toEqual(seen)
    // a late reader gets what was retained
    const late = await m.read(processId, { afterSeq: 0 })
    expect(late.chunks.map((c) => c.seq)).toEqual(seen)
  })

  it('long poll returns on output, then after waitMs when nothing comes', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: ['sh', '-c', 'sleep 0.3; echo late; sleep 5'] })
    let t0 = Date.now()
    const r = await m.read(processId, { afterSeq: 1, waitMs: 10000 })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200)
    expect(Date.now() - t0).toBeLessThan(5000)
    expect(r.chunks[0].data.toString()).toBe('late\n')
    t0 = Date.now()
    const r2 = await m.read(processId, { afterSeq: r.lastSeq, waitMs: 200 })
    expect(r2.chunks).toEqual([])
    expect(r2.running).toBe(true)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150)
    await m.close()
  })
})

describe('ProcessManager lifecycle', () => {
  it('terminate graceful vs force on a process that traps SIGTERM', async () => {
    const m = new ProcessManager()
    const polite = await m.start({
      argv: ['sh', '-c', "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done"],
    })
    const stubborn = await m.start({ argv: ['sh', '-c', "trap '' TERM; echo ready; while :; do sleep 0.05; done"] })
    for (const p of [polite, stubborn]) await readUntil(m, p.processId, (t) => t.includes('ready'), { after: 0, text: '' })

    let t0 = Date.now()
    expect(await m.terminate(polite.processId, { mode: 'graceful', timeoutMs: 5000 })).toEqual({
      running: false,
      exitCode: 0,
      signal: null,
    })
    expect(Date.now() - t0).toBeLessThan(3000)
    expect(m.snapshot(polite.processId).stdout.toString()).toContain('bye')

    t0 = Date.now()
    const r = await m.terminate(stubborn.processId, { mode: 'graceful', timeoutMs: 300 })
    expect(r).toEqual({ running: false, exitCode: 137, signal: 'SIGKILL' })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290)

    const s = await m.start({ argv: ['sh', '-c', "trap '' TERM; sleep 30"] })
    t0 = Date.now()
    expect((await m.terminate(s.processId, { mode: 'force' })).signal).toBe('SIGKILL')
    expect(Date.now() - t0).toBeLessThan(2000)
    expect(await gone(s.pid)).toBe(true)
  })

  it('wait with a timeout resolves running: true', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({ argv: ['sleep', '30'] })
    const t0 = Date.now()
    expect(await m.wait(processId, { timeoutMs: 100 })).toEqual({ running: true, exitCode: null, signal: null })
    expect(Date.now() - t0).toBeLessThan(3000)
    await m.close()
    expect((await m.wait(processId)).running).toBe(false)
  })

  it('enforces maxProcesses, rejects duplicates, expires exited processes', async () => {
    const m = new ProcessManager({ maxProcesses: 2, exitedRetentionMs: 300 })
    await m.start({ processId: 'a', argv: ['sleep', '30'] })
    await expect(m.start({ processId: 'a', argv: ['true'] })).rejects.toMatchObject({ code: 'EEXIST' })
    // b must still be running when the third start comes (a `true` may already have closed)
    const b = await m.start({ argv: ['sleep', '0.5'] })
    await expect(m.start({ argv: ['true'] })).rejects.toMatchObject({
      code: 'EBUSY',
      message: expect.stringContaining('maxProcesses is 2'),
    })
    await m.wait(b.processId)
    expect(m.snapshot(b.processId).exitCode).toBe(0)
    expect(
      m
        .list()
        .map((p) => p.processId)
        .sort(),
    ).toEqual(['a', b.processId].sort())
    await new Promise((r) => setTimeout(r, 700))
    expect(() => m.snapshot(b.processId)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(m.list().map((p) => p.processId)).toEqual(['a'])
    await m.close()
    await expect(m.start({ argv: ['true'] })).rejects.toMatchObject({ code: 'EINVAL' })
  })

  it('reports spawn failures as a failed event and a rejection', async () => {
    const m = new ProcessManager()
    const events: ProcessEvent[] = []
    await expect(m.start({ processId: 'x', argv: ['no-such-program-xyz'] }, (e) => events.push(e))).rejects.toMatchObject({
      code: 'ENOENT',
    })
    await new Promise((r) => setTimeout(r, 50))
    expect(events).toMatchObject([{ type: 'failed', processId: 'x', seq: 1, errorCode: 'ENOENT' }])
    await expect(m.start({ argv: ['true'], cwd: '/no/such/dir' })).rejects.toMatchObject({ code: 'ENOENT' })
  })

  it('gives clear errors for bad arguments and unknown ids', async () => {
    const m = new ProcessManager()
    await expect(m.start({ argv: [] })).rejects.toMatchObject({ code: 'EINVAL' })
    await expect(m.start({ argv: 'ls' } as any)).rejects.toThrow(TypeError)
    await expect(m.start({ argv: ['cat'], io: { type: 'tty' } } as any)).rejects.toMatchObject({ code: 'EINVAL' })
    await expect(m.start({ argv: ['cat'], io: { type: 'pty', rows: 0, cols: 80 } })).rejects.toMatchObject({
      code: 'EINVAL',
    })
    await expect(m.write('ghost', 'x')).rejects.toMatchObject({ code: 'ESRCH' })
    await expect(m.wait('ghost')).rejects.toMatchObject({ code: 'ESRCH' })
    await expect(m.read('ghost')).rejects.toMatchObject({ code: 'ESRCH' })
    await expect(m.terminate('ghost')).rejects.toMatchObject({ code: 'ESRCH' })
    expect(() => m.snapshot('ghost')).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    expect(() => new ProcessManager({ maxProcesses: -1 })).toThrow(expect.objectContaining({ code: 'EINVAL' }))
    // a wrong argument is a TypeError (as in CommandRunner and the sessions); an unknown id is not
    expect(() => new ProcessManager({ maxProcesses: 'x' } as any)).toThrow(TypeError)
    expect(() => m.snapshot(42 as any)).toThrow(TypeError)
    expect(() => m.resize('ghost', { rows: 'a' } as any)).toThrow(TypeError)
    let ghost: unknown
    try {
      m.snapshot('ghost')
    } catch (e) {
      ghost = e
    }
    expect(ghost).not.toBeInstanceOf(TypeError)
    expect(() => m.resize('ghost', { rows: 10, cols: 10 })).toThrow(expect.objectContaining({ code: 'ESRCH' }))
  })

  it('close() terminates everything it started', async () => {
    const m = new ProcessManager()
    const a = await m.start({ argv: ['sh', '-c', "trap '' TERM; sleep 30"] })
    const b = await m.start({ argv: ['sleep', '30'], io: { type: 'pty', rows: 10, cols: 40 } })
    await m.close()
    expect(await gone(a.pid)).toBe(true)
    expect(await gone(b.pid)).toBe(true)
    expect(m.list().every((p) => !p.running)).toBe(true)
  })
})

describe('ProcessManager.close', () => {
  it('waits for processes still being started when it is called (10 rounds of 20 starts, close after 1 ms)', async () => {
    const { isRunning } = await import('./helpers')
    let runningAfterClose = 0
    for (let round = 0; round < 10; round++) {
      const m = new ProcessManager({ maxProcesses: 64 })
      const starts = Array.from({ length: 20 }, () => m.start({ argv: ['sleep', '30'] }).catch(() => null))
      await new Promise((r) => setTimeout(r, 1))
      await m.close()
      // close() has resolved: whatever started is gone now, not later
      const started = (await Promise.all(starts)).filter((s) => s !== null)
      runningAfterClose += started.filter((s) => isRunning(s!.pid)).length
      for (const s of started) if (isRunning(s!.pid)) process.kill(s!.pid, 'SIGKILL')
    }
    expect(runningAfterClose).toBe(0)
  })
})

describe('PTY descriptors', () => {
  it('a finished PTY holds no /dev/ptmx descriptor while it is retained', async () => {
    const { readdirSync } = await import('node:fs')
    const fds = () => readdirSync('/proc/self/fd').length
    const m = new ProcessManager({ exitedRetentionMs: 60_000 })
    const warm = await m.start({ argv: ['true'], io: { type: 'pty', rows: 24, cols: 80 } })
    await m.wait(warm.processId, { timeoutMs: 10_000 })
    const before = fds()
    for (let i = 0; i < 40; i++) {
      let closed!: () => void
      const done = new Promise<void>((r) => (closed = r))
      const { processId } = await m.start({ argv: ['echo', `run ${i}`], io: { type: 'pty', rows: 24, cols: 80 } }, (e) => {
        if (e.type === 'closed') closed()
      })
      await done
      expect(m.snapshot(processId).running).toBe(false)
    }
    // all 40 are still retained (readable), none holds its terminal
    expect(m.list().length).toBe(41)
    expect(fds() - before).toBeLessThan(5)
    expect(() => m.resize(warm.processId, { rows: 30, cols: 100 })).toThrow(/has ended: its terminal is closed/)
    await m.close()
  })
})
