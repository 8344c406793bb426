import { afterEach, describe, expect, it } from 'vitest'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { NodeSession } from '../index.js'

const open: Array<{ close(): Promise<void> }> = []
async function node(options?: Parameters<typeof NodeSession.start>[0]) {
  const s = await NodeSession.start(options)
  open.push(s)
  return s
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()))
})

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
  } catch {
    return false
  }
  // a killed orphan may stay a zombie until init reaps it
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')
  } catch {
    return process.platform !== 'linux'
  }
}

describe('NodeSession: state across cells', () => {
  it('keeps let/const/class/function and lets a later cell declare them again', async () => {
    const s = await node()
    expect((await s.execute('let x = 1; const y = 2; class C { v() { return 3 } }; function f() { return 4 }')).status).toBe('ok')
    const r = await s.execute('x + y + new C().v() + f()')
    expect(r.status).toBe('ok')
    expect(r.value).toBe('10')
    expect(r.executionCount).toBe(2)
    const again = await s.execute('let x = 10; const y = 20; class C {}; x + y')
    expect(again.status).toBe('ok')
    expect(again.value).toBe('30')
    // a statement has no value; undefined is null
    expect((await s.execute('let z = 5')).value).toBeNull()
    expect((await s.execute('({ a: 1, b: [2] })')).value).toBe('{ a: 1, b: [ 2 ] }')
    expect((await s.execute('{ a: 1 }')).value).toBe('{ a: 1 }')
  })

  it('supports top-level await and keeps what it assigned', async () => {
    const s = await node()
    const r = await s.execute('const r = await new Promise((ok) => setTimeout(() => ok(21), 20)); r')
    expect(r.value).toBe('21')
    expect((await s.execute('r * 2')).value).toBe('42')
    // a promise as the last value is awaited
    expect((await s.execute('Promise.resolve("done")')).value).toBe("'done'")
  })

  it('rewrites static imports: node builtins, packages in <cwd>/node_modules, local modules', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-node-'))
    mkdirSync(join(dir, 'node_modules', 'esm-only'), { recursive: true })
    writeFileSync(
      join(dir, 'node_modules', 'esm-only', 'package.json'),
      JSON.stringify({ name: 'esm-only', type: 'module', exports: './index.js' }),
    )
    writeFileSync(join(dir, 'node_modules', 'esm-only', 'index.js'), 'export default "esm!"; export const n = 7')
    mkdirSync(join(dir, 'node_modules', 'cjs-pkg'), { recursive: true })
    writeFileSync(join(dir, 'node_modules', 'cjs-pkg', 'index.js'), 'module.exports = { hi: () => "cjs!" }')
    writeFileSync(join(dir, 'local.mjs'), 'export const a = 40; export function add(x) { return a + x }')
    const s = await node({ cwd: dir })
    const r = await s.execute(
      [
        "import { readFileSync } from 'node:fs'",
        "import * as path from 'node:path'",
        "import esm, { n } from 'esm-only'",
        "import { a, add } from './local.mjs'",
        'const cjs = require("cjs-pkg");',
        '[typeof readFileSync, path.basename("/x/y"), esm, n, add(2), cjs.hi()].join(",")',
      ].join('\n'),
    )
    expect(r.error).toBeNull()
    expect(r.value).toBe("'function,y,esm!,7,42,cjs!'")
    // the imported names stay for later cells, and dynamic import() works too
    expect((await s.execute('a + n')).value).toBe('47')
    expect((await s.execute('(await import("./local.mjs")).a')).value).toBe('40')
  })
})

