// Limits, environment lists and escape cleanup on every entry point beyond
// executeAndCapture/spawnCall: ProcessManager (pipes and PTYs), runCommand /
// CommandRunner, PythonSession and ShellSession.
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { CommandRunner, ProcessManager, PythonSession, ShellSession, runCommand } from '../index.js'
import { isRunning, sleep, waitGone } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'exec-native-limits-'))
let n = 0
const pidFile = () => join(dir, `pids-${++n}`)

/** Pids written to `f` once `count` are there (bounded wait). */
async function pidsIn(f: string, count = 1, ms = 10_000): Promise<number[]> {
  const end = Date.now() + ms
  for (;;) {
    let pids: number[] = []
    try {
      pids = readFileSync(f, 'utf8')
        .split('\n')
        .map((l) => Number(l.trim()))
        .filter((x) => Number.isInteger(x) && x > 0)
    } catch {}
    if (pids.length >= count || Date.now() > end) return pids
    await sleep(20)
  }
}

// a descendant that leaves the group and the session, and keeps running
const ESCAPE = (f: string) => `setsid sh -c 'echo $$ >> "${f}"; exec sleep 1000' </dev/null >/dev/null 2>&1 &`
// 512 MiB, touched (bytearray zero-fills), under a 256 MiB limit
const MEMORY_HOG = 'x = bytearray(512 * 1024 * 1024); import time; time.sleep(30)'
const MEM_LIMIT = { memoryBytes: 256 * 1024 * 1024 }
const MEM_MESSAGE = 'exec: memory limit of 256 MiB exceeded (ELIMIT)'
// bounded: 100 processes at most, whatever happens to the limit
const FORKS = 'for i in $(seq 100); do sleep 10 & done; wait'
const PROC_LIMIT = { maxProcesses: 20 }
const PROC_MESSAGE = 'exec: process limit of 20 exceeded (ELIMIT)'

process.env.EXEC_NATIVE_TEST_TOKEN = 'secret'

afterAll(() => {
  delete process.env.EXEC_NATIVE_TEST_TOKEN
})

