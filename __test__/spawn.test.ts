import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { waitGone } from './helpers'

import { captureCall, executeStreaming, spawn as spawnHandle, spawnCall } from '../index.js'

const addon = join(__dirname, '..', 'index.js')

describe('spawnCall', () => {
  it('streams both streams in order and resolves after every byte', async () => {
    const out: string[] = []
    const err: string[] = []
    const r = await spawnCall(
      'sh',
      ['-c', 'for i in $(seq 1 200); do echo "o$i"; echo "e$i" >&2; done'],
      {},
      (d) => out.push(d),
      (d) => err.push(d),
    )
    expect(r.exitCode).toBe(0)
    expect(r.signal).toBeNull()
    const lines = (s: string[]) => s.join('').trimEnd().split('\n')
    expect(lines(out)).toEqual(Array.from({ length: 200 }, (_, i) => `o${i + 1}`))
    expect(lines(err)).toEqual(Array.from({ length: 200 }, (_, i) => `e${i + 1}`))
  })

  it('delivers output as it happens, not at the end', async () => {
    const t0 = Date.now()
    const times: number[] = []
    await spawnCall('sh', ['-c', 'echo first; sleep 1; echo second'], {}, () => times.push(Date.now() - t0))
    expect(times.length).toBe(2)
    expect(times[0]).toBeLessThan(800)
    expect(times[1]).toBeGreaterThanOrEqual(900)
  })

  it('never splits a multi-byte character between calls', async () => {
    // python writes one byte at a time, unbuffered: every character is split across writes
    const text = 'aé€😀'.repeat(300)
    const got: string[] = []
    const r = await spawnCall(
      'python3',
      ['-u', '-c', 'import sys,os\nb=sys.argv[1].encode()\nfor i in range(len(b)): os.write(1, b[i:i+1])', text],
      { callbackIntervalMs: 0 },
      (d) => got.push(d),
    )
    expect(r.exitCode).toBe(0)
    expect(got.join('')).toBe(text)
    for (const piece of got) expect(piece).not.toContain('\uFFFD')
  })

  it('coalesces tiny writes into few callback calls', async () => {
    let calls = 0
    let bytes = 0
    const r = await spawnCall('python3', ['-u', '-c', 'import os\nfor i in range(20000): os.write(1, b"x")'], {}, (d) => {
      calls++
      bytes += d.length
    })
    expect(r.stdoutBytes).toBe(20000)
    expect(bytes).toBe(20000)
    // 20000 writes; with a 10 ms interval calls are bounded by the run time
    expect(calls).toBeLessThan(Math.max(50, (r.executionTime / 10) * 2 + 10))
  })

  it('delivers every byte of a large stream', async () => {
    let bytes = 0
    const r = await spawnCall('head', ['-c', String(64 * 1024 * 1024), '/dev/zero'], {}, (d) => {
      bytes += d.length
    })
    expect(r.stdoutBytes).toBe(64 * 1024 * 1024)
    expect(bytes).toBe(64 * 1024 * 1024)
  })

  it('cuts big output into chunks of at most 64 KiB of whole characters, intact, ASCII and not', async () => {
    // a flood: every call but the coalesced ones carries a full 64 KiB chunk (Latin-1 for ASCII, UTF-16 for the rest)
    for (const unit of ['abc\n', 'aé€😀\n']) {
      const reps = 200_000
      const got: string[] = []
      const r = await spawnCall(
        'python3',
        ['-c', `import sys\nsys.stdout.write(${JSON.stringify(unit)} * ${reps})`],
        { callbackIntervalMs: 50 },
        (d) => got.push(d),
      )
      expect(r.exitCode).toBe(0)
      const all = got.join('')
      expect(all.length).toBe(unit.length * reps)
      expect(all === unit.repeat(reps)).toBe(true)
      const sizes = got.map((g) => Buffer.byteLength(g))
      expect(Math.max(...sizes)).toBeLessThanOrEqual(64 * 1024)
      // a partial chunk (a full one may end up to 3 bytes short: characters are not split) goes only
      // when the interval is over since the last call, and at the end
      const partial = sizes.filter((n) => n < 64 * 1024 - 3).length
      expect(partial).toBeLessThanOrEqual(Math.ceil(r.executionTime / 50) + 2)
      for (const piece of got) expect(piece).not.toContain('\uFFFD')
    }
  })

  it("delivers Buffers (encoding: 'buffer') in chunks of at most 64 KiB, every byte in order", async () => {
    const chunks: Buffer[] = []
    // bytes that are not UTF-8 (0x80-0xff), 8 MiB
    const r = await spawnCall(
      'python3',
      ['-c', 'import sys\nb=bytes(range(256))*4096\nfor i in range(8): sys.stdout.buffer.write(b)'],
      { encoding: 'buffer' },
      (b) => chunks.push(b),
    )
    expect(r.exitCode).toBe(0)
    expect(chunks.every((c) => Buffer.isBuffer(c) && c.length <= 64 * 1024)).toBe(true)
    const all = Buffer.concat(chunks)
    const one = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
    expect(all.length).toBe(8 * 1024 * 1024)
    expect(all.equals(Buffer.concat(Array.from({ length: 8 * 4096 }, () => one)))).toBe(true)
  })

  it('stops reading while the callback falls behind (the child waits on the pipe)', async () => {
    // JavaScript blocks 1 s in the first call: without backpressure the pump would read the
    // whole 256 MiB meanwhile (head writes 1-3 GB/s here) and head would be gone
    let calls = 0
    let bytes = 0
    let stateAfterBlock = ''
    const { spawn: spawnHandle } = await import('../index.js')
    const p = spawnHandle('head', ['-c', String(256 * 2 ** 20), '/dev/zero'], {
      onStdout: (d: string) => {
        bytes += d.length
        if (calls++ === 0) {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000)
          try {
            stateAfterBlock = readFileSync(`/proc/${p.pid}/stat`, 'utf8').split(') ')[1][0]
          } catch {
            stateAfterBlock = 'gone'
          }
        }
      },
    })
    const r = await p.exited
    expect(r.exitCode).toBe(0)
    expect(bytes).toBe(256 * 2 ** 20)
    // still there, not a zombie: blocked writing to the full pipe
    expect(stateAfterBlock).toMatch(/^[SR]$/)
  })

  it('a callback that throws on every call still gets every byte of a flood', async () => {
    let bytes = 0
    const r = await spawnCall('head', ['-c', String(16 * 2 ** 20), '/dev/zero'], {}, (d) => {
      bytes += d.length
      throw new Error('callback boom')
    })
    expect(r.exitCode).toBe(0)
    expect(bytes).toBe(16 * 2 ** 20)
  })

  it('streaming 512 MiB keeps the host RSS bounded', () => {
    // in a fresh host: before the fix every chunk stayed alive, +512 MiB
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)})
      const base = process.memoryUsage().rss
      let peak = base, got = 0
      spawnCall('head', ['-c', String(512 * 2 ** 20), '/dev/zero'], {}, (s) => {
        got += s.length
        peak = Math.max(peak, process.memoryUsage().rss)
      }).then(() => console.log(JSON.stringify({ got, growth: peak - base })))
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 })
    expect(r.status, r.stderr).toBe(0)
    const { got, growth } = JSON.parse(r.stdout)
    expect(got).toBe(512 * 2 ** 20)
    // 64 KiB chunks copied into the young generation die in scavenges: measured +10 MiB (was +128 MiB with 4 MiB external strings)
    expect(growth).toBeLessThan(32 * 2 ** 20)
  })

  it('a callback that throws does not crash the host or lose the result', async () => {
    let calls = 0
    const r = await spawnCall('sh', ['-c', 'echo a; sleep 0.1; echo b'], {}, () => {
      calls++
      throw new Error('callback boom')
    })
    expect(r.exitCode).toBe(0)
    expect(calls).toBe(2)
  })

  it('missing command resolves with ENOENT', async () => {
    const r = await spawnCall('no-such-command-xyz', [], {}, () => {}, () => {})
    expect(r).toMatchObject({ exitCode: -1, errorCode: 'ENOENT', error: 'exec: no-such-command-xyz not found in PATH (ENOENT)' })
  })

  // issue 28: a program given by its path and the working directory are
  // checked only when the spawn fails; the error is the one the checks made
  // before the spawn (same code, same message) on each of the three calls
  it('a failed spawn of a path says what the checks before it said', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-explain-'))
    const plain = join(dir, 'plain.txt')
    writeFileSync(plain, 'x')
    chmodSync(plain, 0o644)
    const cases: [string, string | undefined, string, string][] = [
      ['/bin/true', join(dir, 'nope'), 'ENOENT', `exec: Working directory does not exist '${join(dir, 'nope')}' (ENOENT)`],
      ['/bin/true', plain, 'ENOTDIR', `exec: Working directory is not a directory '${plain}' (ENOTDIR)`],
      ['./missing', dir, 'ENOENT', 'exec: ./missing does not exist (ENOENT)'],
      [dir, undefined, 'EACCES', `exec: ${dir} is not a file (EACCES)`],
      ['./plain.txt', dir, 'EACCES', 'exec: ./plain.txt is not executable (EACCES)'],
    ]
    for (const [program, cwd, code, message] of cases) {
      const opts = cwd ? { cwd } : {}
      const a = await spawnCall(program, [], opts)
      expect([a.errorCode, a.error, a.exitCode]).toEqual([code, message, -1])
      const b = await captureCall(program, [], opts)
      expect([b.errorCode, b.error]).toEqual([code, message])
      const errors: { code?: string; message: string }[] = []
      const h = spawnHandle(program, [], { ...opts, onError: (e: { code?: string; message: string }) => errors.push(e) })
      expect(h.pid).toBeUndefined()
      expect((await h.exited).errorCode).toBe(code)
      expect(errors.map((e) => [e.code, e.message])).toEqual([[code, message]])
    }
    rmSync(dir, { recursive: true, force: true })
  })

  it('bad arguments reject with TypeError', async () => {
    await expect(spawnCall('echo', 'x' as never)).rejects.toThrow(TypeError)
    await expect(spawnCall('echo', [1 as never])).rejects.toThrow(/args\[0\] must be a string/)
    await expect(spawnCall('echo', [], {}, 'no' as never)).rejects.toThrow(/onStdout must be a function/)
  })

  it('timeout and abort', async () => {
    const r = await spawnCall('sleep', ['30'], { timeout: 200 })
    expect(r).toMatchObject({ timedOut: true, exitCode: 124, errorCode: 'TIMEOUT' })
    const ac = new AbortController()
    setTimeout(() => ac.abort(), 100)
    const c = await spawnCall('sleep', ['30'], { signal: ac.signal })
    expect(c).toMatchObject({ canceled: true, errorCode: 'ECANCELED' })
  })

  it('executeStreaming streams code in a language', async () => {
    const out: string[] = []
    const r = await executeStreaming('for i in range(3): print(i)', 'python', {}, (d) => out.push(d))
    expect(r.exitCode).toBe(0)
    expect(out.join('')).toBe('0\n1\n2\n')
  })
})

