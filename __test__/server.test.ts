import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { request } from 'node:http'
import type { Socket } from 'node:net'
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
  private buf = Buffer.alloc(0)
  private constructor(private socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buf = Buffer.concat([this.buf, d])
      this.parse()
    })
  }

  static open(url: string): Promise<PlainWebSocket> {
    const u = new URL(url)
    return new Promise((resolve, reject) => {
      const req = request({
        host: u.hostname,
        port: u.port,
        path: '/',
        headers: {
          Connection: 'Upgrade',
          Upgrade: 'websocket',
          'Sec-WebSocket-Version': '13',
          'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
        },
      })
      req.on('upgrade', (_res, socket, head) => {
        const ws = new PlainWebSocket(socket)
        if (head.length) socket.emit('data', head)
        resolve(ws)
      })
      req.on('response', (res) => reject(new Error(`no upgrade: HTTP ${res.statusCode}`)))
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
      else if (opcode === 0x9) this.frame(0xa, Buffer.from(payload))
    }
  }
}

const children: ChildProcessWithoutNullStreams[] = []
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

function startServer(args: string[] = []) {
  const child = spawn(process.execPath, [SERVE, ...args], { stdio: 'pipe' })
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

  it('dieWithParent: the process dies with a SIGKILLed server, without it it stays', { timeout: 30000 }, async () => {
    const { client, child, exited } = stdioClient()
    const on = (await client.call('process/start', { argv: ['sleep', '60'], dieWithParent: true })).result.pid
    const off = (await client.call('process/start', { argv: ['sleep', '60'] })).result.pid
    expect(alive(on) && alive(off)).toBe(true)
    child.kill('SIGKILL')
    await exited
    try {
      expect(await gone(on)).toBe(true)
      await new Promise((r) => setTimeout(r, 300))
      expect(alive(off)).toBe(true)
    } finally {
      process.kill(-off, 'SIGKILL')
    }
  })
})

describe('exec-native serve over WebSocket', () => {
  async function wsServer() {
    const srv = startServer(['--listen', 'ws://127.0.0.1:0'])
    const deadline = Date.now() + 15000
    while (!/listening on (ws:\/\/\S+)/.test(srv.stderr())) {
      if (Date.now() > deadline || srv.child.exitCode !== null) throw new Error(`no listen line: ${srv.stderr()}`)
      await new Promise((r) => setTimeout(r, 25))
    }
    const url = /listening on (ws:\/\/\S+)/.exec(srv.stderr())![1]
    return { ...srv, url }
  }

  async function connect(url: string) {
    const ws = await PlainWebSocket.open(url)
    const client = new Client((text) => ws.send(text))
    ws.onText = (text) => client.receive(text)
    return { ws, client }
  }

  it('serves several connections, each owning its processes', { timeout: 60000 }, async () => {
    const srv = await wsServer()
    expect(srv.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/)
    const one = await connect(srv.url)
    const two = await connect(srv.url)
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
    const three = await connect(srv.url)
    const c = await three.client.call('process/start', { argv: ['sleep', '60'] })
    srv.child.kill('SIGTERM')
    await srv.exited
    expect(await gone(c.result.pid)).toBe(true)
  })
})