describe('ProcessManager', () => {
  it('terminate (pipe) leaves no escaped descendant', async () => {
    const m = new ProcessManager()
    const f = pidFile()
    const { processId } = await m.start({ argv: ['bash', '-c', `${ESCAPE(f)}\nsleep 1000`] })
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    expect(isRunning(pids[0])).toBe(true)
    const r = await m.terminate(processId, { mode: 'graceful', timeoutMs: 500 })
    expect(r.running).toBe(false)
    expect(await waitGone(pids)).toEqual([])
    await m.close()
  })

  it('terminate (pty) leaves no escaped descendant', async () => {
    const m = new ProcessManager()
    const f = pidFile()
    const { processId } = await m.start({
      argv: ['bash', '-c', `${ESCAPE(f)}\nsleep 1000`],
      io: { type: 'pty', rows: 24, cols: 80 },
    })
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    const r = await m.terminate(processId, { mode: 'force' })
    expect(r.running).toBe(false)
    expect(await waitGone(pids)).toEqual([])
    await m.close()
  })

  it('close() leaves no escaped descendant (pipe and pty)', async () => {
    const m = new ProcessManager()
    const f1 = pidFile()
    const f2 = pidFile()
    await m.start({ argv: ['bash', '-c', `${ESCAPE(f1)}\nsleep 1000`] })
    await m.start({ argv: ['bash', '-c', `${ESCAPE(f2)}\nsleep 1000`], io: { type: 'pty', rows: 24, cols: 80 } })
    const pids = [...(await pidsIn(f1)), ...(await pidsIn(f2))]
    expect(pids.length).toBe(2)
    await m.close()
    expect(await waitGone(pids)).toEqual([])
  })

  it('an escape is swept when the process exits on its own (pty)', async () => {
    const m = new ProcessManager()
    const f = pidFile()
    const { processId } = await m.start({
      argv: ['bash', '-c', `${ESCAPE(f)}\nwhile [ ! -s "${f}" ]; do sleep 0.02; done`],
      io: { type: 'pty', rows: 24, cols: 80 },
    })
    const r = await m.wait(processId, { timeoutMs: 10_000 })
    expect(r.running).toBe(false)
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    expect(await waitGone(pids)).toEqual([])
    await m.close()
  })

  it('PTY processes carry the run mark', async () => {
    const m = new ProcessManager()
    const { processId } = await m.start({
      argv: ['sh', '-c', 'echo "mark=$EXEC_NATIVE_RUN_ID"'],
      io: { type: 'pty', rows: 24, cols: 80 },
    })
    await m.wait(processId, { timeoutMs: 10_000 })
    const s = m.snapshot(processId)
    expect(s.terminal.toString()).toMatch(/mark=\d+\.\d+\.\d+/)
    await m.close()
  })

  for (const io of [undefined, { type: 'pty' as const, rows: 24, cols: 80 }]) {
    const kind = io ? 'pty' : 'pipe'
    it(`memory limit stops the tree (${kind})`, async () => {
      const m = new ProcessManager()
      const events: any[] = []
      const t0 = Date.now()
      const { processId } = await m.start({ argv: ['python3', '-c', MEMORY_HOG], io, limits: MEM_LIMIT }, (e) =>
        events.push(e),
      )
      const r = await m.wait(processId, { timeoutMs: 20_000 })
      expect(r.running).toBe(false)
      expect(r.errorCode).toBe('ELIMIT')
      expect(r.error).toBe(MEM_MESSAGE)
      expect(Date.now() - t0).toBeLessThan(15_000)
      await sleep(50)
      const exited = events.find((e) => e.type === 'exited')
      expect(exited?.errorCode).toBe('ELIMIT')
      await m.close()
    })

    it(`maxProcesses stops a bounded fork (${kind})`, async () => {
      const m = new ProcessManager()
      const { processId } = await m.start({ argv: ['bash', '-c', FORKS], io, limits: PROC_LIMIT })
      const r = await m.wait(processId, { timeoutMs: 20_000 })
      expect(r.running).toBe(false)
      expect(r.errorCode).toBe('ELIMIT')
      expect(r.error).toBe(PROC_MESSAGE)
      await m.close()
    })

    it(`cpuSeconds is reported (${kind})`, async () => {
      const m = new ProcessManager()
      const { processId } = await m.start({ argv: ['python3', '-c', 'while True: pass'], io, limits: { cpuSeconds: 1 } })
      const r = await m.wait(processId, { timeoutMs: 20_000 })
      expect(r.running).toBe(false)
      expect(r.signal).toBe('SIGXCPU')
      expect(r.error).toBe('exec: CPU time limit of 1s exceeded (ELIMIT)')
      await m.close()
    })
  }

  it('envDenylist and envAllowlist', async () => {
    const m = new ProcessManager()
    const script = 'echo "token=${EXEC_NATIVE_TEST_TOKEN:-none} home=${HOME:-none} own=$OWN"'
    const a = await m.start({ argv: ['sh', '-c', script], envDenylist: ['*_TOKEN'], env: { OWN: '1' } })
    const b = await m.start({ argv: ['sh', '-c', script], envAllowlist: ['PATH'], env: { OWN: '2' } })
    const c = await m.start({ argv: ['sh', '-c', script], io: { type: 'pty', rows: 24, cols: 80 }, envDenylist: ['*_TOKEN'] })
    for (const id of [a.processId, b.processId, c.processId]) await m.wait(id, { timeoutMs: 10_000 })
    expect(m.snapshot(a.processId).stdout.toString()).toBe(`token=none home=${process.env.HOME} own=1\n`)
    expect(m.snapshot(b.processId).stdout.toString()).toBe('token=none home=none own=2\n')
    expect(m.snapshot(c.processId).terminal.toString()).toContain('token=none')
    await m.close()
  })

  it('rejects bad limits with a TypeError naming spec', async () => {
    const m = new ProcessManager()
    await expect(m.start({ argv: ['true'], limits: { memoryBytes: -1 } })).rejects.toThrow(/spec\.limits\.memoryBytes/)
    await m.close()
  })
})

describe('runCommand / CommandRunner', () => {
  it('killBackground leaves no escaped descendant', async () => {
    const runner = new CommandRunner({ outputDir: dir })
    const f = pidFile()
    const r = await runner.run(`${ESCAPE(f)}\nsleep 1000`, { background: true })
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    const k = await runner.killBackground(r.pid)
    expect(k.running).toBe(false)
    expect(await waitGone(pids)).toEqual([])
    await runner.close()
  })

  it('close() leaves no escaped descendant', async () => {
    const runner = new CommandRunner({ outputDir: dir })
    const f = pidFile()
    await runner.run(`${ESCAPE(f)}\nsleep 1000`, { background: true })
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    await runner.close()
    expect(await waitGone(pids)).toEqual([])
  })

  it('memory limit (foreground)', async () => {
    const r = await runCommand(`python3 -c '${MEMORY_HOG}'`, { limits: MEM_LIMIT, outputDir: dir })
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
    expect(r.isError).toBe(true)
    expect(r.text).toContain(MEM_MESSAGE)
  })

  it('maxProcesses (runner default) and a call that replaces it', async () => {
    const runner = new CommandRunner({ outputDir: dir, limits: PROC_LIMIT })
    const r = await runner.run(FORKS)
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(PROC_MESSAGE)
    const ok = await runner.run('for i in $(seq 30); do sleep 0.5 & done; wait; echo done', { limits: { maxProcesses: 100 } })
    expect(ok.errorCode).toBeUndefined()
    expect(ok.stdout).toBe('done\n')
    await runner.close()
  })

  it('memory limit on a background command shows in the check', async () => {
    const runner = new CommandRunner({ outputDir: dir })
    const r = await runner.run(`python3 -c '${MEMORY_HOG}'`, { limits: MEM_LIMIT, background: true })
    let c = runner.checkBackground(r.pid)
    for (let i = 0; i < 300 && c.running; i++) {
      await sleep(50)
      c = runner.checkBackground(r.pid)
    }
    expect(c.running).toBe(false)
    expect(c.errorCode).toBe('ELIMIT')
    expect(c.text).toContain(MEM_MESSAGE)
    await runner.close()
  })

  it('envDenylist (call) and envAllowlist (runner)', async () => {
    const r = await runCommand('echo "${EXEC_NATIVE_TEST_TOKEN:-none} $PAGER"', { envDenylist: ['EXEC_NATIVE_*'] })
    expect(r.stdout).toBe('none cat\n')
    const runner = new CommandRunner({ envAllowlist: ['PATH'] })
    const s = await runner.run('echo "${EXEC_NATIVE_TEST_TOKEN:-none} ${HOME:-nohome} $PAGER"')
    expect(s.stdout).toBe('none nohome cat\n')
    await runner.close()
  })
})

