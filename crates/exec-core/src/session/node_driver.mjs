// exec-native: the driver of a persistent Node.js session (NodeSession).
//
// The addon starts `node [execArgv] --input-type=module -e <this file>` in the
// session's cwd, with stdin connected to one end of a socketpair: the control
// channel. Node cannot move a descriptor (no dup), so the socket stays on fd 0
// and the driver keeps cells away from it:
// - `process.stdin` is /dev/null;
// - every child process (spawn, exec, fork, execSync, ...) that would inherit
//   fd 0 ('inherit', 0, the default of fork) gets /dev/null instead: the
//   driver rewrites the stdio of the two bindings every child_process call
//   goes through.
// Not isolated (documented in docs/SESSIONS.md): a cell that opens fd 0 on
// purpose (`fs.readSync(0)`, `/proc/self/fd/0`, a native addon) reaches the
// socket. stdout and stderr stay the real pipes: whatever a cell prints (even
// text that looks like a protocol message) is output, nothing else.
//
// Protocol: JSON lines on the control socket, the Python driver's shape.
//   driver -> addon  {"ev": "ready", "pid": ..., "version": "v20.20.2"}
//   addon -> driver  {"op": "run", "id": 7, "code": "...", "init": false,
//                     "error": null | {"type", "message", "traceback"}}
//   driver -> addon  {"ev": "start", "id": 7, "count": 3}
//   driver -> addon  {"ev": "display", "id": 7, "data": {mime: data},
//                     "at": [stdout bytes, stderr bytes]}  (0..n)
//   driver -> addon  {"ev": "done", "id": 7, "count": 3, "status": "ok",
//                     "value": "42" | null, "data": {mime: data} | null,
//                     "exception": {"type", "message", "traceback"} | null,
//                     "wrote": [stdout bytes, stderr bytes],
//                     "runs": [[stream 0|1, up to byte], ...] | null}
// The byte counts are what process.stdout/stderr wrote since the last "done":
// the addon places a bundle among the cell's output by them (when they match
// what it read; a child process writing beside them makes it use arrival).
// status is "ok", "error" or "interrupted". `error` in a request is a compile
// error found by the addon (TypeScript): the cell gets its number and fails
// with it, nothing runs. EOF on the socket ends the driver.
//
// A cell runs through an in-process inspector session: `Runtime.evaluate`
// with V8's replMode (let/const/class persist and can be declared again,
// top-level await), posted from a `vm.Script` run with `breakOnSigint`, so a
// SIGINT stops synchronous code with the state kept. A cell waiting on a
// promise is settled as interrupted by the driver's SIGINT listener (the
// promise is abandoned). Code that runs synchronously after an `await` cannot
// be stopped in-process: the addon kills the session after a grace period.
// Uncaught exceptions (a throwing timer) and process.exit() end the process,
// as they would in a script: the addon reports `died` and restarts.
//
// Windows (no socket can be handed over as stdin there): the addon listens on
// a loopback port and names it in EXEC_NATIVE_SESSION_CTL ("port token"); the
// driver connects, sends the token line and removes the variable (cells and
// their children never see it); stdin is NUL. An interrupt is the message
// {"op": "interrupt"}: it settles a cell waiting on a promise as a SIGINT
// does; synchronous code cannot read it, so the addon kills `node` after the
// grace (as for code running after an `await` on POSIX).

import fs from 'node:fs'
import inspector from 'node:inspector'
import { createRequire } from 'node:module'
import net from 'node:net'
import path from 'node:path'
import util from 'node:util'
import vm from 'node:vm'

const cwd = process.cwd()
const windows = process.platform === 'win32'
const ctl = await channel()

/** The control channel: fd 0 (a socketpair), or on Windows the addon's loopback port. */
async function channel() {
  const where = process.env.EXEC_NATIVE_SESSION_CTL
  if (where === undefined) return new net.Socket({ fd: 0, readable: true, writable: true })
  delete process.env.EXEC_NATIVE_SESSION_CTL
  const [port, token] = where.split(' ')
  const s = net.connect({ port: Number(port), host: '127.0.0.1' })
  await new Promise((resolve, reject) => {
    s.once('connect', resolve)
    s.once('error', reject)
  })
  s.write(token + '\n')
  return s
}

// ---- the Node this needs: 20.17 or later (docs/SESSIONS.md); an older one
// says so and ends (the addon rejects start with ENOTSUP) ----
{
  const [major, minor] = process.versions.node.split('.').map(Number)
  if (major < 20 || (major === 20 && minor < 17)) {
    await new Promise((r) => ctl.write(JSON.stringify({ ev: 'unsupported', version: process.version }) + '\n', r))
    process.exit(0)
  }
}

