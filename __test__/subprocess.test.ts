import { describe, expect, it } from 'vitest'

import { isRunning, waitGone } from './helpers'

import { spawn } from '../index.js'

describe('spawn (the process handle)', () => {
  it('returns at once with a pid, and exited resolves after every byte', async () => {
    const out: string[] = []
    const p = spawn('sh', ['-c', 'head -c 3000000 /dev/zero | tr "\\0" x; echo; echo done'], {
      onStdout: (d: string) => out.push(d),
    })
    expect(typeof p.pid).toBe('number')
    expect(p.killed).toBe(false)
    expect(p.exitCode).toBeNull()
    expect(p.signalCode).toBeNull()
    expect(p.exited).toBe(p.exited)
    const r = await p.exited
    expect(r.exitCode).toBe(0)
    expect(r.pid).toBe(p.pid)
    const text = out.join('')
    expect(text.length).toBe(3_000_000 + 1 + 5)
    expect(r.stdoutBytes).toBe(text.length)
    expect(p.exitCode).toBe(0)
  })

  it("delivers Buffers with encoding: 'buffer'", async () => {
    const chunks: Buffer[] = []
    const p = spawn('printf', ['\\xff\\xfeab'], { encoding: 'buffer', onStdout: (b: Buffer) => chunks.push(b) })
    await p.exited
    expect(chunks.every((c) => Buffer.isBuffer(c))).toBe(true)
    expect(Buffer.concat(chunks)).toEqual(Buffer.from([0xff, 0xfe, 0x61, 0x62]))
  })

  it('kill() takes the whole tree down, also a grandchild that left the group', async () => {
    const out: string[] = []
    const p = spawn('bash', ['-c', 'sleep 100 & setsid sleep 100 & echo $!; wait'], {
      onStdout: (d: string) => out.push(d),
    })
    while (!out.join('').includes('\n')) await new Promise((r) => setTimeout(r, 10))
    const escaped = Number(out.join('').trim())
    expect(isRunning(escaped)).toBe(true)
    expect(p.kill()).toBe(true)
    expect(p.killed).toBe(true)
    const r = await p.exited
    expect(r.canceled).toBe(true)
    expect(r.signal).toBe('SIGTERM')
    expect(p.signalCode).toBe('SIGTERM')
    expect(await waitGone([escaped])).toEqual([])
    // settled: nothing more to signal
    expect(p.kill()).toBe(false)
  })

  it('kill(signal) delivers other signals as they are', async () => {
    const out: string[] = []
    const p = spawn('bash', ['-c', 'trap "echo got-int; exit 3" INT; echo ready; while :; do sleep 0.05; done'], {
      onStdout: (d: string) => out.push(d),
    })
    while (!out.join('').includes('ready')) await new Promise((r) => setTimeout(r, 10))
    expect(p.kill('SIGINT')).toBe(true)
    const r = await p.exited
    expect(out.join('')).toContain('got-int')
    expect(r.exitCode).toBe(3)
    expect(r.canceled).toBe(false)
  })

  it('SIGKILL ends a process that ignores SIGTERM at once', async () => {
    const out: string[] = []
    const p = spawn('bash', ['-c', 'trap "" TERM; echo ready; while :; do sleep 0.05; done'], {
      onStdout: (d: string) => out.push(d),
      forceKillAfterDelay: 60_000,
    })
    while (!out.join('').includes('ready')) await new Promise((r) => setTimeout(r, 10))
    const t0 = Date.now()
    expect(p.kill('SIGKILL')).toBe(true)
    const r = await p.exited
    expect(r.signal).toBe('SIGKILL')
    expect(Date.now() - t0).toBeLessThan(10_000)
  })

  it('reports a spawn failure the Node way: no throw, onError with a code, exited resolves', async () => {
    const errors: Array<Error & { code?: string }> = []
    const p = spawn('no-such-command-xyz', [], { onError: (e) => errors.push(e) })
    expect(p.pid).toBeUndefined()
    expect(errors).toEqual([]) // asynchronous, as Node's 'error'
    const r = await p.exited
    expect(r.errorCode).toBe('ENOENT')
    expect(r.exitCode).toBe(-1)
    expect(errors).toHaveLength(1)
    expect(errors[0].code).toBe('ENOENT')
    expect(errors[0].message).toMatch(/^exec: .*no-such-command-xyz.* \(ENOENT\)$/)
    expect(p.kill()).toBe(false)

    const bad = spawn('true', [], { cwd: '/nonexistent/dir' })
    expect((await bad.exited).errorCode).toBe('ENOENT')
  })

  it("writes to stdin with stdin: 'pipe', in order, and end() gives EOF", async () => {
    const out: string[] = []
    const p = spawn('cat', [], { stdin: 'pipe', onStdout: (d: string) => out.push(d) })
    expect(p.stdin).not.toBeNull()
    const writes = [p.stdin!.write('a'), p.stdin!.write(Buffer.from('b')), p.stdin!.write(new Uint8Array([99]))]
    for (let i = 0; i < 300; i++) writes.push(p.stdin!.write(`${i},`))
    await Promise.all(writes)
    await p.stdin!.end()
    const r = await p.exited
    expect(r.exitCode).toBe(0)
    expect(out.join('')).toBe('abc' + Array.from({ length: 300 }, (_, i) => `${i},`).join(''))
    await expect(p.stdin!.write('late')).rejects.toMatchObject({ code: 'EPIPE' })
    // without 'pipe', stdin is /dev/null and there is no writer
    const q = spawn('cat', [])
    expect(q.stdin).toBeNull()
    expect((await q.exited).exitCode).toBe(0)
  })

  it('applies the run options: timeout, env, cwd', async () => {
    const out: string[] = []
    const p = spawn('sh', ['-c', 'echo "$FOO $(pwd)"; sleep 10'], {
      env: { FOO: 'bar' },
      cwd: '/tmp',
      timeout: 300,
      onStdout: (d: string) => out.push(d),
    })
    const r = await p.exited
    expect(r.timedOut).toBe(true)
    expect(r.exitCode).toBe(124)
    expect(r.errorCode).toBe('TIMEOUT')
    expect(out.join('')).toBe('bar /tmp\n')
  })

  it('throws a TypeError (EINVAL) for arguments of the wrong type only', () => {
    expect(() => spawn(42 as any)).toThrow(TypeError)
    expect(() => spawn('true', 'x' as any)).toThrow(/args/)
    expect(() => spawn('true', [], { stdin: 'maybe' } as any)).toThrow(/\(EINVAL\)/)
    expect(() => spawn('true', [], { onStdout: 3 } as any)).toThrow(/onStdout must be a function/)
    const p = spawn('sleep', ['5'])
    try {
      expect(() => p.kill('SIGNOPE' as any)).toThrow(/unknown signal/)
    } finally {
      p.kill('SIGKILL')
    }
  })
})
