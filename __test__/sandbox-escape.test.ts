// The sandbox as a boundary (issue 22): an attacker inside a sandboxed run,
// on every entry point, written the way the outside probe did it
// (fixtures/escape_attack.py), against a host that planted bait
// (fixtures/escape-host.mjs). Every verdict is read on the host side: the
// host lives, its secret is not in the output, the file it holds open is
// untouched, its listeners saw nothing, its unsandboxed session still
// answers only to it, no injected process ran, `.git` and the outside
// file's mode and xattrs are as they were. Each case failed on the
// thread-scoped sandbox this replaced.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { hostPidsOf, isRunning } from './helpers'

import { executeAndCapture, sandboxStatus } from '../index.js'

const status = sandboxStatus()
const supported = process.platform === 'linux' && status.landlockAbi >= 6 && status.seccomp && status.helper !== null
const full = supported && status.namespaces
const dirs: string[] = []
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))
const fresh = () => {
  const work = mkdtempSync(join(tmpdir(), 'exn-esc-work-'))
  const outside = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : process.cwd(), 'exn-esc-out-'))
  dirs.push(work, outside)
  return { work, outside }
}

/** Run the attack through `entry` in a host of its own; what that host saw. */
function attackThrough(entry: string, env: Record<string, string> = {}) {
  const { work, outside } = fresh()
  const secret = `exn-secret-${Math.random().toString(36).slice(2)}`
  const r = spawnSync(process.execPath, [join(__dirname, 'fixtures', 'escape-host.mjs'), entry, work, outside], {
    env: { ...process.env, EXN_ESCAPE_SECRET: secret, GITHUB_TOKEN: secret, OPENAI_API_KEY: secret, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  })
  const line = r.stdout.split('\n').find((l) => l.startsWith('HOST-REPORT '))
  return { status: r.status, signal: r.signal, stderr: r.stderr, report: line ? JSON.parse(line.slice('HOST-REPORT '.length)) : null, secret }
}

const ENTRIES = ['executeAndCapture', 'runCommand', 'CommandRunner', 'ProcessManager-pipe', 'ProcessManager-pty', 'PythonSession', 'ShellSession', 'cli', 'serve']

/** What must hold whatever the mechanism (items 1-7 and the sockets). */
function expectHostIntact(h: ReturnType<typeof attackThrough>, entry: string) {
  const ctx = JSON.stringify({ entry, status: h.status, signal: h.signal, stderr: h.stderr.slice(0, 2000), report: h.report })
  // 2. the host was not killed (a SIGKILLed host has no report)
  expect(h.signal, ctx).toBeNull()
  expect(h.status, ctx).toBe(0)
  const r = h.report
  expect(r, ctx).not.toBeNull()
  // the attack ran (its report came back through the entry point)
  expect(r.attack, ctx).not.toBeNull()
  // 1. no host secret, from environ or mem
  expect(r.secretInOutput, ctx).toBe(false)
  expect(r.attack.secrets, ctx).toBe(false)
  expect(r.attack.mem, ctx).toBe(false)
  // 3. no stolen descriptor was written to: the file and the TCP peer
  expect(r.baitFd, ctx).toBe('')
  expect(r.seen.tcpData, ctx).toBe('')
  // the host's Unix services (pathname, "docker.sock", and abstract)
  expect(r.seen.unixConns, ctx).toBe(0)
  expect(r.seen.abstractConns, ctx).toBe(0)
  // 4/5. nothing injected: no process started through serve's stdin, and the
  // host's unsandboxed session still answers, to the host
  expect(r.injected, ctx).toBe(false)
  expect(r.sessionOk, ctx).toBe(true)
  if (entry === 'serve') {
    expect(r.injectedStarted, ctx).toBe(false)
    expect(r.serverAlive, ctx).toBe(true)
  }
  if (entry === 'cli') expect(r.cliExit, ctx).toBe(0)
  if (entry === 'PythonSession') expect(r.sessionAlive, ctx).toBe(true)
  // 7. a CommandRunner call's cwd outside the runner's roots is EINVAL
  if (entry === 'CommandRunner') {
    expect(r.widen, ctx).toBe('EINVAL')
    expect(r.widened, ctx).toBe(false)
  }
}

describe.skipIf(!full)('sandbox boundary: every entry point, with namespaces', () => {
  for (const entry of ENTRIES) {
    it(`${entry}: host secrets, the host's life, its fds, serve's stdin, sessions, sockets, metadata and .git`, () => {
      const h = attackThrough(entry)
      expectHostIntact(h, entry)
      const ctx = JSON.stringify(h.report)
      // 8. metadata outside the roots, and every .git (a nested repository,
      // a worktree's gitdir and its main repository) stay as they were
      expect(h.report.baitMode, ctx).toBe(0o644)
      expect(h.report.baitXattrs, ctx).toBe('[]')
      expect(h.report.gitChanged, ctx).toBe(false)
      expect(h.report.attack.git, ctx).toBe(false)
    })
  }
})

describe.skipIf(!supported)('sandbox boundary without user namespaces (simulated)', () => {
  for (const entry of ['executeAndCapture', 'ProcessManager-pty', 'PythonSession', 'serve']) {
    it(`${entry}: Landlock + seccomp in the child still stop items 1-7`, () => {
      const h = attackThrough(entry, { EXEC_NATIVE_TEST_NO_USERNS: '1' })
      expectHostIntact(h, entry)
    })
  }

  it('the result and sandboxStatus() say what is missing', () => {
    const code = `
      const { executeAndCapture, sandboxStatus } = require(${JSON.stringify(join(__dirname, '..', 'index.js'))});
      executeAndCapture('true', 'bash', { sandbox: true }).then((r) => console.log(JSON.stringify({ r: r.sandbox, s: sandboxStatus() })))`
    const out = spawnSync(process.execPath, ['-e', code], { env: { ...process.env, EXEC_NATIVE_TEST_NO_USERNS: '1' }, encoding: 'utf8' })
    const { r, s } = JSON.parse(out.stdout)
    expect(r).toMatchObject({ applied: true, mechanism: 'landlock+seccomp' })
    expect(r.missing).toEqual(expect.arrayContaining(['mountNamespace', 'pidNamespace', 'networkNamespace']))
    expect(s).toMatchObject({ namespaces: false, mechanism: 'landlock+seccomp' })
    expect(s.namespacesUnavailable).toMatch(/simulated/)
    // an explicit protect list needs the mount namespace: fail closed
    const p = spawnSync(process.execPath, ['-e', code.replace("{ sandbox: true }", "{ sandbox: { protect: ['x'] } }").replace('r.sandbox', 'r.errorCode')], { env: { ...process.env, EXEC_NATIVE_TEST_NO_USERNS: '1' }, encoding: 'utf8' })
    expect(JSON.parse(p.stdout).r).toBe('ESANDBOX')
  })
})

describe.skipIf(!supported)('sandbox boundary: runs, daemons, nesting', () => {
  it('6. two concurrent runs: neither reads the other\'s environment nor kills it', async () => {
    const { work } = fresh()
    const secret = `sib-${Math.random().toString(36).slice(2)}`
    const tag = `3.${Math.floor(Math.random() * 1e6)}`
    const victim = executeAndCapture(`sleep ${tag}; echo survived`, 'bash', { cwd: work, sandbox: true, env: { SIBLING_SECRET: secret }, timeout: 20_000 })
    for (let i = 0; i < 100 && hostPidsOf(['sleep', tag]).length === 0; i++) await new Promise((r) => setTimeout(r, 20))
    const [victimPid] = hostPidsOf(['sleep', tag])
    expect(victimPid).toBeGreaterThan(1)
    const attacker = await executeAndCapture(
      `for e in /proc/[0-9]*/environ /proc/[0-9]*/task/*/environ; do grep -l -a ${secret} "$e" 2>/dev/null; done
       kill -9 ${victimPid} 2>/dev/null && echo killed-by-pid
       pkill -9 -f 'slee[p] ${tag}' && echo killed-by-name
       echo done`,
      'bash',
      { cwd: work, sandbox: true, timeout: 20_000 },
    )
    expect(attacker.stdout).not.toContain('environ')
    expect(attacker.stdout).not.toContain('killed-by')
    expect(attacker.stdout).toContain('done')
    const v = await victim
    expect(v).toMatchObject({ exitCode: 0, stdout: 'survived\n', signal: null })
  })

  it('a setsid + double-fork daemon that tries again after its parent exits gets nowhere', async () => {
    const { work, outside } = fresh()
    // a process of the host's, as the target
    const target = spawn('sleep', ['30'], { stdio: 'ignore' })
    try {
      const r = await executeAndCapture(
        `(setsid sh -c 'sleep 0.4; kill -9 ${target.pid}; echo out > ${outside}/daemon; echo out > ${work}/daemon-ran' > /dev/null 2>&1 &) ; echo parent-exits`,
        'bash',
        { cwd: work, sandbox: true },
      )
      expect(r.stdout).toBe('parent-exits\n')
      await new Promise((res) => setTimeout(res, 1200))
      expect(isRunning(target.pid!)).toBe(true)
      expect(existsSync(join(outside, 'daemon'))).toBe(false)
    } finally {
      target.kill()
    }
  })

  it.skipIf(!full)('concurrent runs share the kept user and network namespaces, never a mount, PID or IPC namespace', async () => {
    const { work } = fresh()
    const cmd = 'sleep 0.3; for n in user net mnt pid ipc; do readlink /proc/self/ns/$n; done'
    const [a, b] = await Promise.all([0, 1].map(() => executeAndCapture(cmd, 'bash', { cwd: work, sandbox: true })))
    const ns = (r: { stdout: string }) => Object.fromEntries(r.stdout.trim().split('\n').map((l) => l.split(':')))
    const [na, nb] = [ns(a), ns(b)]
    expect(na.user).toBe(nb.user)
    expect(na.net).toBe(nb.net)
    for (const k of ['mnt', 'pid', 'ipc']) expect(na[k], k).not.toBe(nb[k])
    // and none of them is the host's
    const host = (n: string) => readlinkSync(`/proc/self/ns/${n}`).split(':')[1]
    for (const k of ['user', 'net', 'mnt', 'pid', 'ipc']) expect(na[k], k).not.toBe(host(k))
  })

  it('a descriptor the host leaked without close-on-exec does not reach the sandboxed child', async () => {
    const { work, outside } = fresh()
    // the host gets fd 200 from the shell that execs it, without
    // close-on-exec (Node marks only its low inherited fds), as a careless
    // addon's would be: a plain spawn hands it on
    const leaked = join(outside, 'leaked.txt')
    const code = `
      const { executeAndCapture } = require(${JSON.stringify(join(__dirname, '..', 'index.js'))});
      const cmd = 'echo x >> /proc/self/fd/200 2>/dev/null && echo wrote-200; echo done';
      Promise.all([executeAndCapture(cmd, 'bash', { cwd: ${JSON.stringify(work)}, sandbox: true }), executeAndCapture(cmd, 'bash', { cwd: ${JSON.stringify(work)} })])
        .then(([s, p]) => console.log(JSON.stringify({ sandboxed: s.stdout, plain: p.stdout })))`
    const r = spawnSync('bash', ['-c', 'exec "$NODE" -e "$CODE" 200>>"$LEAK"'], { encoding: 'utf8', env: { ...process.env, NODE: process.execPath, CODE: code, LEAK: leaked } })
    const { sandboxed, plain } = JSON.parse(r.stdout)
    // the control: without a sandbox, the leak is there (so the test can fail)
    expect(plain).toBe('wrote-200\ndone\n')
    expect(sandboxed).toBe('done\n')
    expect(readFileSync(leaked, 'utf8')).toBe('x\n')
  })

  it('unshare -Urm and a nested mount get nowhere', async () => {
    const { work, outside } = fresh()
    const r = await executeAndCapture(
      `unshare -Urm sh -c 'mount -t tmpfs none ${outside} && echo mounted' || echo no-unshare
       python3 -c "import ctypes; print('unshare', ctypes.CDLL(None, use_errno=True).unshare(0x10000000))"
       echo x > ${outside}/nested || echo denied`,
      'bash',
      { cwd: work, sandbox: true },
    )
    expect(r.stdout).toContain('no-unshare')
    expect(r.stdout).toContain('unshare -1')
    expect(r.stdout).toContain('denied')
    expect(r.stdout).not.toContain('mounted')
    expect(existsSync(join(outside, 'nested'))).toBe(false)
  })

  it('no capability, none in the bounding set, no_new_privs: a root host\'s child cannot chown what it could (both paths)', async () => {
    for (const simulated of [false, true]) {
      if (!full && !simulated) continue
      const { work } = fresh()
      const f = join(work, 'f')
      writeFileSync(f, 'x')
      if (simulated) process.env.EXEC_NATIVE_TEST_NO_USERNS = '1'
      try {
        const r = await executeAndCapture(
          `grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status | tr -d ' \t'; chown 12345:12345 f 2>/dev/null && echo chowned`,
          'bash',
          { cwd: work, sandbox: true },
        )
        expect(r.sandbox!.mechanism, r.stderr).toBe(simulated ? 'landlock+seccomp' : 'namespaces+landlock+seccomp')
        expect(r.stdout.trim().split('\n')).toEqual([
          'CapInh:0000000000000000',
          'CapPrm:0000000000000000',
          'CapEff:0000000000000000',
          'CapBnd:0000000000000000',
          'CapAmb:0000000000000000',
          'NoNewPrivs:1',
        ])
        // the host side: the file is still the host's
        expect(statSync(f).uid).toBe(process.getuid!())
      } finally {
        delete process.env.EXEC_NATIVE_TEST_NO_USERNS
      }
    }
  })

  it.skipIf(!full)('each run has its own /dev/shm (the template\'s /dev is shared, its shm never)', async () => {
    const { work } = fresh()
    const name = `exn-shm-${process.pid}`
    const [a, b] = await Promise.all([
      executeAndCapture(`echo a > /dev/shm/${name} && echo wrote; sleep 0.5; cat /dev/shm/${name}`, 'bash', { cwd: work, sandbox: true }),
      executeAndCapture(`sleep 0.25; cat /dev/shm/${name} 2>/dev/null || echo absent; echo b > /dev/shm/${name}; cat /dev/shm/${name}`, 'bash', { cwd: work, sandbox: true }),
    ])
    expect(a.stdout).toBe('wrote\na\n')
    expect(b.stdout).toBe('absent\nb\n')
    // and the host's /dev/shm got neither
    expect(existsSync(`/dev/shm/${name}`)).toBe(false)
  })

  // Root only: mounting on the host, and a writable root under /run.
  const root = process.getuid?.() === 0
  it.skipIf(!full || !root)('a mount made on the host after the first run is seen, read-only, by the next (the template is made again)', async () => {
    const { work, outside } = fresh()
    const m = join(outside, 'm')
    mkdirSync(m)
    const probe = `cat ${m}/f 2>/dev/null || echo missing; touch ${m}/g 2>&1 | grep -o 'Read-only file system' || echo writable`
    const before = await executeAndCapture(probe, 'bash', { cwd: work, sandbox: true })
    expect(before.stdout).toBe('missing\nRead-only file system\n')
    const mounted = spawnSync('mount', ['-t', 'tmpfs', 'tmpfs', m])
    if (mounted.status !== 0) return // no mount here (a container without CAP_SYS_ADMIN)
    try {
      writeFileSync(join(m, 'f'), 'fresh\n')
      const after = await executeAndCapture(probe, 'bash', { cwd: work, sandbox: true })
      expect(after.stdout).toBe('fresh\nRead-only file system\n')
      expect(existsSync(join(m, 'g'))).toBe(false)
    } finally {
      spawnSync('umount', [m])
    }
  })

  it.skipIf(!full || !root)('a filesystem unmounted on the host is let go by the kept template within seconds', async () => {
    const { work, outside } = fresh()
    const m = join(outside, 'big')
    mkdirSync(m)
    if (spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=128m', 'tmpfs', m]).status !== 0) return
    let mounted = true
    const shmem = () => Number(/Shmem:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024
    try {
      writeFileSync(join(m, 'f'), Buffer.alloc(64 << 20, 1))
      // a run after the mount: the template is made again, with the tmpfs in it
      const r = await executeAndCapture(`test -s ${m}/f && echo seen`, 'bash', { cwd: work, sandbox: true })
      expect(r.stdout).toBe('seen\n')
      const held = shmem()
      expect(spawnSync('umount', [m]).status).toBe(0)
      mounted = false
      // the host has let it go; the template must too (a device would stay
      // busy): its 64 MiB are freed once no namespace holds the tmpfs
      const deadline = Date.now() + 15_000
      while (Date.now() < deadline && shmem() > held - (48 << 20)) await new Promise((res) => setTimeout(res, 250))
      expect(shmem()).toBeLessThan(held - (48 << 20))
    } finally {
      if (mounted) spawnSync('umount', [m])
    }
  }, 30_000)

  it.skipIf(!full || !root)('a writable root under /run (no template: the host\'s mounts, /run not hidden) is writable, the rest is not', async () => {
    const { work, outside } = fresh()
    const run = mkdtempSync('/run/exn-esc-')
    dirs.push(run)
    const r = await executeAndCapture(
      `echo x > ${run}/ok && echo wrote-run; echo x > ${outside}/no 2>/dev/null || echo denied; echo pid=$$; ls /dev/shm | wc -l`,
      'bash',
      { cwd: work, sandbox: { writableRoots: [run] } },
    )
    expect(r.stdout).toMatch(/^wrote-run\ndenied\npid=\d\n0\n$/)
    expect(readFileSync(join(run, 'ok'), 'utf8')).toBe('x\n')
    expect(existsSync(join(outside, 'no'))).toBe(false)
  })

  it.skipIf(!full)('the child sees its own PID namespace and /dev, and /run is empty', async () => {
    const { work } = fresh()
    const r = await executeAndCapture('echo pid=$$; ls /run | wc -l; ls /dev | tr "\\n" " "', 'bash', { cwd: work, sandbox: true })
    const [pid, run, dev] = r.stdout.trim().split('\n')
    expect(Number(pid.slice(4))).toBeLessThan(10)
    expect(Number(run)).toBeLessThanOrEqual(3)
    for (const d of ['null', 'zero', 'urandom', 'tty', 'pts', 'shm']) expect(dev.split(' ')).toContain(d)
    expect(dev.split(' ')).not.toContain('sda')
  })

  it.skipIf(!full)('a symlinked .git and the protect option are kept read-only; writes elsewhere in the root work', async () => {
    const { work } = fresh()
    mkdirSync(join(work, 'real-git'))
    writeFileSync(join(work, 'real-git', 'config'), '[core]\n')
    mkdirSync(join(work, 'secrets'))
    writeFileSync(join(work, 'secrets', 'k'), 'k')
    const r = await executeAndCapture(
      `echo x >> secrets/k || echo denied-protect; echo ok > fine.txt && echo wrote`,
      'bash',
      { cwd: work, sandbox: { protect: ['secrets'] } },
    )
    expect(r.stdout).toBe('denied-protect\nwrote\n')
    expect(readFileSync(join(work, 'secrets', 'k'), 'utf8')).toBe('k')
    expect(r.sandbox!.protected).toContain(join(work, 'secrets'))
  })
})

/** The kept sandbox helpers (`exec-native-sandbox --zygote`) whose parent is `host`. */
function keptHelpersOf(host: number): number[] {
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      if (!readFileSync(`/proc/${d}/cmdline`, 'utf8').endsWith('\0--zygote\0')) continue
      const ppid = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${d}/status`, 'utf8'))?.[1]
      if (Number(ppid) === host) out.push(Number(d))
    } catch {}
  }
  return out
}

/** The sandboxed runs whose parent is `host` (`exec-native-sandbox --run`). */
function runsOf(host: number): number[] {
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const argv = readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0')
      if (argv.length !== 2 || argv[1] !== '--run' || !argv[0].endsWith('exec-native-sandbox')) continue
      const ppid = /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${d}/status`, 'utf8'))?.[1]
      if (Number(ppid) === host) out.push(Number(d))
    } catch {}
  }
  return out
}

