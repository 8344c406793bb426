// The Windows terminal (ConPTY, issue 25): ProcessManager's io.type 'pty'
// and the agent tool's tty. Run by the official Windows node.exe: on the
// Windows runners of .github/workflows/release.yml as any test (the host's
// stdio redirected: the child is given invalid standard handles, which
// Windows replaces with the console's), and under Wine by
// scripts/wine-test.sh on a terminal (script(1)): Wine gives a pseudo
// console's child the console only when the host's own standard handles are
// console handles, and its ResizePseudoConsole is a stub (E_NOTIMPL).
//
//   node __test__/windows/conpty.test.mjs
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { alive, until } from './helpers.mjs'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const addon = require(path.join(root, 'index.js'))
const underWine = !!process.env.EXEC_NATIVE_WINE
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'exec-native-conpty-'))
const node = process.execPath

assert.equal(process.platform, 'win32', 'this suite runs on Windows (or Wine)')
if (underWine) assert.ok(process.stdout.isTTY, 'under Wine this suite runs on a terminal (scripts/wine-test.sh uses script(1))')

/** What the console showed, its VT sequences taken out. */
function screen(pm, id) {
  return pm.snapshot(id).terminal.toString().replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\x1b\][^\x07]*\x07/g, '')
}

test('a terminal (ConPTY): the child is on a console of the size asked, what is typed reaches it, its output and exit code come back', async () => {
  const pm = new addon.ProcessManager()
  try {
    const code = [
      "process.stdout.write('tty=' + process.stdout.isTTY + ' stdin=' + process.stdin.isTTY + ' size=' + process.stdout.columns + 'x' + process.stdout.rows + '\\n')",
      "process.stdin.on('data', (d) => { process.stdout.write('got:' + String(d).trim() + '\\n'); if (String(d).includes('bye')) process.exit(7) })",
    ].join(';')
    const { processId, pid } = await pm.start({ argv: [node, '-e', code], io: { type: 'pty', rows: 30, cols: 100 } })
    assert.ok(pid > 0)
    assert.ok(await until(() => screen(pm, processId).includes('size='), 30000), JSON.stringify(pm.snapshot(processId).terminal.toString()))
    assert.match(screen(pm, processId), /tty=true stdin=true size=100x30/)
    await pm.write(processId, 'hello\r')
    assert.ok(await until(() => screen(pm, processId).includes('got:hello'), 20000), screen(pm, processId))
    await assert.rejects(pm.closeStdin(processId), (e) => e.code === 'EINVAL' && /write the EOF character \("\\u001a\\r"\)/.test(e.message))
    await pm.write(processId, 'bye\r')
    const r = await pm.wait(processId, { timeoutMs: 20000 })
    assert.deepEqual([r.running, r.exitCode, r.signal], [false, 7, null])
    const snap = pm.snapshot(processId)
    assert.match(screen(pm, processId), /got:bye/)
    assert.equal(snap.stdout.length, 0, 'a terminal has no stdout of its own')
    assert.equal(snap.stderr.length, 0)
    assert.throws(() => pm.resize(processId, { rows: 10, cols: 10 }), (e) => e.code === 'EINVAL' && /has ended: its terminal is closed/.test(e.message))
  } finally {
    await pm.close()
  }
})