// ---- fd 0 is the channel: keep it from cells and their children ----
const devNull = windows ? '\\\\.\\NUL' : '/dev/null'
const nullFd = fs.openSync(devNull, 'r') // libuv opens it close-on-exec
let nullStdin = null
Object.defineProperty(process, 'stdin', {
  configurable: true,
  enumerable: true,
  get() {
    nullStdin ??= fs.createReadStream(devNull)
    return nullStdin
  },
})
const awayFromChannel = (stdio) =>
  Array.isArray(stdio)
    ? stdio.map((s) =>
        s && (s.type === 'fd' || s.type === 'inherit') && (s.fd === 0 || (s.type === 'inherit' && s.fd === undefined))
          ? { type: 'fd', fd: nullFd }
          : s,
      )
    : stdio
{
  const wrap = process.binding('process_wrap').Process.prototype
  const spawnAsync = wrap.spawn
  wrap.spawn = function (options) {
    if (options) options.stdio = awayFromChannel(options.stdio)
    return spawnAsync.call(this, options)
  }
  const sync = process.binding('spawn_sync')
  const spawnSync = sync.spawn
  sync.spawn = function (options) {
    if (options) options.stdio = awayFromChannel(options.stdio)
    return spawnSync.call(this, options)
  }
}

// ---- what the driver's streams wrote: a bundle is placed among the cell's
// output by these counts (display's "at", done's "wrote") ----
const written = [0, 0]
let base = [0, 0]
let runs = [] // [stream, up to byte] since the last "done"; null past MAX_RUNS
const MAX_RUNS = 10_000
// a string this long is not measured (Buffer.byteLength costs 0.3 ns a byte,
// 8% of a 10 MB write): the cell's order is then the one the addon read
const MEASURED = 256 * 1024
let inexact = false
for (const [i, stream] of [[0, process.stdout], [1, process.stderr]]) {
  const write = stream.write
  stream.write = function (chunk, encoding) {
    let n = 0
    if (typeof chunk === 'string') {
      if (chunk.length > MEASURED) inexact = true
      n = inexact ? chunk.length : Buffer.byteLength(chunk, typeof encoding === 'string' ? encoding : 'utf8')
    } else if (chunk?.byteLength !== undefined) n = chunk.byteLength
    if (n > 0) {
      written[i] += n
      const end = written[i] - base[i]
      if (runs && runs.length && runs[runs.length - 1][0] === i) runs[runs.length - 1][1] = end
      else if (runs && runs.length < MAX_RUNS) runs.push([i, end])
      else runs = null
    }
    return write.apply(this, arguments)
  }
}
const inCell = () => (inexact ? null : [written[0] - base[0], written[1] - base[1]])

// ---- the channel ----
function send(msg) {
  let line
  try {
    line = JSON.stringify(msg)
  } catch {
    line = JSON.stringify({ ...msg, value: null, data: null })
  }
  ctl.write(line + '\n')
}

// ---- what cells see ----
const cellRequire = createRequire(path.join(cwd, '[cell]'))
const importer = (specifier, options) => import(specifier, options)
const DISPLAY = Symbol.for('Jupyter.display')
let current = null // the cell running now: { id, count, settle }
let lastId = null // the last cell that started (output of its timers)

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
const JPEG = [0xff, 0xd8, 0xff]
const startsWith = (bytes, magic) => bytes.length >= magic.length && magic.every((b, i) => bytes[i] === b)
const inspectText = (v) =>
  util.inspect(v, { depth: 4, maxArrayLength: 100, maxStringLength: 10_000, breakLength: 120, colors: false })

function toBase64(data) {
  if (typeof data === 'string') return data
  if (data instanceof ArrayBuffer) data = new Uint8Array(data)
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64')
}

/** The MIME bundle of a value, or null when it has none beyond text/plain. */
function bundleOf(v) {
  if (v !== null && (typeof v === 'object' || typeof v === 'function')) {
    if (typeof v[DISPLAY] === 'function') {
      const b = v[DISPLAY]()
      if (b && typeof b === 'object') return normalize(b)
    }
    if (v instanceof Uint8Array) {
      if (startsWith(v, PNG)) return { 'image/png': toBase64(v), 'text/plain': `<PNG image, ${v.length} bytes>` }
      if (startsWith(v, JPEG)) return { 'image/jpeg': toBase64(v), 'text/plain': `<JPEG image, ${v.length} bytes>` }
    }
  }
  return null
}

