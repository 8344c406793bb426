// Options objects that fight back (issue 12.13): getters and Proxy traps that
// throw, an AbortSignal whose removeEventListener throws, NUL in an env name,
// a ProcessManager that could never start anything.
import { describe, expect, it } from 'vitest'

import * as a from '../index.js'

const proxy = () =>
  new Proxy({} as any, {
    get(_, k) {
      if (k === 'then') return undefined
      throw new Error(`trap ${String(k)}`)
    },
  })
// argv so that ProcessManager.start reads on to the getter (the others ignore it)
const getter = () => ({
  argv: ['true'],
  get cwd(): string {
    throw new Error('getter')
  },
})

describe('hostile options', () => {
  const pm = new a.ProcessManager()
  const calls: Record<string, (o: any) => Promise<unknown>> = {
    executeAndCapture: (o) => a.executeAndCapture('echo', 'bash', o),
    spawnCall: (o) => a.spawnCall('echo', [], o, () => {}, () => {}),
    captureCall: (o) => a.captureCall('echo', [], o),
    executeStreaming: (o) => a.executeStreaming('echo', 'bash', o, () => {}, () => {}),
    runCommand: (o) => a.runCommand('echo', o),
    'PythonSession.start': (o) => a.PythonSession.start(o),
    'ShellSession.start': (o) => a.ShellSession.start(o),
    'ProcessManager.start': (o) => pm.start(o),
  }
  for (const [name, call] of Object.entries(calls)) {
    for (const [kind, make] of [['a throwing getter', getter], ['a throwing Proxy', proxy]] as const) {
      it(`${name} with ${kind} rejects with EINVAL naming the option (no synchronous throw)`, async () => {
        let p!: Promise<unknown>
        expect(() => {
          p = call(make())
        }).not.toThrow()
        const e: any = await p.then(
          () => null,
          (err) => err,
        )
        expect(e?.code).toBe('EINVAL')
        expect(e.message).toMatch(/^exec: (options|spec)\.\w+ could not be read: it threw Error: (getter|trap \w+) \(EINVAL\)$/)
      })
    }
  }

  it('spawn() (synchronous, like child_process.spawn) throws EINVAL naming the option', () => {
    expect(() => a.spawn('echo', [], getter() as any)).toThrow(/^exec: options\.cwd could not be read: it threw Error: getter \(EINVAL\)$/)
  })

  it('an AbortSignal whose removeEventListener throws does not hold the result', async () => {
    const signal = {
      aborted: false,
      addEventListener() {},
      removeEventListener() {
        throw new Error('boom')
      },
    }
    const r = await Promise.race([
      a.executeAndCapture('echo hi', 'bash', { signal: signal as any }),
      new Promise((resolve) => setTimeout(() => resolve('pending'), 10_000)),
    ])
    expect(r).toMatchObject({ stdout: 'hi\n', exitCode: 0 })
  })

  it('an AbortSignal whose addEventListener throws rejects with EINVAL', async () => {
    const signal = {
      aborted: false,
      addEventListener() {
        throw new Error('nope')
      },
      removeEventListener() {},
    }
    await expect(a.executeAndCapture('echo hi', 'bash', { signal: signal as any })).rejects.toThrow(
      /^exec: options\.signal could not be used: it threw Error: nope \(EINVAL\)$/,
    )
  })

  it('a NUL byte in an env variable name is named as such', async () => {
    await expect(a.executeAndCapture('echo', 'bash', { env: { 'A\0B': 'x' } })).rejects.toThrow(
      'exec: options.env has a variable name with a NUL byte: "A\\0B" (EINVAL)',
    )
  })

  it('new ProcessManager({ maxProcesses: 0 }) is refused', () => {
    expect(() => new a.ProcessManager({ maxProcesses: 0 })).toThrow('exec: config.maxProcesses must be at least 1, got 0 (EINVAL)')
    expect(() => new a.ProcessManager({ maxProcesses: 1 })).not.toThrow()
  })
})

// Options are declared once and read with the path of each value (issue 13):
// a nested value is named where it sits, whatever the entry point.
describe('every wrong value is named by its path', () => {
  const reject = (p: Promise<unknown>, message: string) =>
    expect(p).rejects.toMatchObject({ name: 'TypeError', code: 'EINVAL', message })

  it('a resource limit, under options or spec', async () => {
    await reject(a.executeAndCapture('true', 'bash', { limits: { memoryBytes: 0 } }), 'exec: options.limits.memoryBytes must be at least 1, got 0 (EINVAL)')
    await reject(a.runCommand('true', { limits: { openFiles: -1 } }), 'exec: options.limits.openFiles must not be negative, got -1 (EINVAL)')
    const pm = new a.ProcessManager()
    await reject(pm.start({ argv: ['true'], limits: { cpuSeconds: 0.5 } }), 'exec: spec.limits.cpuSeconds must be at least 1, got 0.5 (EINVAL)')
    await pm.close()
  })

  it('an env value, a list item, a sandbox field', async () => {
    await reject(a.captureCall('true', [], { env: { A: {} as any } }), 'exec: options.env.A must be a string, got an object (EINVAL)')
    await reject(a.spawnCall('true', [], { envDenylist: ['X', 3 as any] }), 'exec: options.envDenylist[1] must be a string, got a number (EINVAL)')
    await reject(
      a.executeAndCapture('true', 'bash', { sandbox: { onUnavailable: 'maybe' as any } }),
      "exec: options.sandbox.onUnavailable must be 'error', 'warn' or 'run-unsandboxed', got 'maybe' (EINVAL)",
    )
  })

  it('a PTY size and a session option', async () => {
    const pm = new a.ProcessManager()
    await reject(pm.start({ argv: ['cat'], io: { type: 'pty', rows: 0, cols: 80 } }), 'exec: spec.io.rows must be an integer from 1 to 65535, got 0 (EINVAL)')
    await reject(pm.start({ argv: ['cat'], io: { type: 'pty', rows: 24 } as any }), 'exec: spec.io.cols is required for a pty (EINVAL)')
    await pm.close()
    await reject(a.ShellSession.start({ startupTimeout: 'soon' as any }), 'exec: options.startupTimeout must be a number, got a string (EINVAL)')
  })

  it('serve checks its manager settings as ProcessManager does', async () => {
    await reject(a.serve({ listen: 'ws://127.0.0.1:0', maxProcesses: 0 }), 'exec: options.maxProcesses must be at least 1, got 0 (EINVAL)')
    expect(() => new a.ProcessManager({ exitedRetentionMs: -5 })).toThrow('exec: config.exitedRetentionMs must not be negative, got -5 (EINVAL)')
  })

  it('a synchronous call throws the same TypeError', () => {
    expect(() => a.spawn('true', [], { callbackIntervalMs: Infinity })).toThrow(
      expect.objectContaining({ name: 'TypeError', code: 'EINVAL', message: 'exec: options.callbackIntervalMs must be finite (EINVAL)' }),
    )
    expect(() => a.truncateTail('x', { maxLines: 1.5 })).toThrow('exec: options.maxLines must be a positive integer, got 1.5 (EINVAL)')
  })
})