test('resize: the child sees the new size (Windows); Wine\'s ConPTY cannot resize: ENOTSUP, said so', async (t) => {
  const pm = new addon.ProcessManager()
  try {
    const code = "process.stdout.on('resize', () => process.stdout.write('now=' + process.stdout.columns + 'x' + process.stdout.rows + '\\n')); process.stdout.write('ready\\n'); setInterval(() => {}, 1000)"
    const { processId } = await pm.start({ argv: [node, '-e', code], io: { type: 'pty', rows: 24, cols: 80 } })
    assert.ok(await until(() => screen(pm, processId).includes('ready'), 30000))
    if (underWine) {
      assert.throws(() => pm.resize(processId, { rows: 40, cols: 120 }), (e) => e.code === 'ENOTSUP' && /cannot resize a console \(E_NOTIMPL/.test(e.message))
      t.diagnostic('Wine: ResizePseudoConsole is a stub; the resize row is the Windows runners\'')
    } else {
      pm.resize(processId, { rows: 40, cols: 120 })
      assert.ok(await until(() => screen(pm, processId).includes('now=120x40'), 20000), screen(pm, processId))
    }
    assert.throws(() => pm.resize(processId, { rows: 0, cols: 120 }), { code: 'EINVAL' })
  } finally {
    await pm.close()
  }
})

test('terminate: graceful closes the console (CTRL_CLOSE_EVENT), force ends the job; a grandchild on the console goes either way', async (t) => {
  const pm = new addon.ProcessManager()
  try {
    for (const mode of ['graceful', 'force']) {
      const file = path.join(tmp, `gc-${mode}.pid`)
      const gc = `require('fs').writeFileSync(${JSON.stringify(file)}, String(process.pid)); setInterval(() => {}, 1000)`
      // the grandchild inherits the console (stdio: 'inherit')
      const code = `require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(gc)}], { stdio: 'inherit' }); setInterval(() => {}, 1000)`
      const { processId } = await pm.start({ argv: [node, '-e', code], io: { type: 'pty', rows: 24, cols: 80 } })
      assert.ok(await until(() => fs.existsSync(file) && fs.readFileSync(file, 'utf8').length > 0, 30000), 'the grandchild started')
      const gcPid = Number(fs.readFileSync(file, 'utf8'))
      assert.ok(alive(gcPid))
      const started = Date.now()
      const r = await pm.terminate(processId, { mode, timeoutMs: 10000 })
      assert.equal(r.running, false)
      assert.equal(r.signal, null)
      if (mode === 'force') assert.equal(r.exitCode, 1, 'TerminateJobObject ends it with 1')
      // the console's close ended it, not the job's end after the timeout (1)
      else assert.notEqual(r.exitCode, 1, 'graceful: CTRL_CLOSE_EVENT ended it')
      t.diagnostic(`${mode}: exit ${r.exitCode} after ${Date.now() - started} ms`)
      assert.ok(await until(() => !alive(gcPid), 20000), `grandchild ${gcPid} is gone (${mode})`)
    }
  } finally {
    await pm.close()
  }
})

test('a terminal child gets its arguments as given (its own command line, quoted as the C runtime splits it)', async () => {
  const pm = new addon.ProcessManager()
  try {
    const args = ['a b', 'c"d', '', 'tail\\', 'sp ace\\', 'q\\"r']
    const code = "process.stdout.write('<' + JSON.stringify(process.argv.slice(1)) + '>\\n')"
    const { processId } = await pm.start({ argv: [node, '-e', code, ...args], io: { type: 'pty', rows: 24, cols: 200 } })
    const r = await pm.wait(processId, { timeoutMs: 20000 })
    assert.equal(r.exitCode, 0)
    const m = /<(.*)>/.exec(screen(pm, processId))
    assert.ok(m, screen(pm, processId))
    assert.deepEqual(JSON.parse(m[1]), args)
  } finally {
    await pm.close()
  }
})

test('a terminal child that cannot start: ENOENT, nothing kept', async () => {
  const pm = new addon.ProcessManager()
  try {
    await assert.rejects(pm.start({ argv: ['no-such-program-here'], io: { type: 'pty', rows: 24, cols: 80 } }), { code: 'ENOENT' })
    assert.deepEqual(pm.list(), [])
  } finally {
    await pm.close()
  }
})

test('the agent tool: exec_command with tty true runs the command on a console; write_stdin types into it', async () => {
  const runner = new addon.CommandRunner({ shell: 'cmd', outputDir: tmp })
  try {
    const reader = path.join(tmp, 'reader.js')
    fs.writeFileSync(reader, "console.log('tty ' + process.stdout.isTTY); process.stdin.on('data', (d) => { console.log('got ' + String(d).trim()); process.exit(0) })")
    const s = await runner.callTool('exec_command', { cmd: `"${node}" "${reader}"`, tty: true, yield_time_ms: 5000 })
    assert.equal(s.isError, false, s.text)
    assert.match(s.text, /tty true/)
    const id = Number(/session_id (\d+)/.exec(s.text)?.[1])
    assert.ok(id > 0, s.text)
    const w = await runner.callTool('write_stdin', { session_id: id, chars: 'abc\r', yield_time_ms: 10000 })
    assert.match(w.text, /got abc/)
  } finally {
    await runner.close()
  }
})
