// Issue 12, items 3, 4, 5, 7 and 12: limits that held only for processes
// keeping the run's environment, RLIMIT_NPROC counting processes where the
// kernel counts threads, cgroups left behind by the host, the CPU hard
// limit's SIGKILL without ELIMIT, and the fork path running what the
// posix_spawn path refuses.
import { spawnSync } from 'node:child_process'
import {
  accessSync,
  chmodSync,
  constants,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { describe, expect, it } from 'vitest'

import {
  CommandRunner,
  ProcessManager,
  PythonSession,
  ShellSession,
  executeAndCapture,
  runCommand,
  spawnCall,
} from '../index.js'
import { sleep } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'exec-native-hardening-'))
chmodSync(dir, 0o755)
const repo = fileURLToPath(new URL('..', import.meta.url))
const addon = join(repo, 'index.js')

// 300 MiB of touched memory under a 50 MiB limit, with the environment
// scrubbed (the run's mark is gone) but in the run's tree
const HOG = `python3 -c 'x = b"a" * (300 << 20); print("survived")'`
const MEM = { memoryBytes: 50 * 1024 * 1024 }
const MEM_MESSAGE = 'exec: memory limit of 50 MiB exceeded (ELIMIT)'
const HOG_SUBPROCESS = `import subprocess
r = subprocess.run(["python3", "-c", "x = b'a' * (300 << 20); print('survived')"], env={}, capture_output=True, text=True)
print(r.returncode, r.stdout)`

describe('memoryBytes holds for the whole tree (item 3)', () => {
  it('env -i under executeAndCapture', async () => {
    const r = await executeAndCapture(`env -i ${HOG}`, 'bash', { limits: MEM, timeout: 30_000 })
    expect(r.stdout).not.toContain('survived')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
  })

  it('subprocess.run(env={}) under executeAndCapture', async () => {
    const r = await executeAndCapture(HOG_SUBPROCESS, 'python', { limits: MEM, timeout: 30_000 })
    expect(r.stdout).not.toContain('survived')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
  })

  it('setsid env -i (left the group and the mark) under runCommand', async () => {
    const r = await runCommand(`setsid env -i ${HOG}; echo after`, { limits: MEM, outputDir: dir, timeout: 30_000 })
    expect(r.stdout).not.toContain('survived')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
  })

  it('subprocess.run(env={}) inside PythonSession', async () => {
    const s = await PythonSession.start({ limits: MEM })
    const r = await s.execute(HOG_SUBPROCESS, { timeout: 30_000 })
    expect(r.stdout).not.toContain('survived')
    expect(r.status).toBe('died')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(MEM_MESSAGE)
    await s.close()
  })
})

// a CPU burner that ignores SIGXCPU: only the hard limit's SIGKILL stops it
const IGNORE_XCPU = `python3 -c 'import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while True: pass'`
const CPU = { cpuSeconds: 1 }
const CPU_MESSAGE = 'exec: CPU time limit of 1s exceeded (ELIMIT)'

describe('the CPU hard limit is ELIMIT when SIGXCPU is ignored (item 7)', () => {
  it('executeAndCapture', async () => {
    const r = await executeAndCapture(`exec ${IGNORE_XCPU}`, 'bash', { limits: CPU, timeout: 30_000 })
    expect(r.signal).toBe('SIGKILL')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(CPU_MESSAGE)
  })

  it('spawnCall (the shell reports 137)', async () => {
    const r = await spawnCall('bash', ['-c', `${IGNORE_XCPU}; exit $?`], { limits: CPU, timeout: 30_000 })
    expect(r.exitCode).toBe(137)
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(CPU_MESSAGE)
  })

  for (const io of [undefined, { type: 'pty' as const, rows: 24, cols: 80 }]) {
    it(`ProcessManager (${io ? 'pty' : 'pipe'})`, async () => {
      const m = new ProcessManager()
      const { processId } = await m.start({ argv: ['bash', '-c', `exec ${IGNORE_XCPU}`], io, limits: CPU })
      const r = await m.wait(processId, { timeoutMs: 30_000 })
      expect(r.running).toBe(false)
      expect(r.signal).toBe('SIGKILL')
      expect(r.errorCode).toBe('ELIMIT')
      expect(r.error).toBe(CPU_MESSAGE)
      await m.close()
    })
  }

  it('runCommand', async () => {
    const runner = new CommandRunner({ outputDir: dir, limits: CPU })
    const r = await runner.run(IGNORE_XCPU, { timeout: 30_000 })
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(CPU_MESSAGE)
    await runner.close()
  })

  it('PythonSession (the interpreter ignores SIGXCPU)', async () => {
    const s = await PythonSession.start({ limits: CPU })
    const r = await s.execute('import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass', {
      timeout: 30_000,
    })
    expect(r.status).toBe('died')
    expect(r.signal).toBe('SIGKILL')
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(CPU_MESSAGE)
    await s.close()
  })

  it('ShellSession (a command ignores SIGXCPU, the shell stays)', async () => {
    const s = await ShellSession.start({ limits: CPU })
    const r = await s.execute(IGNORE_XCPU, { timeout: 30_000 })
    expect(r.status).toBe('error')
    expect(r.exitCode).toBe(137)
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe(CPU_MESSAGE)
    const next = await s.execute('echo still')
    expect(next.stdout).toBe('still\n')
    await s.close()
  })

  it('a SIGKILL from elsewhere is not blamed on the CPU limit', async () => {
    const r = await spawnCall('bash', ['-c', 'kill -9 $$'], { limits: CPU, timeout: 30_000 })
    expect(r.signal).toBe('SIGKILL')
    expect(r.errorCode).toBeUndefined()
  })
})