describe('NodeSession: errors', () => {
  it('reports a thrown error with the cell positions, not the driver frames', async () => {
    const s = await node()
    await s.execute('function boom() {\n  throw new TypeError("bad " + 1)\n}')
    const r = await s.execute('let k = 1\nboom()')
    expect(r.status).toBe('error')
    expect(r.error?.name).toBe('TypeError')
    expect(r.error?.message).toBe('bad 1')
    expect(r.error?.stack).toContain('at boom (<cell 1>:2:9)')
    expect(r.error?.stack).toContain('at <cell 2>:2:1')
    expect(r.error?.stack).not.toMatch(/driver|\[eval|node:inspector/)
    expect(r.stderr).toContain('TypeError: bad 1')
    const syntax = await s.execute('let q = ;')
    expect(syntax.status).toBe('error')
    expect(syntax.error?.name).toBe('SyntaxError')
    expect(syntax.error?.stack).toContain('<cell 3>:1:')
    // the session goes on
    expect((await s.execute('k')).value).toBe('1')
  })

  it('process.exit() in a cell ends in died, and the next cell runs in a new node', async () => {
    const s = await node()
    await s.execute('globalThis.kept = 1')
    const pid = s.pid
    const r = await s.execute('console.log("bye"); process.exit(3)')
    expect(r.status).toBe('died')
    expect(r.exitCode).toBe(3)
    expect(r.stateLost).toBe(true)
    expect(r.stdout).toBe('bye\n')
    const next = await s.execute('typeof kept')
    expect(next.status).toBe('ok')
    expect(next.restarted).toBe(true)
    expect(next.value).toBe("'undefined'")
    expect(s.pid).not.toBe(pid)
  })

  it('an uncaught exception in a timer ends in died and a restart, never a lost cell', async () => {
    const s = await node()
    // during the cell
    const during = await s.execute('setTimeout(() => { throw new Error("late") }, 10); await new Promise((r) => setTimeout(r, 500)); 1')
    expect(during.status).toBe('died')
    expect(during.stderr).toContain('Error: late')
    // between cells
    expect((await s.execute('setTimeout(() => { throw new Error("later") }, 10); 2')).value).toBe('2')
    await new Promise((r) => setTimeout(r, 300))
    const next = await s.execute('3')
    expect(next.status).toBe('ok')
    expect(next.value).toBe('3')
    expect(next.restarted).toBe(true)
    expect(next.stateLost).toBe(true)
  })

  it('text that looks like protocol messages on stdout is output, nothing else', async () => {
    const s = await node()
    const fake = '{"ev":"done","id":1,"count":9,"status":"ok","value":"fake"}\n{"ev":"display","id":1,"data":{"text/html":"x"}}\n'
    const r = await s.execute(`process.stdout.write(${JSON.stringify(fake)}); await new Promise((r) => setTimeout(r, 100)); "real"`)
    expect(r.status).toBe('ok')
    expect(r.value).toBe("'real'")
    expect(r.stdout).toBe(fake)
    expect(r.displays).toEqual([])
  })

  it('keeps the control channel from child processes: inherited stdin is /dev/null', async () => {
    const s = await node()
    const r = await s.execute(
      'const cp = require("node:child_process")\n' +
        'cp.execSync("readlink /proc/self/fd/0", { stdio: ["inherit", "inherit", "inherit"] })\n' +
        'await new Promise((ok) => cp.spawn("sh", ["-c", "readlink /proc/self/fd/0; cat"], { stdio: "inherit" }).on("exit", ok))\n' +
        'process.stdin.constructor.name',
    )
    expect(r.status).toBe('ok')
    expect(r.stdout).toBe('/dev/null\n/dev/null\n')
    expect(r.value).toBe("'ReadStream'")
  })
})

describe('NodeSession: the node it runs on', () => {
  it('rejects a node older than 20.17 with ENOTSUP, also one that refuses the driver flags', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-node-old-'))
    // a real node that reports 20.11.1 (what the driver reads)
    const fake = join(dir, 'v20-11.cjs')
    writeFileSync(fake, "Object.defineProperty(process, 'version', { value: 'v20.11.1' })\nObject.defineProperty(process.versions, 'node', { value: '20.11.1', enumerable: true })\n")
    await expect(NodeSession.start({ env: { NODE_OPTIONS: `--require ${fake}` } })).rejects.toMatchObject({
      code: 'ENOTSUP',
      message: 'exec: NodeSession needs Node 20.17 or later; node is v20.11.1 (ENOTSUP)',
    })
    // Node 18 stops at --disable-warning before any JavaScript runs, as this one does
    const node18 = join(dir, 'node18')
    writeFileSync(node18, '#!/bin/sh\nif [ "$1" = --version ]; then echo v18.19.0; exit 0; fi\necho "$0: bad option: --disable-warning=ExperimentalWarning" >&2\nexit 9\n', { mode: 0o755 })
    await expect(NodeSession.start({ nodePath: node18 })).rejects.toMatchObject({
      code: 'ENOTSUP',
      message: `exec: NodeSession needs Node 20.17 or later; ${node18} is v18.19.0 (ENOTSUP)`,
    })
    // a node that fails to start for another reason keeps its own error
    const broken = join(dir, 'broken')
    writeFileSync(broken, '#!/bin/sh\nif [ "$1" = --version ]; then echo v22.1.0; exit 0; fi\necho "no driver today" >&2\nexit 3\n', { mode: 0o755 })
    await expect(NodeSession.start({ nodePath: broken })).rejects.toMatchObject({ code: 'ESPAWN', message: expect.stringContaining('no driver today') })
  })
})