describe('host lifecycle (host scripts in child processes)', () => {
  it('Node exits as soon as the last execution ends', () => {
    const script = `
      const { spawnCall, executeAndCapture } = require(${JSON.stringify(addon)});
      const t0 = Date.now();
      Promise.all([spawnCall('sh', ['-c', 'echo hi'], {}, () => {}), executeAndCapture('echo x', 'bash')])
        .then(() => { process.stdout.write('done ' + (Date.now() - t0)); });
    `
    const t0 = Date.now()
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 })
    expect(r.stdout).toMatch(/^done \d+$/)
    expect(r.status).toBe(0)
    expect(Date.now() - t0).toBeLessThan(5000)
  })

  it('a pending execution keeps Node alive until it ends', () => {
    const script = `
      const { executeAndCapture } = require(${JSON.stringify(addon)});
      executeAndCapture('sleep 0.5; echo late', 'bash').then((r) => process.stdout.write(r.stdout));
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 })
    expect(r.stdout).toBe('late\n')
  })

  it('running children and their group are killed when the host exits', async () => {
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)});
      const print = (d) => process.stdout.write(d);
      spawnCall('sh', ['-c', 'echo $$; sleep 60'], { timeout: 0 }, print);
      spawnCall('sh', ['-c', 'sleep 60 & echo $!; wait'], { timeout: 0 }, print);
      setTimeout(() => process.exit(0), 500);
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 })
    expect(r.status).toBe(0)
    const pids = r.stdout.split('\n').filter(Boolean).map(Number)
    expect(pids.length).toBe(2)
    expect(await waitGone(pids)).toEqual([])
  })
})

describe.skipIf(process.platform !== 'linux')("the addon's own spawn (Linux)", () => {
  it('a pipe child starts with the SIGPIPE, SIGXFSZ and SIGXCPU Node ignores at their defaults, with or without limits', async () => {
    const ignored = (status: string) => BigInt(`0x${/SigIgn:\s*([0-9a-f]+)/.exec(status)![1]}`)
    const bit = (sig: number) => 1n << BigInt(sig - 1)
    // the premise: Node ignores SIGPIPE (13) and SIGXFSZ (25)
    const mine = ignored(readFileSync('/proc/self/status', 'utf8'))
    expect(mine & (bit(13) | bit(25))).toBe(bit(13) | bit(25))
    for (const opts of [{}, { limits: { openFiles: 64 } }, { dieWithParent: true }]) {
      const r = await captureCall('bash', ['-c', 'grep SigIgn /proc/self/status; (ulimit -f 1; head -c 100000 /dev/zero > /dev/shm/exn-xfsz-$$); echo rc=$?; rm -f /dev/shm/exn-xfsz-$$'], opts)
      expect(ignored(r.stdout) & (bit(13) | bit(24) | bit(25))).toBe(0n)
      // head dies of SIGXFSZ (128+25) instead of seeing EFBIG
      expect(r.stdout).toContain('rc=153')
    }
  })
})