describe('limits and dieWithParent do not change what runs (item 12)', () => {
  const noShebang = join(dir, 'no-shebang')
  writeFileSync(noShebang, 'echo ran-by-sh\n')
  chmodSync(noShebang, 0o755)
  const garbage = join(dir, 'garbage-elf')
  writeFileSync(garbage, Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, ...new Array(56).fill(7)]))
  chmodSync(garbage, 0o755)
  const paths = [
    ['fast path', {}],
    ['limits', { limits: { cpuSeconds: 10 } }],
    ['dieWithParent', { dieWithParent: true }],
  ] as const

  for (const program of [noShebang, garbage]) {
    for (const [name, opts] of paths) {
      it(`spawnCall ${program.endsWith('elf') ? 'garbage ELF' : 'script without #!'} (${name})`, async () => {
        const r = await spawnCall(program, [], { ...opts, timeout: 10_000 })
        expect(r.stdoutBytes).toBe(0)
        expect(r.errorCode).toBe('ESPAWN')
        expect(r.error).toBe(`exec: failed to spawn ${program}: Exec format error (os error 8) (ESPAWN)`)
      })
    }
  }

  it('ProcessManager: pipe with limits and PTY refuse it as the fast path does', async () => {
    const m = new ProcessManager()
    for (const spec of [
      { argv: [noShebang] },
      { argv: [noShebang], limits: { maxProcesses: 50 } },
      { argv: [noShebang], io: { type: 'pty' as const, rows: 24, cols: 80 } },
    ]) {
      await expect(m.start(spec)).rejects.toMatchObject({
        code: 'ESPAWN',
        message: `exec: failed to spawn ${noShebang}: Exec format error (os error 8) (ESPAWN)`,
      })
    }
    await m.close()
  })

  it('a program that runs still gets its arguments, environment and cwd on the fork path', async () => {
    const r = await spawnCall('sh', ['-c', 'echo "$0 $1 $FOO $(pwd)"', 'zero', 'one'], {
      limits: { cpuSeconds: 10 },
      env: { FOO: 'bar' },
      cwd: dir,
    })
    expect(r.errorCode).toBeUndefined()
    expect(r.stdoutBytes).toBe(Buffer.byteLength(`zero one bar ${dir}\n`))
  })
})

/** Run `script` (CommonJS) in a fresh node, as `uid` when given (needs root). */
function node(script: string, opts: { uid?: number; env?: Record<string, string> } = {}) {
  const f = join(dir, `host-${Math.random().toString(36).slice(2)}.cjs`)
  writeFileSync(f, script)
  chmodSync(f, 0o644)
  const argv = opts.uid === undefined ? [process.execPath, f] : ['setpriv', `--reuid=${opts.uid}`, `--regid=${opts.uid}`, '--clear-groups', process.execPath, f]
  return spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', cwd: dir, env: { ...process.env, ...opts.env }, timeout: 60_000 })
}

const isRoot = process.getuid?.() === 0
const hasSetpriv = spawnSync('setpriv', ['--version']).status === 0

/** The addon as an unprivileged user can load it (a copy when the repo is not readable). */
function addonFor(uid: number): string {
  const probe = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'test', '-r', addon])
  if (probe.status === 0) return addon
  const copy = mkdtempSync(join(tmpdir(), 'exec-native-addon-'))
  chmodSync(copy, 0o755)
  for (const f of readdirSync(repo).filter((n) => n === 'index.js' || n.endsWith('.node'))) {
    copyFileSync(join(repo, f), join(copy, f))
    chmodSync(join(copy, f), 0o755)
  }
  return join(copy, 'index.js')
}

