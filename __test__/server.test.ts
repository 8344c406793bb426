import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect as connectTcp, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

import { afterEach, describe, expect, it } from 'vitest'

const SERVE = fileURLToPath(new URL('../bin/serve.mjs', import.meta.url))

const b64 = (s: string) => Buffer.from(s).toString('base64')
const unb64 = (s: string) => Buffer.from(s, 'base64').toString()

type Msg = { id?: number | string | null; method?: string; params?: any; result?: any; error?: any }

/** A plain JSON-RPC client: send objects or raw text, await answers by id. */
class Client {
  notes: Msg[] = []
  private waiters = new Map<unknown, (m: Msg) => void>()
  private early = new Map<unknown, Msg>()
  private noteWaiters: Array<() => void> = []
  private nextId = 1

  constructor(private send: (text: string) => void) {}

  receive(text: string) {
    const m: Msg = JSON.parse(text)
    if ('id' in m && !m.method) {
      const w = this.waiters.get(m.id)
      if (w) {
        this.waiters.delete(m.id)
        w(m)
      } else this.early.set(m.id, m)
    } else {
      this.notes.push(m)
      for (const w of this.noteWaiters.splice(0)) w()
    }
  }

  raw(text: string) {
    this.send(text)
  }

  answer(id: unknown, ms = 15000): Promise<Msg> {
    const got = this.early.get(id)
    if (got) {
      this.early.delete(id)
      return Promise.resolve(got)
    }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no answer to ${String(id)}`)), ms)
      this.waiters.set(id, (m) => {
        clearTimeout(t)
        resolve(m)
      })
    })
  }

  async call(method: string, params?: unknown): Promise<Msg> {
    const id = this.nextId++
    this.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
    return this.answer(id)
  }

  async until(pred: (notes: Msg[]) => boolean, ms = 15000) {
    const deadline = Date.now() + ms
    while (!pred(this.notes)) {
      if (Date.now() > deadline) throw new Error(`notifications: ${JSON.stringify(this.notes.map((n) => n.method))}`)
      await new Promise<void>((r) => {
        this.noteWaiters.push(r)
        setTimeout(r, 100)
      })
    }
  }
}

/**
 * A minimal WebSocket client (RFC 6455: handshake, masked text frames out,
 * unmasked frames in), so the test needs no package and no Node version
 * with a global WebSocket.
 */
class PlainWebSocket {
  onText: (text: string) => void = () => {}
  onClose: (code: number, reason: string) => void = () => {}
  /** Answer pings (a live peer); false plays a peer that vanished. */
  answerPings = true
  private buf = Buffer.alloc(0)
  private constructor(private socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d])
      this.parse()
    })
    // a server the test kills resets the connection: that is the close the
    // test waits for, not an error of the test run
    socket.on('error', () => this.onClose(1006, 'reset'))
  }

  static open(url: string, headers: Record<string, string> = {}): Promise<PlainWebSocket> {
    const u = new URL(url)
    return new Promise((resolve, reject) => {
      const req = request({
        host: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
          ...headers,
        },
      })
      req.on('upgrade', (_res, socket, head) => {
        const ws = new PlainWebSocket(socket)
        if (head.length) socket.emit('data', head)
        resolve(ws)
      })
      req.on('response', (res) => {
        const err = new Error(`no upgrade: HTTP ${res.statusCode}`) as Error & { status?: number }
        err.status = res.statusCode
        res.resume()
        reject(err)
      })
      req.on('error', reject)
      req.end()
    })
  }

  private frame(opcode: number, payload: Buffer) {
    const mask = randomBytes(4)
    const len = payload.length
    const head = len < 126 ? Buffer.from([0x80 | opcode, 0x80 | len]) : Buffer.alloc(len < 65536 ? 4 : 10)
    if (len >= 126 && len < 65536) {
      head[0] = 0x80 | opcode
      head[1] = 0x80 | 126
      head.writeUInt16BE(len, 2)
    } else if (len >= 65536) {
      head[0] = 0x80 | opcode
      head[1] = 0x80 | 127
      head.writeBigUInt64BE(BigInt(len), 2)
    }
    const masked = Buffer.from(payload)
    for (let i = 0; i < masked.length; i++) masked[i] ^= mask[i % 4]
    this.socket.write(Buffer.concat([head, mask, masked]))
  }

  send(text: string) {
    this.frame(0x1, Buffer.from(text))
  }

  close() {
    this.frame(0x8, Buffer.from([0x03, 0xe8]))
    setTimeout(() => this.socket.destroy(), 200)
  }

  private parse() {
    for (;;) {
      if (this.buf.length < 2) return
      const opcode = this.buf[0] & 0x0f
      let len = this.buf[1] & 0x7f
      let off = 2
      if (len === 126) {
        if (this.buf.length < 4) return
        len = this.buf.readUInt16BE(2)
        off = 4
      } else if (len === 127) {
        if (this.buf.length < 10) return
        len = Number(this.buf.readBigUInt64BE(2))
        off = 10
      }
      if (this.buf.length < off + len) return
      const payload = this.buf.subarray(off, off + len)
      this.buf = this.buf.subarray(off + len)
      if (opcode === 0x1) this.onText(payload.toString())
      else if (opcode === 0x9 && this.answerPings) this.frame(0xa, Buffer.from(payload))
      else if (opcode === 0x8) this.onClose(payload.length >= 2 ? payload.readUInt16BE(0) : 1005, payload.subarray(2).toString())
    }
  }
}

const children: ChildProcessWithoutNullStreams[] = []
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

function startServer(args: string[] = [], env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(process.execPath, [SERVE, ...args], { stdio: 'pipe', env })
  children.push(child)
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)))
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  return { child, exited, stderr: () => stderr }
}

function stdioClient() {
  const srv = startServer()
  const client = new Client((text) => srv.child.stdin.write(`${text}\n`))
  createInterface({ input: srv.child.stdout }).on('line', (l) => client.receive(l))
  return { ...srv, client }
}

function alive(pid: number) {
  try {
    process.kill(-pid, 0)
    return true
  } catch {
    return false
  }
}

async function gone(pid: number, ms = 8000) {
  const deadline = Date.now() + ms
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25))
  return !alive(pid)
}

describe('exec-native serve over stdio', () => {
  it('initialize, cat session, notifications in seq order', async () => {
    const { client } = stdioClient()
    const init = await client.call('initialize', { clientInfo: { name: 'test' } })
    expect(init.result).toMatchObject({
      protocolVersion: '1',
      serverInfo: { name: 'exec-native' },
      limits: { retainedOutputBytes: 1048576, maxProcesses: 64, exitedRetentionMs: 30000 },
    })
    const start = await client.call('process/start', {
      processId: 'cat',
      argv: ['cat'],
      io: { type: 'pipe', stdin: 'open' },
    })
    expect(start.result).toEqual({ processId: 'cat', pid: expect.any(Number) })
    expect((await client.call('process/write', { processId: 'cat', data: b64('ping\n') })).result).toEqual({})
    await client.until((n) => n.some((m) => m.method === 'process/output'))
    expect((await client.call('process/closeStdin', { processId: 'cat' })).result).toEqual({})
    const wait = await client.call('process/wait', { processId: 'cat', timeoutMs: 10000 })
    expect(wait.result).toEqual({ running: false, exitCode: 0, signal: null })
    await client.until((n) => n.some((m) => m.method === 'process/closed'))
    const mine = client.notes.filter((n) => n.params.processId === 'cat')
    expect(mine.map((n) => n.method)).toEqual(['process/started', 'process/output', 'process/exited', 'process/closed'])
    expect(mine.map((n) => n.params.seq)).toEqual([1, 2, 3, 4])
    expect(mine[1].params).toMatchObject({ stream: 'stdout' })
    expect(unb64(mine[1].params.data)).toBe('ping\n')
    const snap = await client.call('process/snapshot', { processId: 'cat' })
    expect(unb64(snap.result.stdout)).toBe('ping\n')
    expect(snap.result).toMatchObject({ truncated: false, omittedBytes: 0, exitCode: 0, running: false, nextSeq: 5 })
    const read = await client.call('process/read', { processId: 'cat', afterSeq: 0 })
    expect(read.result).toMatchObject({ lastSeq: 4, closed: true, truncated: false })
    expect(read.result.chunks.map((c: any) => [c.seq, c.stream, unb64(c.data)])).toEqual([[2, 'stdout', 'ping\n']])
    const list = await client.call('process/list')
    expect(list.result.processes).toMatchObject([{ processId: 'cat', argv: ['cat'], pty: false, running: false }])
  })

  it('drives a PTY: write, resize, stty size, terminate', async () => {
    const { client } = stdioClient()
    await client.call('process/start', { processId: 'sh', argv: ['sh'], io: { type: 'pty', rows: 24, cols: 80 } })
    expect((await client.call('process/resize', { processId: 'sh', rows: 33, cols: 99 })).result).toEqual({})
    await client.call('process/write', { processId: 'sh', data: b64('stty size\n') })
    let after = 0
    let text = ''
    const deadline = Date.now() + 15000
    while (!text.includes('33 99') && Date.now() < deadline) {
      const r = await client.call('process/read', { processId: 'sh', afterSeq: after, waitMs: 1000 })
      for (const c of r.result.chunks) text += unb64(c.data)
      after = r.result.lastSeq
    }
    expect(text).toContain('33 99')
    const t = await client.call('process/terminate', { processId: 'sh', mode: 'force' })
    expect(t.result).toEqual({ running: false, exitCode: 137, signal: 'SIGKILL' })
  })

  it('answers malformed input with JSON-RPC errors and keeps serving', async () => {
    const { client, child } = stdioClient()
    client.raw('{not json')
    expect((await client.answer(null)).error).toMatchObject({ code: -32700 })
    client.raw('[1, 2, 3]')
    expect((await client.answer(null)).error).toMatchObject({ code: -32600 })
    client.raw('"just a string"')
    expect((await client.answer(null)).error).toMatchObject({ code: -32600 })
    client.raw(JSON.stringify({ jsonrpc: '2.0', id: 'no-method' }))
    expect((await client.answer('no-method')).error).toMatchObject({ code: -32600 })
    client.raw(Buffer.from([0xff, 0xfe, 0x0a]).toString('latin1'))
    const unknown = await client.call('process/explode', {})
    expect(unknown.error).toMatchObject({ code: -32601 })
    expect((await client.call('process/start')).error).toMatchObject({ code: -32602 })
    expect((await client.call('process/start', { argv: [] })).error).toMatchObject({
      code: -32602,
      data: { errorCode: 'EINVAL' },
    })
    expect((await client.call('process/start', { argv: ['cat'], io: { type: 'tty' } })).error).toMatchObject({ code: -32602 })
    expect((await client.call('process/write', { processId: 'ghost', data: b64('x') })).error).toMatchObject({
      code: -32001,
      data: { errorCode: 'ESRCH' },
      message: expect.stringMatching(/^exec: .*\(ESRCH\)$/),
    })
    expect((await client.call('process/wait', { processId: 'ghost' })).error).toMatchObject({ code: -32001 })
    expect((await client.call('process/start', { argv: ['no-such-program-xyz'] })).error).toMatchObject({
      code: -32005,
      data: { errorCode: 'ENOENT' },
    })
    await client.call('process/start', { processId: 'dup', argv: ['sleep', '5'] })
    expect((await client.call('process/start', { processId: 'dup', argv: ['true'] })).error).toMatchObject({
      code: -32004,
      data: { errorCode: 'EEXIST' },
    })
    expect((await client.call('process/write', { processId: 'dup', data: b64('x') })).error).toMatchObject({
      code: -32003,
      data: { errorCode: 'EPIPE' },
    })
    expect((await client.call('process/resize', { processId: 'dup', rows: 1, cols: 1 })).error).toMatchObject({
      code: -32602,
    })
    // still alive and serving
    expect((await client.call('process/list')).result.processes.length).toBeGreaterThan(0)
    expect(child.exitCode).toBe(null)
  })

  it('closing stdin kills the connection processes and exits', { timeout: 30000 }, async () => {
    const { client, child, exited } = stdioClient()
    const a = await client.call('process/start', { argv: ['sh', '-c', "trap '' TERM; sleep 60"] })
    const b = await client.call('process/start', { argv: ['sleep', '60'], io: { type: 'pty', rows: 5, cols: 20 } })
    expect(alive(a.result.pid)).toBe(true)
    child.stdin.end()
    expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r('hang'), 10000))])).toBe(0)
    expect(await gone(a.result.pid)).toBe(true)
    expect(await gone(b.result.pid)).toBe(true)
  })

  it('--help, bad options and non-loopback --listen fail clearly', async () => {
    const bad = startServer(['--listen', 'ws://0.0.0.0:0'])
    expect(await bad.exited).toBe(2)
    expect(bad.stderr()).toMatch(/not a loopback address.*--allow-remote/)
    const typo = startServer(['--lisen', 'x'])
    expect(await typo.exited).toBe(2)
    expect(typo.stderr()).toContain("unknown option '--lisen'")
  })
})

describe('exec-native serve: limits, env lists, dieWithParent', () => {
  const HOG = 'x = bytearray(400 * 1024 * 1024); import time; time.sleep(20)'

  for (const io of [undefined, { type: 'pty', rows: 24, cols: 80 }]) {
    const kind = io ? 'pty' : 'pipe'
    it(`a tree over its memory limit exits with ELIMIT (${kind})`, { timeout: 30000 }, async () => {
      const { client } = stdioClient()
      const start = await client.call('process/start', {
        processId: 'hog',
        argv: ['python3', '-c', HOG],
        io,
        limits: { memoryBytes: 128 * 1024 * 1024 },
      })
      expect(start.result).toEqual({ processId: 'hog', pid: expect.any(Number) })
      const wait = await client.call('process/wait', { processId: 'hog', timeoutMs: 20000 })
      expect(wait.result).toEqual({
        running: false,
        exitCode: 137,
        signal: 'SIGKILL',
        error: 'exec: memory limit of 128 MiB exceeded (ELIMIT)',
        errorCode: 'ELIMIT',
      })
      await client.until((n) => n.some((m) => m.method === 'process/exited'))
      const exited = client.notes.find((m) => m.method === 'process/exited')!
      expect(exited.params).toMatchObject({ errorCode: 'ELIMIT', error: wait.result.error })
      expect(await gone(start.result.pid)).toBe(true)
    })

    it(`a write past fileSizeBytes is SIGXFSZ with ELIMIT (${kind})`, { timeout: 30000 }, async () => {
      const { client } = stdioClient()
      const dir = mkdtempSync(join(tmpdir(), 'exec-srv-'))
      try {
        await client.call('process/start', {
          processId: 'big',
          argv: ['sh', '-c', `exec head -c 10000000 /dev/zero > ${dir}/big`],
          io,
          limits: { fileSizeBytes: 1024 * 1024 },
        })
        const wait = await client.call('process/wait', { processId: 'big', timeoutMs: 20000 })
        expect(wait.result).toEqual({
          running: false,
          exitCode: 153,
          signal: 'SIGXFSZ',
          error: 'exec: file size limit of 1 MiB exceeded (ELIMIT)',
          errorCode: 'ELIMIT',
        })
        expect(statSync(join(dir, 'big')).size).toBe(1024 * 1024)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }

  it('rejects bad limits and lists with EINVAL, starting nothing', async () => {
    const { client } = stdioClient()
    const bad = async (extra: object) => (await client.call('process/start', { argv: ['true'], ...extra })).error
    expect(await bad({ limits: { memoryBytes: 0 } })).toEqual({
      code: -32602,
      data: { errorCode: 'EINVAL' },
      message: 'exec: invalid params: limits.memoryBytes must be at least 1, got 0 (EINVAL)',
    })
    expect((await bad({ limits: { cpuSeconds: -1 } })).message).toBe(
      'exec: invalid params: limits.cpuSeconds must not be negative, got -1 (EINVAL)',
    )
    expect((await bad({ limits: { maxProcesses: '5' } })).message).toBe(
      'exec: invalid params: limits.maxProcesses must be a number, got a string (EINVAL)',
    )
    expect((await bad({ limits: 5 })).message).toBe('exec: invalid params: limits must be an object, got a number (EINVAL)')
    expect((await bad({ limits: { memoryMB: 5 } })).message).toMatch(/^exec: invalid params: unknown limit `memoryMB`/)
    expect((await bad({ envAllowlist: 'PATH' })).message).toBe(
      'exec: invalid params: envAllowlist must be an array of strings (EINVAL)',
    )
    expect((await bad({ envDenylist: [1] })).message).toBe(
      'exec: invalid params: envDenylist must be an array of strings (EINVAL)',
    )
    expect(await bad({ dieWithParent: 1 })).toMatchObject({ code: -32602, data: { errorCode: 'EINVAL' } })
    expect((await client.call('process/list')).result.processes).toEqual([])
  })

  it('envDenylist and envAllowlist filter the server environment; openFiles applies', async () => {
    const child = spawn(process.execPath, [SERVE], {
      stdio: 'pipe',
      env: { ...process.env, EXEC_SRV_SECRET_TOKEN: 'secret', EXEC_SRV_KEEP: 'kept' },
    })
    children.push(child)
    const client = new Client((text) => child.stdin.write(`${text}\n`))
    createInterface({ input: child.stdout }).on('line', (l) => client.receive(l))
    const script = 'ulimit -n; echo "t=${EXEC_SRV_SECRET_TOKEN-unset} k=${EXEC_SRV_KEEP-unset} h=${HOME-unset} e=$EXTRA"'
    const run = async (processId: string, extra: object) => {
      await client.call('process/start', { processId, argv: ['sh', '-c', script], ...extra })
      await client.call('process/wait', { processId, timeoutMs: 10000 })
      return unb64((await client.call('process/snapshot', { processId })).result.stdout)
    }
    expect(await run('none', {})).toMatch(/t=secret k=kept h=\S+ e=\n$/)
    expect(await run('deny', { envDenylist: ['*_TOKEN'], limits: { openFiles: 77 } })).toMatch(
      /^77\nt=unset k=kept h=(?!unset)\S+ e=\n$/,
    )
    expect(await run('allow', { envAllowlist: ['PATH', 'EXEC_SRV_K*'], env: { EXTRA: 'given' } })).toMatch(
      /t=unset k=kept h=unset e=given\n$/,
    )
  })

  it('a SIGKILLed server leaves nothing: dieWithParent at once, the rest by the guard\'s sweep', { timeout: 30000 }, async () => {
    const { client, child, exited } = stdioClient()
    const on = (await client.call('process/start', { argv: ['sleep', '60'], dieWithParent: true })).result.pid
    const off = (await client.call('process/start', { argv: ['sleep', '60'] })).result.pid
    // a grandchild in a group of its own (setsid), which no group kill reaches
    const daemon = 'daemon'
    await client.call('process/start', { processId: daemon, argv: ['bash', '-c', 'setsid sleep 61 & echo $!; wait'] })
    let escaped = 0
    for (let i = 0; i < 100 && !escaped; i++) {
      const snap = (await client.call('process/snapshot', { processId: daemon })).result
      escaped = Number(/(\d+)/.exec(unb64(snap.stdout ?? ''))?.[1] ?? 0)
      if (!escaped) await new Promise((r) => setTimeout(r, 50))
    }
    expect(escaped).toBeGreaterThan(0)
    // `$!` is echoed at the fork, before `setsid` makes the group that `alive` looks for
    for (let i = 0; i < 100 && !alive(escaped); i++) await new Promise((r) => setTimeout(r, 20))
    expect(alive(on) && alive(off) && alive(escaped)).toBe(true)
    child.kill('SIGKILL')
    await exited
    try {
      expect(await gone(on)).toBe(true)
      expect(await gone(off)).toBe(true)
      expect(await gone(escaped)).toBe(true)
    } finally {
      for (const p of [on, off, escaped]) {
        try {
          process.kill(p, 'SIGKILL')
        } catch {}
      }
    }
  })
})

async function wsServer(args: string[] = [], env: NodeJS.ProcessEnv = process.env) {
  const srv = startServer(['--listen', 'ws://127.0.0.1:0', ...args], env)
  const deadline = Date.now() + 15000
  // the whole line: a port read before its last digits came would be another server's
  while (!/listening on (ws:\/\/\S+)\n/.test(srv.stderr())) {
    if (Date.now() > deadline || srv.child.exitCode !== null) throw new Error(`no listen line: ${srv.stderr()}`)
    await new Promise((r) => setTimeout(r, 25))
  }
  const url = /listening on (ws:\/\/\S+)/.exec(srv.stderr())![1]
  const token = /exec-native: token (\S+)/.exec(srv.stderr())?.[1]
  const tokenFile = /\(also in (\S+);/.exec(srv.stderr())?.[1]
  const auth: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {}
  return { ...srv, url, token, tokenFile, auth }
}

describe('exec-native serve over WebSocket', () => {
  async function connect(url: string, headers: Record<string, string>) {
    const ws = await PlainWebSocket.open(url, headers)
    const client = new Client((text) => ws.send(text))
    ws.onText = (text) => client.receive(text)
    return { ws, client }
  }

  it('serves several connections, each owning its processes', { timeout: 60000 }, async () => {
    const srv = await wsServer()
    expect(srv.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/)
    const one = await connect(srv.url, srv.auth)
    const two = await connect(srv.url, srv.auth)
    const a = await one.client.call('process/start', {
      processId: 'p',
      argv: ['sh', '-c', 'echo from-one; exec sleep 60'],
    })
    const b = await two.client.call('process/start', { processId: 'p', argv: ['sleep', '60'] })
    expect(a.result.processId).toBe('p')
    expect(b.result.processId).toBe('p') // ids are per connection
    await one.client.until((n) => n.some((m) => m.method === 'process/output'))
    expect(unb64(one.client.notes.find((m) => m.method === 'process/output')!.params.data)).toBe('from-one\n')
    one.ws.send('{oops')
    expect((await one.client.answer(null)).error).toMatchObject({ code: -32700 })
    // closing one connection kills its processes only
    one.ws.close()
    expect(await gone(a.result.pid)).toBe(true)
    expect(alive(b.result.pid)).toBe(true)
    expect((await two.client.call('process/list')).result.processes).toMatchObject([{ processId: 'p', running: true }])
    two.ws.close()
    expect(await gone(b.result.pid)).toBe(true)
    // SIGTERM ends the server; nothing is left behind
    const three = await connect(srv.url, srv.auth)
    const c = await three.client.call('process/start', { argv: ['sleep', '60'] })
    srv.child.kill('SIGTERM')
    await srv.exited
    expect(await gone(c.result.pid)).toBe(true)
  })
})

/** Send a raw HTTP upgrade request and return the status line's code (or 'closed'). */
function rawHandshake(url: string, headers: Record<string, string>, path = '/'): Promise<number | 'closed'> {
  const u = new URL(url)
  return new Promise((resolve) => {
    const sock = connectTcp(Number(u.port), u.hostname)
    let got = ''
    sock.on('data', (d) => {
      got += d
      const m = /^HTTP\/1\.1 (\d+)/.exec(got)
      if (m) {
        resolve(Number(m[1]))
        sock.destroy()
      }
    })
    sock.on('close', () => resolve('closed'))
    sock.on('error', () => resolve('closed'))
    const lines = [
      `GET ${path} HTTP/1.1`,
      'Connection: Upgrade',
      'Upgrade: websocket',
      'Sec-WebSocket-Version: 13',
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ]
    sock.write(lines.join('\r\n') + '\r\n\r\n')
  })
}

/** Send `text` as it is and return the status code of the answer (or 'closed' when none came). */
function rawRequest(url: string, text: string): Promise<number | 'closed'> {
  const u = new URL(url)
  return new Promise((resolve) => {
    const sock = connectTcp(Number(u.port), u.hostname)
    let got = ''
    sock.on('data', (d) => {
      got += d
      const m = /^HTTP\/1\.1 (\d+)/.exec(got)
      if (m) {
        resolve(Number(m[1]))
        sock.destroy()
      }
    })
    sock.on('close', () => resolve('closed'))
    sock.on('error', () => resolve('closed'))
    sock.write(text)
  })
}

describe('exec-native serve: the WebSocket listener is closed to web pages and strangers', () => {
  it('answers plain HTTP (426, 401 without the token) and refuses a second Host or an absolute-form target (400)', { timeout: 60000 }, async () => {
    const srv = await wsServer()
    const host = new URL(srv.url).host
    const auth = `Authorization: Bearer ${srv.token}\r\n`
    expect(await rawRequest(srv.url, `GET / HTTP/1.1\r\nHost: ${host}\r\n${auth}\r\n`)).toBe(426)
    expect(await rawRequest(srv.url, `POST / HTTP/1.1\r\nHost: ${host}\r\n${auth}Content-Length: 0\r\n\r\n`)).toBe(426)
    expect(await rawRequest(srv.url, `GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`)).toBe(401)
    expect(await rawRequest(srv.url, `POST /x HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 0\r\n\r\n`)).toBe(401)
    // a WebSocket handshake that would be accepted, but for a second Host or an absolute-form target
    expect(await rawHandshake(srv.url, { Host: host, ...srv.auth })).toBe(101)
    const upgrade = (target: string, hosts: string[]) =>
      [
        `GET ${target} HTTP/1.1`,
        ...hosts.map((h) => `Host: ${h}`),
        'Connection: Upgrade',
        'Upgrade: websocket',
        'Sec-WebSocket-Version: 13',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        `Authorization: Bearer ${srv.token}`,
      ].join('\r\n') + '\r\n\r\n'
    expect(await rawRequest(srv.url, upgrade('/', [host, 'evil.example']))).toBe(400)
    expect(await rawRequest(srv.url, upgrade('/', [host, host]))).toBe(400)
    expect(await rawRequest(srv.url, upgrade('http://evil.example/', [host]))).toBe(400)
    expect(await rawRequest(srv.url, upgrade(`http://${host}/`, [host]))).toBe(400)
    expect(await rawRequest(srv.url, upgrade('/', [host]))).toBe(101)
  })

  it('partial handshakes do not take the connection places (slowloris)', { timeout: 60000 }, async () => {
    const srv = await wsServer(['--max-connections', '2', '--handshake-timeout-ms', '20000'])
    const port = Number(new URL(srv.url).port)
    // more half-sent handshakes than there are connection places, held open
    const slow: Socket[] = []
    for (let i = 0; i < 6; i++) {
      const s = connectTcp(port, '127.0.0.1')
      s.on('error', () => {})
      s.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n')
      slow.push(s)
    }
    await new Promise((r) => setTimeout(r, 300))
    // the connection places are still free
    const a = await PlainWebSocket.open(srv.url, srv.auth)
    const b = await PlainWebSocket.open(srv.url, srv.auth)
    expect(await rawHandshake(srv.url, { Host: new URL(srv.url).host, ...srv.auth })).toBe(503)
    a.close()
    b.close()
    for (const s of slow) s.destroy()
  })

  it('removes the token file it wrote when it ends (SIGTERM, SIGINT)', { timeout: 60000 }, async () => {
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      const srv = await wsServer()
      expect(readFileSync(srv.tokenFile!, 'utf8').trim()).toBe(srv.token)
      srv.child.kill(sig)
      await srv.exited
      expect(existsSync(srv.tokenFile!)).toBe(false)
    }
  })

  it('refuses foreign Origins and Hosts, and requires the token (made, printed, in a 0600 file)', { timeout: 60000 }, async () => {
    const srv = await wsServer(['--allow-origin', 'http://localhost:5173'])
    const host = new URL(srv.url).host
    expect(srv.token).toMatch(/^[0-9a-f]{64}$/)
    expect(readFileSync(srv.tokenFile!, 'utf8').trim()).toBe(srv.token)
    expect(statSync(srv.tokenFile!).mode & 0o777).toBe(0o600)
    const ok = { Host: host, ...srv.auth }
    expect(await rawHandshake(srv.url, ok)).toBe(101)
    // a web page, whatever it claims to be
    for (const origin of ['http://evil.example', 'null', 'file://', 'http://localhost:3000']) {
      expect(await rawHandshake(srv.url, { ...ok, Origin: origin })).toBe(403)
    }
    expect(await rawHandshake(srv.url, { ...ok, Origin: 'http://localhost:5173' })).toBe(101)
    // DNS rebinding: a name that is not this machine's loopback
    expect(await rawHandshake(srv.url, { ...ok, Host: 'attacker.example' })).toBe(403)
    expect(await rawHandshake(srv.url, { ...ok, Host: `localhost:${new URL(srv.url).port}` })).toBe(101)
    // no token, a wrong one, the right one as a query parameter
    expect(await rawHandshake(srv.url, { Host: host })).toBe(401)
    expect(await rawHandshake(srv.url, { Host: host, Authorization: 'Bearer ' + 'f'.repeat(64) })).toBe(401)
    expect(await rawHandshake(srv.url, { Host: host }, `/?token=${srv.token}`)).toBe(101)
  })

  it('takes the token from EXEC_NATIVE_SERVE_TOKEN or --token-file; --no-auth only on loopback', { timeout: 60000 }, async () => {
    const fromEnv = await wsServer([], { ...process.env, EXEC_NATIVE_SERVE_TOKEN: 'a-token-of-the-users-own' })
    expect(fromEnv.token).toBeUndefined() // not printed: the user knows it
    const host = new URL(fromEnv.url).host
    expect(await rawHandshake(fromEnv.url, { Host: host, Authorization: 'Bearer a-token-of-the-users-own' })).toBe(101)
    expect(await rawHandshake(fromEnv.url, { Host: host })).toBe(401)

    const dir = mkdtempSync(join(tmpdir(), 'exec-native-token-'))
    writeFileSync(join(dir, 't'), 'from-a-file-0123456789\n')
    const fromFile = await wsServer(['--token-file', join(dir, 't')])
    expect(await rawHandshake(fromFile.url, { Host: new URL(fromFile.url).host, Authorization: 'Bearer from-a-file-0123456789' })).toBe(101)

    const open = await wsServer(['--no-auth'])
    expect(open.token).toBeUndefined()
    expect(await rawHandshake(open.url, { Host: new URL(open.url).host })).toBe(101)

    const remote = startServer(['--listen', 'ws://0.0.0.0:0', '--allow-remote', '--no-auth'])
    expect(await remote.exited).toBe(2)
    expect(remote.stderr()).toMatch(/noAuth is only allowed on a loopback address.*\(EINVAL\)/)
  })

  it('drops half-open handshakes, caps connections, and terminates the processes of a peer that vanished', { timeout: 60000 }, async () => {
    const srv = await wsServer(['--handshake-timeout-ms', '300', '--max-connections', '2', '--ping-interval-ms', '200'])
    const host = new URL(srv.url).host
    // a TCP connection that never sends its handshake is closed
    const t0 = Date.now()
    const idle = connectTcp(Number(new URL(srv.url).port), '127.0.0.1')
    await new Promise((r) => idle.on('close', r))
    expect(Date.now() - t0).toBeLessThan(5000)
    // two at once; the third is refused
    const a = await PlainWebSocket.open(srv.url, srv.auth)
    const b = await PlainWebSocket.open(srv.url, srv.auth)
    expect(await rawHandshake(srv.url, { Host: host, ...srv.auth })).toBe(503)
    a.close()
    b.close()
    await new Promise((r) => setTimeout(r, 400))
    // a peer that stops answering pings: closed with 1001, its process terminated
    const ws = await PlainWebSocket.open(srv.url, srv.auth)
    const client = new Client((text) => ws.send(text))
    ws.onText = (text) => client.receive(text)
    const closed = new Promise<number>((r) => (ws.onClose = (code) => r(code)))
    const p = await client.call('process/start', { argv: ['sleep', '60'] })
    ws.answerPings = false
    expect(await closed).toBe(1001)
    expect(await gone(p.result.pid)).toBe(true)
  })

  it('answers a message over 64 MiB with -32700 and goes on', { timeout: 60000 }, async () => {
    const srv = await wsServer()
    const ws = await PlainWebSocket.open(srv.url, srv.auth)
    const client = new Client((text) => ws.send(text))
    ws.onText = (text) => client.receive(text)
    ws.send('"' + 'x'.repeat(64 * 1024 * 1024) + '"')
    expect((await client.answer(null, 30000)).error).toMatchObject({ code: -32700 })
    expect((await client.call('process/list')).result.processes).toEqual([])
  })

  it('protocol: integral floats for ms fields, -32602 for array params and long ids, TERM of a PTY', { timeout: 60000 }, async () => {
    const srv = stdioClient()
    const send = (text: string) => srv.child.stdin.write(text + '\n')
    const start = await srv.client.call('process/start', { processId: 'w', argv: ['sleep', '0.2'] })
    expect(start.result.processId).toBe('w')
    send('{"jsonrpc":"2.0","id":"f","method":"process/wait","params":{"processId":"w","timeoutMs":5000.0}}')
    expect((await srv.client.answer('f')).result).toMatchObject({ exitCode: 0 })
    send('{"jsonrpc":"2.0","id":"a","method":"process/list","params":[1,2]}')
    expect((await srv.client.answer('a')).error).toMatchObject({ code: -32602 })
    const long = await srv.client.call('process/start', { processId: 'x'.repeat(1000), argv: ['true'] })
    expect(long.error).toMatchObject({ code: -32602 })
    expect(long.error.message).toMatch(/processId is 1000 bytes long, at most 256/)
    srv.child.kill('SIGKILL')

    const pty = startServer([], { ...process.env, TERM: 'dumb' })
    const c = new Client((text) => pty.child.stdin.write(`${text}\n`))
    createInterface({ input: pty.child.stdout }).on('line', (l) => c.receive(l))
    await c.call('process/start', { processId: 't', argv: ['sh', '-c', 'echo "term=$TERM"'], io: { type: 'pty', rows: 24, cols: 80 } })
    await c.until((n) => n.some((m) => m.method === 'process/closed'))
    const text = c.notes.filter((m) => m.method === 'process/output').map((m) => unb64(m.params.data)).join('')
    expect(text).toContain('term=xterm-256color')
  })

  it('process/closed is the barrier: every output notification comes before it', { timeout: 60000 }, async () => {
    const srv = stdioClient()
    const runs = 20
    for (let i = 0; i < runs; i++) {
      // 64 KiB in many writes, then exit at once: the pumps are still sending when the exit is known
      const r = await srv.client.call('process/start', { processId: `b${i}`, argv: ['sh', '-c', 'i=0; while [ $i -lt 64 ]; do head -c 1024 /dev/zero | tr "\\0" x; i=$((i+1)); done'] })
      expect(r.result.processId).toBe(`b${i}`)
      await srv.client.call('process/wait', { processId: `b${i}`, timeoutMs: 10000 })
    }
    await srv.client.until((n) => n.filter((m) => m.method === 'process/closed').length === runs, 30000)
    for (let i = 0; i < runs; i++) {
      const mine = srv.client.notes.filter((m) => m.params?.processId === `b${i}`)
      const closedAt = mine.findIndex((m) => m.method === 'process/closed')
      const bytes = mine.slice(0, closedAt).filter((m) => m.method === 'process/output').reduce((n, m) => n + Buffer.from(m.params.data, 'base64').length, 0)
      expect(bytes).toBe(65536)
      expect(mine.slice(closedAt + 1).some((m) => m.method === 'process/output')).toBe(false)
    }
    srv.child.kill('SIGKILL')
  })
})