describe('sessions', () => {
  it('PythonSession: a memory limit ends the cell with died / ELIMIT, the next cell restarts', async () => {
    const s = await PythonSession.start({ limits: MEM_LIMIT })
    const r = await s.execute(MEMORY_HOG, { timeout: 20_000 })
    expect(r.status).toBe('died')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
    expect(r.stateLost).toBe(true)
    const next = await s.execute('1 + 1')
    expect(next.status).toBe('ok')
    expect(next.restarted).toBe(true)
    expect(next.resultValue).toBe('2')
    await s.close()
  })

  it('PythonSession: cpuSeconds', async () => {
    const s = await PythonSession.start({ limits: { cpuSeconds: 1 } })
    const r = await s.execute('while True: pass', { timeout: 20_000 })
    expect(r.status).toBe('died')
    expect(r.signal).toBe('SIGXCPU')
    expect(r.error).toBe('exec: CPU time limit of 1s exceeded (ELIMIT)')
    await s.close()
  })

  it('ShellSession: maxProcesses ends the command with died / ELIMIT', async () => {
    const s = await ShellSession.start({ limits: PROC_LIMIT })
    const r = await s.execute(FORKS, { timeout: 20_000 })
    expect(r.status).toBe('died')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(PROC_MESSAGE)
    const next = await s.execute('echo back')
    expect(next.stdout).toBe('back\n')
    await s.close()
  })

  it('ShellSession: a command killed by SIGXCPU says which limit, the shell stays', async () => {
    const s = await ShellSession.start({ limits: { cpuSeconds: 1 } })
    const r = await s.execute("python3 -c 'while True: pass'", { timeout: 20_000 })
    expect(r.status).toBe('error')
    expect(r.exitCode).toBe(128 + 24)
    expect(r.error).toBe('exec: CPU time limit of 1s exceeded (ELIMIT)')
    const next = await s.execute('echo still')
    expect(next.stdout).toBe('still\n')
    expect(next.restarted).toBe(false)
    await s.close()
  })

  it('ShellSession.close() leaves no escaped descendant', async () => {
    const s = await ShellSession.start()
    const f = pidFile()
    await s.execute(ESCAPE(f))
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    expect(isRunning(pids[0])).toBe(true)
    await s.close()
    expect(await waitGone(pids)).toEqual([])
  })

  it('PythonSession.close() leaves no escaped descendant', async () => {
    const s = await PythonSession.start()
    const f = pidFile()
    await s.execute(`import subprocess\nsubprocess.Popen(["sh", "-c", ${JSON.stringify(ESCAPE(f))}])`)
    const pids = await pidsIn(f)
    expect(pids.length).toBe(1)
    expect(isRunning(pids[0])).toBe(true)
    await s.close()
    expect(await waitGone(pids)).toEqual([])
  })

  it('envDenylist / envAllowlist', async () => {
    const sh = await ShellSession.start({ envDenylist: ['*_TOKEN'] })
    expect((await sh.execute('echo ${EXEC_NATIVE_TEST_TOKEN:-none}')).stdout).toBe('none\n')
    await sh.close()
    const py = await PythonSession.start({ envAllowlist: ['PATH'], env: { OWN: 'yes' } })
    // (python3 may be a pyenv shim that adds its own PYENV_* variables)
    const r = await py.execute(
      'import os; ("HOME" in os.environ, "EXEC_NATIVE_TEST_TOKEN" in os.environ, os.environ.get("OWN"), "PATH" in os.environ)',
    )
    expect(r.resultValue).toBe("(False, False, 'yes', True)")
    await py.close()
  })
})