describe('maxProcesses on a host that is not root (item 4)', () => {
  it.skipIf(isRoot && !hasSetpriv)('the first fork works, a fork loop is ELIMIT, a PythonSession can start a subprocess', () => {
    const uid = isRoot ? 65534 : undefined
    const path = uid === undefined ? addon : addonFor(uid)
    const r = node(
      `const m = require(${JSON.stringify(path)})
      ;(async () => {
        const out = { uid: process.getuid() }
        let t = Date.now()
        let r = await m.executeAndCapture('sleep 0.1 & wait; echo forked', 'bash', { limits: { maxProcesses: 5 }, timeout: 30000 })
        out.first = { stdout: r.stdout, exitCode: r.exitCode, errorCode: r.errorCode, ms: Date.now() - t }
        t = Date.now()
        r = await m.executeAndCapture('for i in $(seq 30); do sleep 5 & done; wait', 'bash', { limits: { maxProcesses: 5 }, timeout: 30000 })
        out.loop = { errorCode: r.errorCode, error: r.error, ms: Date.now() - t }
        const s = await m.PythonSession.start({ limits: { maxProcesses: 8 } })
        const c = await s.execute('import subprocess\\nprint(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout)')
        out.py = { status: c.status, stdout: c.stdout }
        await s.close()
        console.log(JSON.stringify(out))
      })()`,
      { uid },
    )
    expect(r.stderr).toBe('')
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!)
    expect(out.uid).not.toBe(0)
    expect(out.first).toMatchObject({ stdout: 'forked\n', exitCode: 0 })
    expect(out.first.errorCode).toBeUndefined()
    // bash retried the refused fork for 15 s, then exited 254 without a code
    expect(out.first.ms).toBeLessThan(10_000)
    expect(out.loop.errorCode).toBe('ELIMIT')
    expect(out.loop.error).toBe('exec: process limit of 5 exceeded (ELIMIT)')
    expect(out.loop.ms).toBeLessThan(10_000)
    expect(out.py).toEqual({ status: 'ok', stdout: 'sub\n\n' })
  })
})

/** The directories where this process's pids and memory cgroups sit (v1 or v2). */
function cgroupBases(): string[] {
  const bases = new Set<string>()
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const [, ctrls, path] = line.split(':')
    if (path === undefined) continue
    for (const c of ['pids', 'memory']) {
      if (ctrls.split(',').includes(c)) bases.add(join('/sys/fs/cgroup', c, path))
    }
    if (ctrls === '') {
      for (const mount of ['/sys/fs/cgroup', '/sys/fs/cgroup/unified']) {
        const controllers = existsSync(join(mount, 'cgroup.controllers')) ? readFileSync(join(mount, 'cgroup.controllers'), 'utf8') : ''
        if (/\b(pids|memory)\b/.test(controllers)) bases.add(join(mount, path))
      }
    }
  }
  return [...bases].filter((b) => {
    try {
      accessSync(b, constants.W_OK)
      return existsSync(join(b, 'cgroup.procs'))
    } catch {
      return false
    }
  })
}

/** The cgroups of the host `pid`. */
const cgroupsOf = (pid: number) =>
  cgroupBases().flatMap((b) => readdirSync(b).filter((n) => n.startsWith(`exec-native-${pid}.`)).map((n) => join(b, n)))

/** Live pids in the cgroup `cg`. */
function procsOf(cg: string): number[] {
  try {
    return readFileSync(join(cg, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number)
  } catch {
    return []
  }
}

const canCgroup = isRoot && cgroupBases().length > 0

describe('cgroups do not outlive their host (item 5)', () => {
  const LIMITS = '{ maxProcesses: 7, memoryBytes: 256 * 1024 * 1024 }'
  // a run still going, with a process that left the group and scrubbed the
  // mark (only the cgroup still holds it), and a run that is over
  const host = (end: string) => `const m = require(${JSON.stringify(addon)})
    m.executeAndCapture('setsid env -i sleep 100 & sleep 100', 'bash', { limits: ${LIMITS} })
    m.executeAndCapture('true', 'bash', { limits: ${LIMITS} }).then(() => {
      // both cgroups exist: the run still going and the one just finished
      setTimeout(() => { console.log(process.pid); ${end} }, 200)
    })`

  for (const [name, end] of [
    ['process.exit(0)', 'process.exit(0)'],
    ['SIGTERM', "process.kill(process.pid, 'SIGTERM')"],
    ['SIGINT', "process.kill(process.pid, 'SIGINT')"],
  ]) {
    it.skipIf(!canCgroup)(`${name}: none is left`, async () => {
      for (let i = 0; i < 3; i++) {
        const r = node(host(end))
        const pid = Number(r.stdout.trim())
        expect(pid).toBeGreaterThan(0)
        const left = cgroupsOf(pid)
        // (a failure must not leave the escaped sleep behind)
        for (const cg of left) for (const p of procsOf(cg)) process.kill(p, 'SIGKILL')
        expect(left).toEqual([])
      }
    })
  }

  for (const [name, end] of [
    ['SIGKILL', "process.kill(process.pid, 'SIGKILL')"],
    ['abort', 'process.abort()'],
  ]) {
    it.skipIf(!canCgroup)(`${name}: the next host sweeps them once empty`, async () => {
      const r = node(host(end))
      const pid = Number(r.stdout.trim())
      expect(pid).toBeGreaterThan(0)
      const left = cgroupsOf(pid)
      expect(left.length).toBeGreaterThan(0)
      // what the dead host left running (`sleep 100`) is still in them
      for (const cg of left) for (const p of procsOf(cg)) process.kill(p, 'SIGKILL')
      for (let i = 0; i < 100 && left.some((cg) => procsOf(cg).length > 0); i++) await sleep(20)
      // a sweep spares cgroups younger than a few seconds: age them
      const old = new Date(Date.now() - 3600_000)
      for (const cg of left) utimesSync(cg, old, old)
      const next = node(`require(${JSON.stringify(addon)})`)
      expect(next.status).toBe(0)
      expect(cgroupsOf(pid)).toEqual([])
    })
  }
})