/** Binary data as base64, objects kept for JSON types, everything else as text. */
function normalize(bundle) {
  const out = {}
  for (const [mime, data] of Object.entries(bundle)) {
    if (data === undefined) continue
    if (data instanceof Uint8Array || data instanceof ArrayBuffer) out[mime] = toBase64(data)
    else if (mime === 'application/json' || mime.endsWith('+json')) out[mime] = data
    else out[mime] = typeof data === 'string' ? data : String(data)
  }
  return out
}

function display(value, options = {}) {
  let data
  if (options.raw) data = normalize(value)
  else data = bundleOf(value) ?? { 'text/plain': typeof value === 'string' ? value : inspectText(value) }
  if (data['text/plain'] === undefined && !options.raw) data['text/plain'] = inspectText(value)
  send({ ev: 'display', id: current?.id ?? lastId, data, at: inCell() })
}
display.html = (html) => display({ 'text/html': String(html) }, { raw: true })
display.svg = (svg) => display({ 'image/svg+xml': String(svg) }, { raw: true })
display.markdown = (md) => display({ 'text/markdown': String(md) }, { raw: true })
display.md = display.markdown
display.png = (bytes) => display({ 'image/png': toBase64(bytes) }, { raw: true })
display.jpeg = (bytes) => display({ 'image/jpeg': toBase64(bytes) }, { raw: true })
display.json = (value) => display({ 'application/json': value, 'text/plain': inspectText(value) }, { raw: true })

const globals = {
  display,
  require: cellRequire,
  __filename: path.join(cwd, '[cell]'),
  __dirname: cwd,
}
for (const [k, v] of Object.entries(globals)) {
  Object.defineProperty(globalThis, k, { value: v, writable: true, configurable: true, enumerable: false })
}
Object.defineProperty(globalThis, Symbol.for('exec-native.import'), { value: importer })

// ---- running a cell ----
const session = new inspector.Session()
session.connect()
const STASH = Symbol.for('exec-native.stash')
const stashDecl = `function () { globalThis[Symbol.for('exec-native.stash')] = this }`

/** The object behind a remote object id, in this realm (same isolate). */
function fetchRemote(objectId) {
  let failed = null
  session.post('Runtime.callFunctionOn', { objectId, functionDeclaration: stashDecl }, (e) => {
    failed = e
  })
  const v = globalThis[STASH]
  delete globalThis[STASH]
  if (failed) throw failed
  return v
}

function remoteValue(r) {
  if (r.objectId) return fetchRemote(r.objectId)
  if (r.type === 'undefined') return undefined
  if ('unserializableValue' in r) {
    const u = r.unserializableValue
    if (u.endsWith('n')) return BigInt(u.slice(0, -1))
    return Number(u)
  }
  return r.value
}

/** Frames of the driver and of the inspector are cut, the cell's kept. */
function cellStack(stack, filename) {
  if (typeof stack !== 'string') return ''
  const lines = stack.split('\n')
  const kept = []
  for (const line of lines) {
    if (/^\s+at /.test(line)) {
      if (line.includes('[eval') || line.includes('evalmachine') || line.includes('exec-native-driver')) break
      if (line.includes('node:inspector')) break
    }
    kept.push(line)
  }
  return cellNames(kept.join('\n'))
}

function describe(err, filename, details) {
  if (err instanceof Error || (err && typeof err === 'object' && 'stack' in err)) {
    let stack = cellStack(String(err.stack ?? ''), filename)
    if (err.name === 'SyntaxError' && details && !stack.includes(filename)) {
      stack += `\n    at ${filename}:${details.lineNumber + 1}:${details.columnNumber + 1}`
    }
    return { type: String(err.name ?? 'Error'), message: String(err.message ?? ''), traceback: stack }
  }
  const text = inspectText(err)
  return { type: 'Uncaught', message: text, traceback: `Uncaught ${text}` }
}

async function flush() {
  await new Promise((r) => process.stdout.write('', r))
  await new Promise((r) => process.stderr.write('', r))
}

let postCell = null
globalThis[Symbol.for('exec-native.post')] = () => postCell()
const runner = new vm.Script(`globalThis[Symbol.for('exec-native.post')]()`, { filename: 'exec-native-driver' })

/** V8 takes no space in a sourceURL: `<cell 3>` travels as `exec-native-cell-3`. */
const sourceUrl = (filename) => `exec-native-${filename.replace(/[<>]/g, '').replace(' ', '-')}`
const cellNames = (text) => text.replace(/exec-native-cell-(\d+)/g, '<cell $1>').replace(/exec-native-init/g, '<init>')

