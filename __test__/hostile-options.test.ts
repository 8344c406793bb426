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
