// Issue 23, "Reliability, round 3": each test runs real processes and fails
// without its fix.
import { afterEach, describe, expect, it } from 'vitest'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

import {
  CommandRunner,
  ProcessManager,
  PythonSession,
  ShellSession,
  captureCall,
  executeAndCapture,
  executeStreaming,
  runCommand,
  spawn,
  spawnCall,
} from '../index.js'
import { sleep } from './helpers'

const ADDON = fileURLToPath(new URL('../index.js', import.meta.url))

const fds = () => readdirSync('/proc/self/fd').length

// every session a test starts is closed afterwards
const open: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()))
})

/** The rejection (or throw) of `f`, for matching. */
async function failure(f: () => unknown): Promise<any> {
  try {
    await f()
  } catch (e) {
    return e
  }
  throw new Error('it did not fail')
}

describe('1. unknown option keys are refused (EINVAL), not ignored', () => {
  const typo = (e: any, path: string, known: string) => {
    expect(e).toBeInstanceOf(TypeError)
    expect(e.code).toBe('EINVAL')
    expect(e.message).toBe(`exec: ${path} is not a known option; did you mean ${known}? (EINVAL)`)
  }

  it('limits.memory: every entry point refuses it instead of running with no limit', async () => {
    const limits = { memory: 50 << 20 } as never
    typo(await failure(() => executeAndCapture('print(1)', 'python', { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => captureCall('true', [], { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => spawnCall('true', [], { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => executeStreaming('true', 'bash', { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => spawn('true', [], { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => runCommand('true', { limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => PythonSession.start({ limits })), 'options.limits.memory', 'memoryBytes')
    typo(await failure(() => ShellSession.start({ limits })), 'options.limits.memory', 'memoryBytes')
    const m = new ProcessManager()
    typo(await failure(() => m.start({ argv: ['true'], limits })), 'spec.limits.memory', 'memoryBytes')
    await m.close()
  })

  it('a typo in the sandbox, in the options themselves, and one whose value is undefined', async () => {
    typo(
      await failure(() => captureCall('true', [], { sandbox: { writeableRoots: ['/tmp'] } as never })),
      'options.sandbox.writeableRoots',
      'writableRoots',
    )
    typo(await failure(() => captureCall('true', [], { timout: 5 } as never)), 'options.timout', 'timeout')
    typo(await failure(() => spawn('true', [], { onstdout: () => {} } as never)), 'options.onstdout', 'onStdout')
    typo(await failure(() => captureCall('true', [], { maxOutput: undefined } as never)), 'options.maxOutput', 'maxOutputBytes')
    const runner = new CommandRunner({})
    typo(await failure(() => runner.run('true', { timeoutMs: 5 } as never)), 'options.timeoutMs', 'timeout')
    // nothing near: the known keys are listed
    const e = await failure(() => captureCall('true', [], { zzzzzzzz: 1 } as never))
    expect(e.code).toBe('EINVAL')
    expect(e.message).toMatch(/^exec: options\.zzzzzzzz is not a known option; known: cwd, env, .*timeout.* \(EINVAL\)$/)
  })

  it('known keys, inherited ones and non-enumerable ones still work', async () => {
    const base = { timeout: 5000 }
    const withProto = Object.create(base)
    Object.defineProperty(withProto, 'hidden', { value: 1, enumerable: false })
    const r = await captureCall('echo', ['ok'], withProto)
    expect(r.stdout).toBe('ok\n')
  })
})

describe('2. an already aborted AbortSignal spawns nothing', () => {
  it('spawn, spawnCall, captureCall, executeAndCapture, executeStreaming: 20 runs each, no file ever appears', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-abort-'))
    const file = join(dir, 'ran')
    const script = `touch '${file}'`
    try {
      for (let i = 0; i < 20; i++) {
        const signal = AbortSignal.abort()
        let onError: any
        const p = spawn('sh', ['-c', script], { signal, onError: (e) => (onError = e) })
        expect(p.pid).toBeUndefined()
        const results = await Promise.all([
          p.exited,
          spawnCall('sh', ['-c', script], { signal }),
          captureCall('sh', ['-c', script], { signal }),
          executeAndCapture(script, 'bash', { signal }),
          executeStreaming(script, 'bash', { signal }),
        ])
        for (const r of results) {
          expect(r).toMatchObject({ errorCode: 'ECANCELED', canceled: true, exitCode: -1, pid: 0 })
          expect(r.error).toMatch(/canceled before it started.*\(ECANCELED\)$/)
        }
        expect(onError?.code).toBe('ECANCELED')
      }
      await sleep(200)
      expect(existsSync(file)).toBe(false)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("3. spawn()'s stdin pipe is closed when the child exits", () => {
  it('200 children with stdin: pipe, handles kept: no fd left behind; a later write rejects EPIPE', async () => {
    const before = fds()
    const kept = []
    for (let batch = 0; batch < 10; batch++) {
      const procs = Array.from({ length: 20 }, () => spawn('true', [], { stdin: 'pipe' }))
      await Promise.all(procs.map((p) => p.exited))
      kept.push(...procs)
    }
    // the handles are alive (not collected): the fds must be closed anyway
    expect(kept.every((p) => p.stdin !== null)).toBe(true)
    await sleep(100)
    expect(fds() - before).toBeLessThan(10)
    const e = await failure(() => kept[0].stdin!.write('late'))
    expect(e.code).toBe('EPIPE')
  })
})

describe('7. kill() of a stopped child', () => {
  it('SIGSTOPped, with a SIGTERM trap: it exits by the trap (SIGCONT after SIGTERM), not by SIGKILL', async () => {
    let out = ''
    const p = spawn('bash', ['-c', "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done"], {
      forceKillAfterDelay: 5000,
      onStdout: (d: string) => (out += d),
    })
    while (!out.includes('ready')) await sleep(10)
    process.kill(-p.pid!, 'SIGSTOP')
    const state = () => {
      const s = readFileSync(`/proc/${p.pid}/stat`, 'utf8')
      return s.slice(s.lastIndexOf(')') + 2, s.lastIndexOf(')') + 3)
    }
    while (state() !== 'T') await sleep(10)
    const t0 = Date.now()
    expect(p.kill()).toBe(true)
    const r = await p.exited
    expect(r).toMatchObject({ exitCode: 7, signal: null, canceled: true })
    expect(Date.now() - t0).toBeLessThan(4000)
  })
})

describe('5. a session whose cwd was deleted', () => {
  it('ShellSession: the restart after `exit 3` reports the missing working directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-cwd-'))
    const s = await ShellSession.start({ cwd: dir })
    open.push(s)
    rmSync(dir, { recursive: true })
    expect((await s.execute('exit 3')).status).toBe('died')
    const e = await failure(() => s.execute('echo hi'))
    expect(e.code).toBe('ENOENT')
    expect(e.message).toBe(`exec: Working directory does not exist '${dir}' (ENOENT)`)
  })

  it('PythonSession: the restart after os._exit reports the missing working directory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-cwd-'))
    const s = await PythonSession.start({ cwd: dir })
    open.push(s)
    rmSync(dir, { recursive: true })
    expect((await s.execute('import os\nos._exit(3)')).status).toBe('died')
    const e = await failure(() => s.execute('1'))
    expect(e.code).toBe('ENOENT')
    expect(e.message).toBe(`exec: Working directory does not exist '${dir}' (ENOENT)`)
  })
})

describe("8. a forked Python child's output stays with the cell that forked it", () => {
  const fork = (delay: number) =>
    `import os, time\nif os.fork() == 0:\n    time.sleep(${delay})\n    print(0, flush=True)\n    os._exit(0)\n`

  it('printed while its cell runs: that cell has it', async () => {
    const s = await PythonSession.start()
    open.push(s)
    const r = await s.execute('import os\npid = os.fork()\nif pid == 0:\n    print("child", flush=True)\n    os._exit(0)\nos.waitpid(pid, 0)\nprint("parent")')
    expect(r.stdout).toBe('child\nparent\n')
  })

  it('printed after its cell ended, between cells or during the next one: dropped', async () => {
    const s = await PythonSession.start()
    open.push(s)
    // between cells
    expect((await s.execute(fork(0.2))).stdout).toBe('')
    await sleep(600)
    expect((await s.execute('print("next")')).stdout).toBe('next\n')
    // while the next cell runs
    expect((await s.execute(fork(0.3))).stdout).toBe('')
    const r = await s.execute('import time\ntime.sleep(0.8)\nprint("next")')
    expect(r.stdout).toBe('next\n')
    // a child that writes with os.write after its first dropped print, too
    await s.execute(
      'import os, time\nif os.fork() == 0:\n    time.sleep(0.2)\n    print(0)\n    os.write(1, b"raw\\n")\n    os._exit(0)\n',
    )
    expect((await s.execute('import time\ntime.sleep(0.6)\nprint("last")')).stdout).toBe('last\n')
  })
})

describe('4. a worker terminated while its streams are backpressured leaves no fd behind', () => {
  // 10 workers, each with 5 streams of `yes` whose callback blocks 5 ms,
  // terminated one after the other while they stream
  const workerCode = `
    const { parentPort, workerData } = require('node:worker_threads')
    const native = require(workerData.addon)
    const block = () => { const t = Date.now(); while (Date.now() - t < 5) {} }
    const kind = workerData.kind
    const m = kind.startsWith('manager') ? new native.ProcessManager() : null
    for (let i = 0; i < 5; i++) {
      if (kind === 'spawnCall') native.spawnCall('yes', [], { timeout: 0 }, block, block)
      else if (kind === 'executeStreaming') native.executeStreaming('yes', 'bash', { timeout: 0 }, block, block)
      else if (kind === 'spawn') native.spawn('yes', [], { encoding: 'buffer', onStdout: block, onStderr: block })
      else if (kind === 'manager') m.start({ argv: ['yes'] }, block)
      else if (kind === 'manager-pty') m.start({ argv: ['yes'], io: { type: 'pty', rows: 24, cols: 80 } }, block)
    }
    setTimeout(() => parentPort.postMessage('streaming'), 300)
  `
  for (const kind of ['spawnCall', 'executeStreaming', 'spawn', 'manager', 'manager-pty']) {
    it(kind, { timeout: 60000 }, async () => {
      const before = fds()
      for (let i = 0; i < 10; i++) {
        const w = new Worker(workerCode, { eval: true, workerData: { addon: ADDON, kind } })
        await new Promise((resolve, reject) => {
          w.once('message', resolve)
          w.once('error', reject)
        })
        await w.terminate()
      }
      const deadline = Date.now() + 5000
      while (fds() > before + 2 && Date.now() < deadline) await sleep(50)
      expect(fds() - before).toBeLessThanOrEqual(2)
    })
  }
})
