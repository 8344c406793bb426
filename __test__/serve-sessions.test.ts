import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

import { afterEach, describe, expect, it } from 'vitest'

const SERVE = fileURLToPath(new URL('../bin/serve.mjs', import.meta.url))

type Msg = { id?: number; method?: string; params?: any; result?: any; error?: any }

const children: ChildProcessWithoutNullStreams[] = []
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL')
})

/** `serve` over stdio and a plain JSON-RPC client: every message it got, in order. */
function serve() {
  const child = spawn(process.execPath, [SERVE], { stdio: 'pipe' })
  children.push(child)
  const got: Msg[] = []
  const waiters = new Map<number, (m: Msg) => void>()
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m: Msg = JSON.parse(line)
    got.push(m)
    if (m.id !== undefined && !m.method) waiters.get(m.id)?.(m)
  })
  let next = 1
  const call = (method: string, params: unknown): Promise<Msg> => {
    const id = next++
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n')
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no answer to ${method}`)), 20000)
      waiters.set(id, (m) => {
        clearTimeout(t)
        resolve(m)
      })
    })
  }
  return { child, got, call }
}

describe('serve: session/* methods', () => {
  it('runs a Node session: state, streamed output and displays before the answer, interrupt, close', { timeout: 60000 }, async () => {
    const { got, call } = serve()
    const start = await call('session/start', { kind: 'node', sessionId: 'js' })
    expect(start.result).toEqual({ sessionId: 'js', pid: expect.any(Number) })
    await call('session/execute', { sessionId: 'js', code: 'let x = 20' })
    const r = await call('session/execute', {
      sessionId: 'js',
      code: 'console.log("out"); display.html("<b>x</b>"); const y: number = x + 1; y * 2',
      language: 'typescript',
    })
    expect(r.result.status).toBe('ok')
    expect(r.result.value).toBe('42')
    expect(r.result.stdout).toBe('out\n')
    expect(r.result.displays).toEqual([{ 'text/html': '<b>x</b>' }])
    // the notifications of the execution came before its answer
    const at = got.indexOf(r as Msg)
    const notes = got.slice(0, at).filter((m) => m.method?.startsWith('session/'))
    expect(notes).toContainEqual({ jsonrpc: '2.0', method: 'session/output', params: { sessionId: 'js', stream: 'stdout', data: 'out\n' } })
    expect(notes).toContainEqual({ jsonrpc: '2.0', method: 'session/display', params: { sessionId: 'js', data: { 'text/html': '<b>x</b>' } } })

    const running = call('session/execute', { sessionId: 'js', code: 'while (true) {}' })
    await new Promise((ok) => setTimeout(ok, 300))
    expect((await call('session/interrupt', { sessionId: 'js' })).result).toEqual({ interrupted: true })
    expect((await running).result.status).toBe('interrupted')
    expect((await call('session/execute', { sessionId: 'js', code: 'x' })).result.value).toBe('20')

    expect((await call('session/close', { sessionId: 'js' })).result).toEqual({})
    const gone = await call('session/execute', { sessionId: 'js', code: '1' })
    expect(gone.error.message).toBe("exec: no session 'js' (ESRCH)")
  })

  it('runs Python and shell sessions and checks its parameters', { timeout: 60000 }, async () => {
    const { call } = serve()
    const py = (await call('session/start', { kind: 'python' })).result.sessionId
    const r = await call('session/execute', { sessionId: py, code: 'import sys\nprint("hi")\n6 * 7' })
    expect(r.result).toMatchObject({ status: 'ok', value: '42', stdout: 'hi\n', executionCount: 1 })
    const err = await call('session/execute', { sessionId: py, code: '1/0' })
    expect(err.result.exception.type).toBe('ZeroDivisionError')

    const sh = (await call('session/start', { kind: 'shell', sessionId: 'sh' })).result.sessionId
    await call('session/execute', { sessionId: sh, code: 'cd /tmp && export A=1' })
    const s = await call('session/execute', { sessionId: sh, code: 'echo $A; false' })
    expect(s.result).toMatchObject({ status: 'error', exitCode: 1, stdout: '1\n', cwd: '/tmp' })

    const bad = await call('session/start', { kind: 'ruby' })
    expect(bad.error.code).toBe(-32602)
    expect(bad.error.message).toContain("kind must be 'python', 'node' or 'shell', got 'ruby'")
    const dup = await call('session/start', { kind: 'shell', sessionId: 'sh' })
    expect(dup.error.message).toBe("exec: a session 'sh' exists already (EEXIST)")
    const lang = await call('session/execute', { sessionId: py, code: '1', language: 'cobol' })
    expect(lang.error.message).toContain("language must be 'javascript' or 'typescript', got 'cobol'")
  })
})