function evaluate(code, filename) {
  return new Promise((resolve) => {
    postCell = () =>
      session.post(
        'Runtime.evaluate',
        {
          expression: `${code}\n//# sourceURL=${sourceUrl(filename)}`,
          replMode: true,
          awaitPromise: true,
          generatePreview: false,
          objectGroup: 'cell',
        },
        (e, r) => resolve({ e, r }),
      )
    try {
      runner.runInThisContext({ breakOnSigint: true })
    } catch (e) {
      if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') resolve({ interrupted: true })
      else resolve({ e })
    }
  })
}

async function run(req) {
  const init = !!req.init
  const count = init ? cellCount : ++cellCount
  const filename = init ? '<init>' : `<cell ${count}>`
  let settle
  const settled = new Promise((r) => (settle = r))
  current = { id: req.id, count, settle }
  lastId = req.id
  send({ ev: 'start', id: req.id, count })
  let outcome
  if (req.error) {
    const e = req.error
    outcome = { status: 'error', exception: { ...e, traceback: String(e.traceback).replace('<cell>', filename) } }
  } else {
    const evaluated = evaluate(req.code ?? '', filename).then((x) => settleEval(x, filename))
    outcome = await Promise.race([settled, evaluated.then(awaitValue)])
  }
  current = null
  const done = { ev: 'done', id: req.id, count, status: outcome.status, value: null, data: null, exception: null }
  if (outcome.status === 'ok') {
    if (outcome.value !== undefined) {
      try {
        done.value = inspectText(outcome.value)
        done.data = bundleOf(outcome.value)
      } catch (e) {
        done.value = `[value could not be shown: ${e?.message ?? e}]`
      }
      globalThis._ = outcome.value
    }
  } else {
    done.exception = outcome.exception
    try {
      process.stderr.write(outcome.exception.traceback + '\n')
    } catch {}
  }
  session.post('Runtime.releaseObjectGroup', { objectGroup: 'cell' })
  await flush()
  done.wrote = inCell()
  done.runs = inexact ? null : runs
  base = [...written]
  runs = []
  inexact = false
  send(done)
}

function settleEval({ e, r, interrupted }, filename) {
  if (interrupted) return interruptedOutcome()
  if (e) return { status: 'error', exception: describe(e, filename) }
  if (r.exceptionDetails) {
    const d = r.exceptionDetails
    let err
    try {
      err = d.exception ? remoteValue(d.exception) : new Error(d.text)
    } catch {
      err = new Error(d.text)
    }
    globalThis._error = err
    return { status: 'error', exception: describe(err, filename, d) }
  }
  return { status: 'ok', value: remoteValue(r.result) }
}

/** A promise as the last value is awaited (its result is the cell's value). */
async function awaitValue(outcome) {
  if (outcome.status !== 'ok' || !(outcome.value instanceof Promise)) return outcome
  try {
    return { status: 'ok', value: await outcome.value }
  } catch (err) {
    globalThis._error = err
    return { status: 'error', exception: describe(err, '') }
  }
}

function interruptedOutcome() {
  return {
    status: 'interrupted',
    exception: { type: 'Interrupted', message: 'Script execution was interrupted by SIGINT', traceback: 'Interrupted: Script execution was interrupted by SIGINT' },
  }
}

// a cell waiting on a promise is abandoned at SIGINT; between cells SIGINT is ignored
process.on('SIGINT', () => {
  if (current) current.settle(interruptedOutcome())
})

let cellCount = 0
let inbox = ''
let queue = Promise.resolve()
ctl.setEncoding('utf8')
ctl.on('data', (chunk) => {
  inbox += chunk
  let at
  while ((at = inbox.indexOf('\n')) >= 0) {
    const line = inbox.slice(0, at)
    inbox = inbox.slice(at + 1)
    let req
    try {
      req = JSON.parse(line)
    } catch {
      continue
    }
    if (req.op === 'run') queue = queue.then(() => run(req)).catch((e) => process.stderr.write(`exec-native driver: ${e?.stack ?? e}\n`))
    // Windows: the interrupt comes as a message (see the top of this file)
    else if (req.op === 'interrupt' && current) current.settle(interruptedOutcome())
  }
})
ctl.on('end', () => process.exit(0))
ctl.on('error', () => process.exit(0))
send({ ev: 'ready', pid: process.pid, version: process.version })