/** Whether `pid`'s init (its one child) has a child of its own: a command. */
function hasChildRunning(pid: number): boolean {
  const kids = (p: number) => {
    try {
      return readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number)
    } catch {
      return []
    }
  }
  return kids(pid).some((init) => kids(init).length > 0)
}

describe.skipIf(!full)('the kept sandbox helper (the runs\' zygote)', () => {
  it('is out of a run\'s reach, comes back when killed, and a run through it is the host\'s child', async () => {
    const { work } = fresh()
    const first = await executeAndCapture('echo $PPID', 'bash', { cwd: work, sandbox: true })
    expect(first.exitCode).toBe(0)
    const [kept] = keptHelpersOf(process.pid)
    expect(kept).toBeGreaterThan(1)
    // the run itself (the helper's copy) was ours: its parent is this host
    const probe = executeAndCapture('sleep 2.7182; echo ok', 'bash', { cwd: work, sandbox: true })
    const ppid = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
    let chain: number[] = []
    for (let i = 0; i < 100 && !chain.length; i++) {
      const sleeper = hostPidsOf(['sleep', '2.7182'])[0]
      if (sleeper) for (let p = sleeper; p > 1; p = ppid(p)) chain.push(p)
      else await new Promise((r) => setTimeout(r, 20))
    }
    // sleep, bash, the init, the kept helper's copy (shown as `--run`), then this host
    const below = chain.indexOf(process.pid) - 1
    expect(below).toBeGreaterThan(1)
    expect(chain[below]).not.toBe(kept)
    const runHelper = readFileSync(`/proc/${chain[below]}/cmdline`, 'utf8').replace(/\0+$/, '').split('\0')
    expect(runHelper.length).toBe(2)
    expect(runHelper[0]).toMatch(/exec-native-sandbox$/)
    expect(runHelper[1]).toBe('--run')
    expect((await probe).stdout).toBe('ok\n')
    // an attacker who knows its pid can neither signal it nor look into it
    const attack = await executeAndCapture(
      `kill -9 ${kept} 2>/dev/null && echo killed
       kill -0 ${kept} 2>/dev/null && echo seen
       cat /proc/${kept}/environ 2>/dev/null && echo read
       ls /proc/${kept}/fd 2>/dev/null && echo listed
       echo x > /proc/${kept}/fd/0 2>/dev/null && echo wrote
       echo done`,
      'bash',
      { cwd: work, sandbox: true },
    )
    expect(attack.stdout).toBe('done\n')
    expect(isRunning(kept)).toBe(true)
    expect(keptHelpersOf(process.pid)).toEqual([kept])
    // killed from outside: the next run starts another
    process.kill(kept, 'SIGKILL')
    const after = await executeAndCapture('echo again', 'bash', { cwd: work, sandbox: true })
    expect(after).toMatchObject({ exitCode: 0, stdout: 'again\n' })
    const [next] = keptHelpersOf(process.pid)
    expect(next).toBeGreaterThan(1)
    expect(next).not.toBe(kept)
  })

  it('makes the next namespaced run ahead: the host\'s child, handed the next request, reaped if it ends unused', async () => {
    const { work } = fresh()
    const ppid = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1])
    /** The runs made ahead: children of this host shown as `--run` that run no command. */
    const waitingRuns = async () => {
      for (let i = 0; i < 100; i++) {
        const runs = runsOf(process.pid).filter((p) => !hasChildRunning(p))
        if (runs.length) return runs
        await new Promise((r) => setTimeout(r, 20))
      }
      return []
    }
    expect((await executeAndCapture('true', 'bash', { cwd: work, sandbox: true })).exitCode).toBe(0)
    const [ahead] = await waitingRuns()
    expect(ahead).toBeGreaterThan(1)
    // its own group, like every run, and no command yet
    expect(Number(readFileSync(`/proc/${ahead}/stat`, 'utf8').split(') ')[1].split(' ')[2])).toBe(ahead)
    // the next request is handed to it: the command's chain goes through it
    const probe = executeAndCapture('sleep 2.7183; echo ok', 'bash', { cwd: work, sandbox: true })
    let chain: number[] = []
    for (let i = 0; i < 100 && !chain.length; i++) {
      const sleeper = hostPidsOf(['sleep', '2.7183'])[0]
      if (sleeper) for (let p = sleeper; p > 1; p = ppid(p)) chain.push(p)
      else await new Promise((r) => setTimeout(r, 20))
    }
    expect(chain[chain.indexOf(process.pid) - 1]).toBe(ahead)
    expect(await probe).toMatchObject({ exitCode: 0, stdout: 'ok\n' })
    // the kept helper killed: the run it had made ahead ends, and is reaped
    // at the next spawn (no zombie of this host is left)
    const [next] = await waitingRuns()
    expect(next).toBeGreaterThan(1)
    expect(next).not.toBe(ahead)
    const [kept] = keptHelpersOf(process.pid)
    process.kill(kept, 'SIGKILL')
    const after = await executeAndCapture('echo again', 'bash', { cwd: work, sandbox: true })
    expect(after).toMatchObject({ exitCode: 0, stdout: 'again\n' })
    expect(existsSync(`/proc/${next}`)).toBe(false)
  })

  it('ends with its host: a host killed with SIGKILL leaves no kept helper behind', async () => {
    const { work } = fresh()
    const code = `
      const { executeAndCapture } = require(${JSON.stringify(join(__dirname, '..', 'index.js'))});
      executeAndCapture('true', 'bash', { cwd: ${JSON.stringify(work)}, sandbox: true }).then((r) => { console.log('ran', r.exitCode); setInterval(() => {}, 1000) })`
    const host = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    host.stdout.on('data', (d) => (out += d))
    for (let i = 0; i < 200 && !out.includes('ran'); i++) await new Promise((r) => setTimeout(r, 25))
    expect(out).toBe('ran 0\n')
    const kept = keptHelpersOf(host.pid!)
    expect(kept).toHaveLength(1)
    host.kill('SIGKILL')
    await new Promise((r) => host.once('exit', r))
    let left = true
    for (let i = 0; i < 200 && left; i++) {
      left = isRunning(kept[0])
      if (left) await new Promise((r) => setTimeout(r, 25))
    }
    expect(left).toBe(false)
  })
})
