// The opt-in sandbox (Linux: Landlock + seccomp), with real processes. Every
// escape test also checks the host side: the file is not there, the server
// saw no connection.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { hostPidsOf, isRunning, waitGone } from './helpers'

import { CommandRunner, executeAndCapture, ProcessManager, PythonSession, sandboxStatus, ShellSession, spawnCall } from '../index.js'

const supported = process.platform === 'linux' && sandboxStatus().landlockAbi >= 6 && sandboxStatus().seccomp
// the full boundary (namespaces): a write outside the roots is EROFS (the
// read-only mount), not Landlock's EACCES
const full = supported && sandboxStatus().namespaces
const deniedText = full ? 'Read-only file system' : 'Permission denied'
const deniedErrno = full ? 30 : 13
const work = mkdtempSync(join(tmpdir(), 'exn-sbx-work-'))
// outside every writable root: not under /tmp, $TMPDIR or the cwd
const outside = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : process.cwd(), 'exn-sbx-out-'))
afterAll(() => {
  rmSync(work, { recursive: true, force: true })
  rmSync(outside, { recursive: true, force: true })
})
const o = { cwd: work, sandbox: true as const }
const bash = (code: string, extra = {}) => executeAndCapture(code, 'bash', { ...o, ...extra })

describe.skipIf(!supported)('sandbox: files', () => {
  it('writes inside the cwd and /tmp work; outside, every kind of write is denied', async () => {
    writeFileSync(join(outside, 'keep'), 'original')
    const r = await bash(`
      echo in > in.txt && echo ok-in
      echo t > /tmp/exn-sbx-$$ && rm /tmp/exn-sbx-$$ && echo ok-tmp
      echo x > /dev/null && echo ok-null
      echo evil > ${outside}/new || echo denied-create
      : > ${outside}/keep || echo denied-truncate
      rm -f ${outside}/keep || echo denied-unlink
      mkdir ${outside}/d || echo denied-mkdir
      mv in.txt ${outside}/moved || echo denied-rename
      ln -s ${outside}/keep link && (echo through > link || echo denied-symlink)
    `)
    for (const w of ['ok-in', 'ok-tmp', 'ok-null', 'denied-create', 'denied-truncate', 'denied-unlink', 'denied-mkdir', 'denied-rename', 'denied-symlink']) {
      expect(r.stdout).toContain(w)
    }
    expect(r.stderr).toContain(deniedText)
    // the host side
    expect(existsSync(join(outside, 'new'))).toBe(false)
    expect(existsSync(join(outside, 'd'))).toBe(false)
    expect(existsSync(join(outside, 'moved'))).toBe(false)
    expect(readFileSync(join(outside, 'keep'), 'utf8')).toBe('original')
    expect(existsSync(join(work, 'in.txt'))).toBe(true)
  })

  it("read-only mode: the cwd is not writable either; writableRoots adds roots; reads are not restricted", async () => {
    const ro = await bash('echo x > ro.txt || echo denied; cat /etc/hostname > /dev/null && echo read-ok', { sandbox: { mode: 'read-only' } })
    expect(ro.stdout).toBe('denied\nread-ok\n')
    expect(existsSync(join(work, 'ro.txt'))).toBe(false)
    const extra = await bash(`echo y > ${outside}/allowed && echo ok`, { sandbox: { writableRoots: [outside] } })
    expect(extra.stdout).toBe('ok\n')
    expect(existsSync(join(outside, 'allowed'))).toBe(true)
    const missing = await bash('true', { sandbox: { writableRoots: ['/nonexistent/dir'] } })
    expect(missing.errorCode).toBe('ENOENT')
  })

  it('a setsid double-forked daemon stays confined', async () => {
    await bash(`setsid sh -c 'sleep 0.3; echo escaped > ${outside}/daemon' > /dev/null 2>&1 & sleep 0.6`)
    await new Promise((r) => setTimeout(r, 500))
    expect(existsSync(join(outside, 'daemon'))).toBe(false)
  })

  it('setsid, double-fork and nohup daemons of a sandboxed run are still swept when it ends', async () => {
    // inside, $$ is a pid of the sandbox's PID namespace: the host finds the
    // daemons by their (unique) command lines
    const tag = String(100 + Math.floor(Math.random() * 800))
    const r = await bash(`
      setsid sh -c 'echo $$ > d1.pid; exec sleep ${tag}.1' > /dev/null 2>&1 &
      (sh -c 'echo $$ > d2.pid; exec sleep ${tag}.2' > /dev/null 2>&1 &) &
      nohup sh -c 'echo $$ > d3.pid; exec sleep ${tag}.3' > /dev/null 2>&1 &
      while [ ! -s d1.pid ] || [ ! -s d2.pid ] || [ ! -s d3.pid ]; do sleep 0.02; done
      echo started`)
    expect(r.stdout).toBe('started\n')
    expect(r.sandbox?.applied).toBe(true)
    const pids = [1, 2, 3].flatMap((i) => hostPidsOf(['sleep', `${tag}.${i}`]))
    expect(await waitGone(pids)).toEqual([])
  })
})