describe('NodeSession: result fields shared with PythonSession', () => {
  it("has the cell error as exception { type, message, traceback } and exec's own as errorMessage, as PythonSession does", async () => {
    const { PythonSession } = await import('../index.js')
    const js = await node()
    const py = await PythonSession.start()
    open.push(py)
    const [a, b] = [await js.execute('null.x'), await py.execute('None.x')]
    for (const r of [a, b]) {
      expect(r.status).toBe('error')
      expect(r.exception).toMatchObject({ type: expect.any(String), message: expect.any(String), traceback: expect.stringContaining('<cell 1>') })
      expect(r.errorMessage).toBeUndefined()
      expect(r.errorCode).toBeUndefined()
    }
    expect(a.exception?.type).toBe('TypeError')
    expect(b.exception?.type).toBe('AttributeError')
    // issue 27's shape stays: error is { name, message, stack } for Node
    expect(a.error).toEqual({ name: a.exception?.type, message: a.exception?.message, stack: a.exception?.traceback })
    const [c, d] = [await js.execute('while (true) {}', { timeout: 300 }), await py.execute('while True: pass', { timeout: 300 })]
    for (const r of [c, d]) {
      expect(r.status).toBe('timeout')
      expect(r.errorCode).toBe('TIMEOUT')
      expect(r.errorMessage).toMatch(/^exec: .* cell timeout after 0\.3s; .*\(TIMEOUT\)$/)
    }
    expect(d.error).toBe(d.errorMessage)
  })
})

describe('NodeSession: TypeScript', () => {
  it('strips types, uses types declared in earlier cells, transforms enums', async () => {
    const s = await node()
    const ts = { language: 'typescript' as const }
    expect((await s.execute('interface Point { x: number; y: number }\ntype Id = string\nenum Color { Red, Green = 5 }', ts)).status).toBe('ok')
    const r = await s.execute(
      'const p: Point = { x: 1, y: 2 }\nconst id: Id = "a"\nfunction norm<T extends Point>(q: T): number { return q.x + q.y }\nnorm(p) + Color.Green',
      ts,
    )
    expect(r.error).toBeNull()
    expect(r.value).toBe('8')
    const bad = await s.execute('let x: = 1', ts)
    expect(bad.status).toBe('error')
    expect(bad.error?.name).toBe('SyntaxError')
    expect(bad.executionCount).toBe(3)
    // the error is the cell's; the session goes on
    expect((await s.execute('p.x as number', ts)).value).toBe('1')
    const thrown = await s.execute('const n: number = 1\nthrow new RangeError("r" + n)', ts)
    expect(thrown.error?.stack).toContain('<cell 5>:2:7')
  })

  it('rejects a bad language option with a TypeError', async () => {
    const s = await node()
    await expect(s.execute('1', { language: 'coffee' as never })).rejects.toThrow(
      "exec: options.language must be 'javascript' or 'typescript', got 'coffee' (EINVAL)",
    )
  })
})