describe.skipIf(!supported)('sandbox: network, signals, environment', () => {
  it('TCP connect and UDP sockets fail; the host server sees no connection; network: true allows them', async () => {
    let connections = 0
    const server = createServer((s) => {
      connections++
      s.destroy()
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const port = (server.address() as any).port
    const code = `
import socket
for kind, make in [("tcp", lambda: socket.create_connection(("127.0.0.1", ${port}), timeout=2)), ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))]:
    try:
        make()
        print(kind, "ok")
    except OSError as e:
        print(kind, "denied", e.errno)
a, b = socket.socketpair()
print("unix ok")`
    const off = await executeAndCapture(code, 'python', o)
    expect(off.stdout).toMatch(/^tcp denied (1|13)\nudp denied 1\nunix ok\n$/)
    expect(connections).toBe(0)
    const curl = await bash(`(exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && echo connected || echo refused`)
    expect(curl.stdout).toBe('refused\n')
    expect(connections).toBe(0)
    const on = await executeAndCapture(code, 'python', { ...o, sandbox: { network: true } })
    expect(on.stdout).toBe('tcp ok\nudp ok\nunix ok\n')
    await new Promise((r) => setTimeout(r, 100))
    expect(connections).toBe(1)
    server.close()
  })

  it('the child cannot signal the host (or ptrace), but its own children', async () => {
    const r = await bash(`kill -0 ${process.pid} 2>&1 || echo denied; sleep 5 & kill $! && echo own-ok`)
    expect(r.stdout).toContain('denied')
    expect(r.stdout).toContain('own-ok')
    const pt = await executeAndCapture(`import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.ptrace(0, 0, None, None), ctypes.get_errno())`, 'python', o)
    expect(pt.stdout).toBe('-1 1\n')
  })

  it("the host's secrets are dropped unless the caller gives env lists", async () => {
    process.env.EXN_SBX_API_TOKEN = 'secret'
    try {
      const r = await bash('echo "${EXN_SBX_API_TOKEN:-none} $HOME"')
      expect(r.stdout).toBe(`none ${process.env.HOME}\n`)
      const given = await bash('echo "${EXN_SBX_API_TOKEN:-none}"', { envDenylist: [] })
      expect(given.stdout).toBe('secret\n')
    } finally {
      delete process.env.EXN_SBX_API_TOKEN
    }
  })
})

describe.skipIf(process.platform !== 'linux')('sandbox: fails closed, composes, is refused where it is not built', () => {
  it('a missing Landlock gives ESANDBOX and nothing runs; run-unsandboxed runs', async () => {
    process.env.EXEC_NATIVE_TEST_NO_LANDLOCK = '1'
    try {
      const r = await bash('echo ran > ran-1')
      expect(r).toMatchObject({ errorCode: 'ESANDBOX', success: false })
      expect(r.error).toMatch(/^exec: sandbox unavailable: Landlock is not enabled in this kernel \(simulated\) \(ESANDBOX\)$/)
      expect(existsSync(join(work, 'ran-1'))).toBe(false)
      const s = await spawnCall('sh', ['-c', 'echo ran > ran-2'], o)
      expect(s.errorCode).toBe('ESANDBOX')
      expect(existsSync(join(work, 'ran-2'))).toBe(false)
      const u = await bash('echo ran > ran-3', { sandbox: { onUnavailable: 'run-unsandboxed' } })
      expect(u.exitCode).toBe(0)
      expect(existsSync(join(work, 'ran-3'))).toBe(true)
    } finally {
      delete process.env.EXEC_NATIVE_TEST_NO_LANDLOCK
    }
  })

  it.skipIf(!supported)('with limits (the fork path), dieWithParent, TypeScript and spawnCall', async () => {
    const lim = await bash(`echo a > lim.txt && (echo b > ${outside}/lim || echo denied)`, { limits: { maxProcesses: 50, openFiles: 256 } })
    expect(lim.stdout).toBe('denied\n')
    // the parent-death signal follows the spawning thread, which stays for the run
    const dwp = await bash(`sleep 0.3; echo b > ${outside}/dwp || echo denied`, { dieWithParent: true })
    expect(dwp.stdout).toBe('denied\n')
    const ts = await executeAndCapture(`import { writeFileSync } from 'node:fs'; const n: number = 1; try { writeFileSync('${outside}/ts', 'x') } catch (e: any) { console.log(e.code, n) }`, 'typescript', o)
    expect(ts.stdout, JSON.stringify(ts)).toBe(`${full ? 'EROFS' : 'EACCES'} 1\n`)
    const sc = await spawnCall('sh', ['-c', `echo c > ${outside}/sc || echo denied`], o)
    expect(sc.exitCode).toBe(0)
    for (const f of ['lim', 'dwp', 'ts', 'sc']) expect(existsSync(join(outside, f))).toBe(false)
  })

  it.skipIf(!full)("maxProcesses counts the command's processes, not the sandbox helper and its init", async () => {
    const ok = await bash('sleep 0.3 & sleep 0.3 & wait; echo ok', { limits: { maxProcesses: 3 } })
    expect(ok.stdout, JSON.stringify(ok)).toBe('ok\n')
    const over = await bash('for i in 1 2 3 4 5 6; do sleep 1 & done; wait; echo ran', { limits: { maxProcesses: 3 } })
    expect(over.errorCode, JSON.stringify(over)).toBe('ELIMIT')
    expect(over.error).toContain('3')
  })

  it.skipIf(!supported)('runCommand: the runner sandbox holds, a call may only narrow it', async () => {
    mkdirSync(join(work, 'repo'), { recursive: true })
    const runner = new CommandRunner({ cwd: join(work, 'repo'), sandbox: { writableRoots: [join(work, 'repo')] } })
    try {
      const r = await runner.run(`echo x > ${outside}/cmd || echo denied`)
      expect(r.stdout).toBe('denied\n')
      expect(existsSync(join(outside, 'cmd'))).toBe(false)
      await expect(runner.run('true', { sandbox: { network: true } })).rejects.toThrow(/may only narrow the runner's sandbox.*\(EINVAL\)/)
      await expect(runner.run('true', { sandbox: false })).rejects.toThrow(/cannot turn off the runner's sandbox/)
      const ro = await runner.run('echo x > f || echo denied', { sandbox: { mode: 'read-only' } })
      expect(ro.stdout).toBe('denied\n')
      const tool = await runner.call({ command: `echo x > ${outside}/tool || echo denied` })
      expect(tool.text).toContain('denied')
      const inter = await runner.start(`echo x > ${outside}/inter || echo denied`)
      expect(inter.output).toContain('denied')
      expect(existsSync(join(outside, 'inter'))).toBe(false)
    } finally {
      await runner.close()
    }
  })

  it.skipIf(!supported)('ProcessManager.start: pipes and PTY are confined', async () => {
    const pm = new ProcessManager()
    try {
      for (const io of [{ type: 'pipe' as const }, { type: 'pty' as const, rows: 24, cols: 80 }]) {
        const f = `pm-${io.type}`
        const { processId } = await pm.start({ argv: ['sh', '-c', `echo x > ${outside}/${f} || echo denied; echo ok > ${f} && echo wrote`], cwd: work, io, sandbox: true })
        await pm.wait(processId, { timeoutMs: 10_000 })
        const snap = pm.snapshot(processId)
        const text = Buffer.from(io.type === 'pty' ? snap.terminal : snap.stdout).toString()
        expect(text).toContain('denied')
        expect(text).toContain('wrote')
        expect(existsSync(join(outside, f))).toBe(false)
        expect(existsSync(join(work, f))).toBe(true)
      }
    } finally {
      await pm.close()
    }
  })

  it.skipIf(!supported)('serve: process/start takes the same sandbox', async () => {
    const { spawn } = await import('node:child_process')
    const srv = spawn(process.execPath, [join(__dirname, '..', 'bin', 'exec-native.mjs'), 'serve'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const msgs: any[] = []
    let buf = ''
    srv.stdout.on('data', (d) => {
      buf += d
      let k
      while ((k = buf.indexOf('\n')) >= 0) {
        msgs.push(JSON.parse(buf.slice(0, k)))
        buf = buf.slice(k + 1)
      }
    })
    const send = (m: object) => srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n')
    send({ id: 1, method: 'process/start', params: { processId: 'a', argv: ['sh', '-c', `echo x > ${outside}/srv || echo denied`], cwd: work, sandbox: { mode: 'read-only' } } })
    send({ id: 2, method: 'process/start', params: { argv: ['true'], sandbox: { mode: 'open' } } })
    const deadline = Date.now() + 15_000
    while (Date.now() < deadline && !(msgs.some((m) => m.id === 2) && msgs.some((m) => m.method === 'process/closed' && m.params.processId === 'a'))) {
      await new Promise((r) => setTimeout(r, 50))
    }
    srv.kill()
    expect(msgs.find((m) => m.id === 1)?.result?.processId).toBe('a')
    expect(msgs.find((m) => m.id === 2)?.error).toMatchObject({ code: -32602 })
    const out = msgs.filter((m) => m.method === 'process/output' && m.params.processId === 'a').map((m) => Buffer.from(m.params.data, 'base64').toString()).join('')
    expect(out).toContain('denied')
    expect(existsSync(join(outside, 'srv'))).toBe(false)
  })

  it.skipIf(!supported)('sessions: the interpreter and every cell are confined; a denied write raises and the session lives', async () => {
    const py = await PythonSession.start({ cwd: work, sandbox: true })
    try {
      const r = await py.execute(`
try:
    open('${outside}/py', 'w')
except OSError as e:
    print('denied', e.errno)
open('py-ok.txt', 'w').write('x')
print('alive')`)
      expect(r.stdout).toBe(`denied ${deniedErrno}\nalive\n`)
      expect(existsSync(join(outside, 'py'))).toBe(false)
      expect(existsSync(join(work, 'py-ok.txt'))).toBe(true)
    } finally {
      await py.close()
    }
    const sh = await ShellSession.start({ cwd: work, sandbox: { mode: 'read-only' } })
    try {
      const r = await sh.execute(`echo x > sh.txt || echo denied`)
      expect(r.stdout).toBe('denied\n')
      expect(existsSync(join(work, 'sh.txt'))).toBe(false)
    } finally {
      await sh.close()
    }
  })

  it.skipIf(!supported)('dieWithParent: a sandboxed child lives while the host does and dies with a SIGKILLed host', async () => {
    const addon = join(__dirname, '..', 'index.js')
    const tag = `1000.${Math.floor(Math.random() * 1e6)}`
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)});
      spawnCall('sh', ['-c', 'echo started; exec sleep ${tag}'], { timeout: 0, dieWithParent: true, sandbox: true }, (d) => process.stdout.write(d));
    `
    const host = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    host.stdout.on('data', (d) => (out += d))
    for (let i = 0; i < 100 && !out.includes('\n'); i++) await new Promise((r) => setTimeout(r, 50))
    // `started` comes before the shell's exec of sleep: look until it is there
    let pid = 0
    for (let i = 0; i < 100 && !pid; i++) {
      ;[pid = 0] = hostPidsOf(['sleep', tag])
      if (!pid) await new Promise((r) => setTimeout(r, 50))
    }
    expect(pid).toBeGreaterThan(1)
    // the child lives while the host does
    await new Promise((r) => setTimeout(r, 500))
    expect(isRunning(pid)).toBe(true)
    host.kill('SIGKILL')
    expect(await waitGone([pid])).toEqual([])
  })

  it.skipIf(!supported)('without namespaces the child restricts itself (no helper), and a writable root replaced between runs stays writable', () => {
    const addon = join(__dirname, '..', 'index.js')
    const dir = join(work, 'replaced')
    // the restriction is prepared once per set of roots and reused: a root
    // deleted and made again is a new directory the old ruleset never saw
    const script = `
      const { spawnCall, executeAndCapture } = require(${JSON.stringify(addon)});
      const fs = require('fs');
      (async () => {
        const d = ${JSON.stringify(dir)};
        const out = [];
        for (let i = 0; i < 3; i++) {
          fs.rmSync(d, { recursive: true, force: true });
          fs.mkdirSync(d);
          const r = await executeAndCapture('echo $PPID > f && cat f && echo x > ${outside}/nope', 'bash', { cwd: d, sandbox: true });
          out.push({ parent: Number(r.stdout.trim()), host: process.pid, wrote: fs.existsSync(d + '/f'), denied: r.sandbox.denied, mechanism: r.sandbox.mechanism });
        }
        const s = await spawnCall('/bin/true', [], { cwd: d, sandbox: true });
        out.push({ exit: s.exitCode });
        console.log(JSON.stringify(out));
      })();
    `
    const r = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, EXEC_NATIVE_TEST_NO_USERNS: '1' }, encoding: 'utf8' })
    const out = JSON.parse(r.stdout)
    for (const run of out.slice(0, 3)) {
      // bash's parent is the host itself: no helper in between
      expect(run).toEqual({ parent: run.host, host: run.host, wrote: true, denied: true, mechanism: 'landlock+seccomp' })
    }
    expect(out[3]).toEqual({ exit: 0 })
    expect(existsSync(join(outside, 'nope'))).toBe(false)
  })

  it('bad sandbox options are EINVAL TypeErrors', async () => {
    await expect(bash('true', { sandbox: 'yes' as any })).rejects.toThrow(/options.sandbox must be true or an object/)
    await expect(bash('true', { sandbox: { mode: 'open' } as any })).rejects.toThrow(/mode must be 'read-only' or 'workspace-write'/)
  })

  it.skipIf(!supported)('the CLI: --sandbox[=read-only], --writable, --network', () => {
    const cli = join(__dirname, '..', 'bin', 'exec-native.mjs')
    const run = (...a: string[]) => spawnSync(process.execPath, [cli, '-C', work, ...a], { encoding: 'utf8' })
    const ww = run('--sandbox', '-e', `echo x > ${outside}/cli || echo denied; echo ok > cli.txt && echo wrote`)
    expect(ww.stdout).toBe('denied\nwrote\n')
    const ro = run('--sandbox=read-only', '-e', 'echo x > cli-ro.txt || echo denied')
    expect(ro.stdout).toBe('denied\n')
    const extra = run('--sandbox', '--writable', outside, '-e', `echo y > ${outside}/cli-w && echo ok`)
    expect(extra.stdout).toBe('ok\n')
    expect(run('--network', '-e', 'true').status).toBe(2)
    expect(existsSync(join(outside, 'cli'))).toBe(false)
    expect(existsSync(join(work, 'cli-ro.txt'))).toBe(false)
  })
})

describe.skipIf(!supported)('sandbox: more escape attempts', () => {
  it('node fetch, python urllib, curl, raw and netlink sockets fail; the host server sees nothing', async () => {
    let connections = 0
    const server = createServer((c) => {
      connections++
      c.destroy()
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const port = (server.address() as any).port
    const fetch_ = await executeAndCapture(`await fetch('http://127.0.0.1:${port}/').then(() => console.log('reached'), (e) => console.log('failed', e.cause?.code))`, 'javascript', o)
    expect(fetch_.stdout).toMatch(/^failed E/)
    const py = await executeAndCapture(
      `import socket, urllib.request
for name, fn in [("urllib", lambda: urllib.request.urlopen("http://127.0.0.1:${port}/", timeout=2)),
                 ("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                 ("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)),
                 ("inet6", lambda: socket.create_connection(("::1", ${port}), timeout=2))]:
    try:
        fn(); print(name, "reached")
    except OSError as e:
        print(name, "failed")`,
      'python',
      o,
    )
    expect(py.stdout).toBe('urllib failed\nraw failed\nnetlink failed\ninet6 failed\n')
    const curl = await bash(`command -v curl > /dev/null || { echo failed; exit; }; curl -sS --max-time 3 http://127.0.0.1:${port}/ > /dev/null 2>&1 && echo reached || echo failed`)
    expect(curl.stdout).toBe('failed\n')
    await new Promise((r) => setTimeout(r, 100))
    server.close()
    expect(connections).toBe(0)
  })

  it("unshare -Urm, unshare -U, nested bwrap and a nohup daemon stay confined; the host's /proc/<pid>/environ is unreadable", async () => {
    const r = await bash(`
      unshare -Urm sh -c 'echo x > ${outside}/userns' 2>/dev/null || echo unshare-failed
      unshare -U sh -c 'echo x > ${outside}/userns-nomap' 2>/dev/null || echo userns-write-denied
      if command -v bwrap > /dev/null; then
        bwrap --ro-bind / / --bind ${outside} ${outside} --dev /dev --unshare-user sh -c 'echo x > ${outside}/bwrap' 2>/dev/null || echo bwrap-failed
      else echo no-bwrap; fi
      nohup sh -c 'sleep 0.3; echo x > ${outside}/nohup' > /dev/null 2>&1 &
      cat /proc/${process.pid}/environ > /dev/null 2>&1 || echo environ-denied
      sleep 0.6
    `)
    expect(r.stdout).toContain('unshare-failed')
    // a user namespace can still be made (without a uid map): the Landlock domain goes with it
    expect(r.stdout).toContain('userns-write-denied')
    // nested bwrap (CI installs it: .ci/run)
    if (process.env.CI) expect(r.stdout).not.toContain('no-bwrap')
    if (!r.stdout.includes('no-bwrap')) expect(r.stdout).toContain('bwrap-failed')
    expect(r.stdout).toContain('environ-denied')
    await new Promise((res) => setTimeout(res, 400))
    expect(existsSync(join(outside, 'userns'))).toBe(false)
    expect(existsSync(join(outside, 'userns-nomap'))).toBe(false)
    expect(existsSync(join(outside, 'bwrap'))).toBe(false)
    expect(existsSync(join(outside, 'nohup'))).toBe(false)
    // the host itself can read it: the denial is the sandbox's (and, for a root host, the capability drop's)
    expect(readFileSync(`/proc/${process.pid}/environ`).length).toBeGreaterThan(0)
  })

  it('a hard link from outside into a root is refused (EXDEV); a writable root that is a symlink is refused', async () => {
    writeFileSync(join(outside, 'src'), 'x')
    const r = await bash(`ln ${outside}/src linked 2>&1 || echo link-denied`)
    expect(r.stdout).toMatch(/Invalid cross-device link[\s\S]*link-denied/)
    expect(existsSync(join(work, 'linked'))).toBe(false)
    const link = join(work, 'root-link')
    symlinkSync(outside, link)
    const s = await bash(`echo x > ${outside}/via-link`, { sandbox: { writableRoots: [link] } })
    expect(s.errorCode).toBe('EINVAL')
    expect(s.error).toMatch(/sandbox.writableRoots: .*root-link is a symlink \(to .*\); give the directory itself \(EINVAL\)$/)
    expect(existsSync(join(outside, 'via-link'))).toBe(false)
  })
})

describe.skipIf(!supported)('sandbox: denial reporting', () => {
  it('a denied write is reported with its path; a success, a missing file and an error inside a root are not', async () => {
    const den = await bash(`echo x > ${outside}/den`)
    expect(den.exitCode).toBe(1)
    expect(den.sandbox).toMatchObject({ applied: true, denied: true })
    expect(den.sandbox!.abi).toBeGreaterThanOrEqual(6)
    expect(den.sandbox!.violations).toEqual([{ kind: 'write', path: `${outside}/den`, message: expect.stringContaining(deniedText) }])
    const ok = await bash('echo fine')
    expect(ok.sandbox).toMatchObject({ applied: true, denied: false, violations: [] })
    // network off: no socket() at all, so no pathname Unix socket either;
    // with network on, Landlock < 9 cannot stop a pathname Unix connect
    expect(ok.sandbox!.missing).not.toContain('unixSockets')
    const netOn = await bash('echo fine', { sandbox: { network: true } })
    if (sandboxStatus().landlockAbi < 9) expect(netOn.sandbox!.missing).toContain('unixSockets')
    const enoent = await bash('cat /nonexistent-exn-file')
    expect(enoent.exitCode).toBe(1)
    expect(enoent.sandbox!.denied).toBe(false)
    // a permission error on a path inside a writable root is a real one, not the sandbox's
    const inside = await bash(`echo "touch: cannot touch '${work}/locked': Permission denied" >&2; exit 1`)
    expect(inside.sandbox!.denied).toBe(false)
    const py = await executeAndCapture(`open('${outside}/py-den', 'w')`, 'python', o)
    expect(py.sandbox!.violations[0]).toMatchObject({ kind: 'write', path: `${outside}/py-den` })
    const net = await executeAndCapture(`import socket; socket.create_connection(("127.0.0.1", 9), timeout=2)`, 'python', o)
    expect(net.sandbox).toMatchObject({ denied: true, violations: [expect.objectContaining({ kind: 'network' })] })
    // not sandboxed: no report
    expect((await executeAndCapture('true', 'bash')).sandbox).toBeUndefined()
  })

  it("runCommand's text gets a line the model can act on, and sandboxDenied", async () => {
    const runner = new CommandRunner({ cwd: work, sandbox: true })
    try {
      const r = await runner.run(`echo x > ${outside}/cmd-den`)
      expect(r.sandboxDenied).toBe(true)
      expect(r.text.split('\n').at(-1)).toBe(`[sandbox: writes limited to ${work}, /tmp${process.env.TMPDIR && process.env.TMPDIR !== '/tmp' ? ', ' + process.env.TMPDIR : ''}; network off; denied: '${outside}/cmd-den' (${deniedText})]`)
      const fine = await runner.run('echo fine')
      expect(fine.sandboxDenied).toBe(false)
      expect(fine.text).not.toContain('[sandbox')
    } finally {
      await runner.close()
    }
  })

  it('ProcessManager and serve report the denial (sandboxDenied, as codex)', async () => {
    const pm = new ProcessManager()
    try {
      const { processId } = await pm.start({ argv: ['sh', '-c', `echo x > ${outside}/pm-den`], cwd: work, sandbox: true })
      const w = await pm.wait(processId, { timeoutMs: 10_000 })
      expect(w.sandbox).toMatchObject({ applied: true, denied: true, violations: [expect.objectContaining({ path: `${outside}/pm-den` })] })
    } finally {
      await pm.close()
    }
    const srv = spawn(process.execPath, [join(__dirname, '..', 'bin', 'exec-native.mjs'), 'serve'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const msgs: any[] = []
    let buf = ''
    srv.stdout.on('data', (d) => {
      buf += d
      let k
      while ((k = buf.indexOf('\n')) >= 0) {
        msgs.push(JSON.parse(buf.slice(0, k)))
        buf = buf.slice(k + 1)
      }
    })
    srv.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'process/start', params: { processId: 'd', argv: ['bash', '-c', `echo x > ${outside}/srv-den`], cwd: work, sandbox: {} } }) + '\n')
    const deadline = Date.now() + 15_000
    while (Date.now() < deadline && !msgs.some((m) => m.method === 'process/exited')) await new Promise((r) => setTimeout(r, 50))
    srv.kill()
    const exited = msgs.find((m) => m.method === 'process/exited')
    expect(exited?.params).toMatchObject({ processId: 'd', exitCode: 1, sandboxDenied: true })
    expect(exited.params.sandbox.violations[0].path).toBe(`${outside}/srv-den`)
  })

  it("onUnavailable 'warn' runs, says so in the result and in runCommand's text", async () => {
    process.env.EXEC_NATIVE_TEST_NO_LANDLOCK = '1'
    try {
      const r = await bash('echo ran', { sandbox: { onUnavailable: 'warn' } })
      expect(r.stdout).toBe('ran\n')
      expect(r.sandbox).toMatchObject({ applied: false, warning: 'Landlock is not enabled in this kernel (simulated)' })
      const runner = new CommandRunner({ cwd: work, sandbox: { onUnavailable: 'warn' } })
      try {
        const c = await runner.run('echo ran')
        expect(c.text.split('\n').at(-1)).toBe('[sandbox: not applied: Landlock is not enabled in this kernel (simulated)]')
      } finally {
        await runner.close()
      }
      const quiet = new CommandRunner({ cwd: work, sandbox: { onUnavailable: 'run-unsandboxed' } })
      try {
        const c = await quiet.run('echo ran')
        expect(c.text).not.toContain('[sandbox')
        expect(c.sandbox).toMatchObject({ applied: false })
      } finally {
        await quiet.close()
      }
    } finally {
      delete process.env.EXEC_NATIVE_TEST_NO_LANDLOCK
    }
  })
})