describe('NodeSession: interrupt and timeout', () => {
  it('interrupts synchronous code with the state kept', async () => {
    const s = await node()
    const pid = s.pid
    const run = s.execute('let n = 2; while (true) {}')
    await new Promise((r) => setTimeout(r, 300))
    expect(s.interrupt()).toBe(true)
    const r = await run
    expect(r.status).toBe('interrupted')
    expect(r.stateLost).toBe(false)
    const next = await s.execute('n + 1')
    expect(next.value).toBe('3')
    expect(s.pid).toBe(pid)
  })

  it('abandons a pending top-level await with the state kept', async () => {
    const s = await node()
    await s.execute('const keep = 7')
    const run = s.execute('await new Promise(() => {})')
    await new Promise((r) => setTimeout(r, 300))
    s.interrupt()
    const r = await run
    expect(r.status).toBe('interrupted')
    expect(r.stateLost).toBe(false)
    expect((await s.execute('keep')).value).toBe('7')
  })

  it('kills and restarts when code after an await ignores the interrupt', async () => {
    const s = await node({ forceKillAfterDelay: 300 })
    await s.execute('const gone = 1')
    const run = s.execute('await new Promise((r) => setTimeout(r, 50)); while (true) {}')
    await new Promise((r) => setTimeout(r, 300))
    s.interrupt()
    const r = await run
    expect(r.status).toBe('interrupted')
    expect(r.stateLost).toBe(true)
    expect(r.errorCode).toBe('ECANCELED')
    const next = await s.execute('typeof gone')
    expect(next.restarted).toBe(true)
    expect(next.value).toBe("'undefined'")
  })

  it('a timeout interrupts sync code (state kept) and kills stuck async code', async () => {
    const s = await node({ forceKillAfterDelay: 300 })
    await s.execute('const t = 1')
    const sync = await s.execute('while (true) {}', { timeout: 300 })
    expect(sync.status).toBe('timeout')
    expect(sync.stateLost).toBe(false)
    expect((await s.execute('t')).value).toBe('1')
    const stuck = await s.execute('await null; while (true) {}', { timeout: 300 })
    expect(stuck.status).toBe('timeout')
    expect(stuck.stateLost).toBe(true)
    expect(stuck.errorCode).toBe('TIMEOUT')
  })

  it('runs initCode after every start; reset() gives a fresh node; a throwing initCode rejects', async () => {
    const s = await node({ initCode: 'globalThis.boot = (globalThis.boot ?? 0) + 1; const fromInit = 5' })
    expect((await s.execute('fromInit + boot')).value).toBe('6')
    await s.execute('const mine = 1')
    const pid = s.pid
    await s.reset()
    expect(s.pid).not.toBe(pid)
    expect((await s.execute('typeof mine')).value).toBe("'undefined'")
    expect((await s.execute('boot')).value).toBe('1')
    await expect(NodeSession.start({ initCode: 'throw new Error("no init")' })).rejects.toMatchObject({
      code: 'EINVAL',
      message: 'exec: initCode failed: Error: no init (EINVAL)',
    })
  })

  it('close() ends node and what it started', async () => {
    const s = await node()
    const r = await s.execute('require("node:child_process").spawn("sleep", ["60"]).pid')
    const child = Number(r.value)
    const pid = s.pid
    await s.close()
    expect(s.closed).toBe(true)
    expect(alive(pid)).toBe(false)
    expect(alive(child)).toBe(false)
    await expect(s.execute('1')).rejects.toMatchObject({ code: 'ECANCELED' })
  })
})

describe('NodeSession: display', () => {
  it('display() and its helpers give MIME bundles as they happen, base64 for binary', async () => {
    const s = await node()
    const seen: Array<Record<string, unknown>> = []
    const png = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]
    const r = await s.execute(
      [
        'display.html("<b>bold</b>")',
        'display.markdown("# title")',
        'display.svg("<svg></svg>")',
        'display.json({ a: [1, 2] })',
        `display.png(Buffer.from(${JSON.stringify(png)}))`,
        'display({ [Symbol.for("Jupyter.display")]() { return { "text/html": "<i>custom</i>" } } })',
        'display([1, 2])',
        '"end"',
      ].join('\n'),
      { onDisplay: (b) => seen.push(b) },
    )
    expect(r.status).toBe('ok')
    expect(r.displays).toEqual([
      { 'text/html': '<b>bold</b>' },
      { 'text/markdown': '# title' },
      { 'image/svg+xml': '<svg></svg>' },
      { 'application/json': { a: [1, 2] }, 'text/plain': '{ a: [ 1, 2 ] }' },
      { 'image/png': Buffer.from(png).toString('base64') },
      { 'text/html': '<i>custom</i>', 'text/plain': '{ [Symbol(Jupyter.display)]: [Function: [Jupyter.display]] }' },
      { 'text/plain': '[ 1, 2 ]' },
    ])
    await new Promise((ok) => setTimeout(ok, 50))
    expect(seen).toEqual(r.displays)
  })

  it('the last value with the display protocol, or PNG/JPEG bytes, has a bundle', async () => {
    const s = await node()
    const custom = await s.execute('({ [Symbol.for("Jupyter.display")]() { return { "text/html": "<p>hi</p>" } } })')
    expect(custom.valueData).toEqual({ 'text/html': '<p>hi</p>' })
    expect(custom.value).toContain('Symbol(Jupyter.display)')
    const jpeg = await s.execute('Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 1])')
    expect(jpeg.valueData).toEqual({ 'image/jpeg': Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 1]).toString('base64'), 'text/plain': '<JPEG image, 6 bytes>' })
    expect((await s.execute('[1]')).valueData).toBeNull()
  })

  it('caps a bundle with a clear marker', async () => {
    const s = await node()
    const r = await s.execute('display({ "text/plain": "big", "image/png": "A".repeat(5000) }, { raw: true })', { maxDisplayBytes: 1000 })
    expect(r.displays[0]['image/png']).toBeUndefined()
    expect(r.displays[0]['text/plain']).toBe('big\n[exec-native: image/png (5000 bytes) omitted, over the display cap of 1000 bytes]')
  })
})

describe('NodeSession: sandbox and limits (the engine of the other sessions)', () => {
  it('runs under a network-off sandbox: the channel works, writes outside the roots and sockets fail', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-node-sb-'))
    const s = await node({ cwd: dir, sandbox: { mode: 'workspace-write', network: false } })
    const denied = await s.execute('require("node:fs").writeFileSync("/etc/exec-native-node-probe", "x")')
    expect(denied.status).toBe('error')
    expect(denied.error?.message).toMatch(/EROFS|EACCES|EPERM/)
    expect((await s.execute('require("node:fs").writeFileSync("ok.txt", "x"); require("node:fs").readFileSync("ok.txt", "utf8")')).value).toBe("'x'")
    const net = await s.execute(
      'await new Promise((ok) => require("node:net").connect(9, "127.0.0.1").on("error", (e) => ok(e.code)).on("connect", () => ok("connected")))',
    )
    expect(net.value).not.toBe("'connected'")
    expect(net.value).toMatch(/EPERM|EACCES/)
  })

  it('a memory limit stops a cell that allocates without end: died, ELIMIT, and a restart', async () => {
    const s = await node({ limits: { memoryBytes: 400 * 2 ** 20 } })
    const r = await s.execute('const a = []; while (true) a.push(new Array(1e6).fill(1))', { timeout: 30000 })
    expect(r.status).toBe('died')
    expect(r.errorCode).toBe('ELIMIT')
    const next = await s.execute('1')
    expect(next.restarted).toBe(true)
    expect(next.value).toBe('1')
  }, 60000)
})
