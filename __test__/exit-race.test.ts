// Runs that are still being spawned when the host goes away (issue 12.2):
// process.exit, a self-sent SIGTERM or SIGINT, and a worker terminated while
// its runs are queued. Every child must die with the host; none may be left
// running under PID 1.
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { sleep } from './helpers'

const addon = join(__dirname, '..', 'index.js')

/** Running processes whose environment holds `EXN_RACE=<tag>`. */
function tagged(tag: string): number[] {
  const needle = `EXN_RACE=${tag}\0`
  const found: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      if (!readFileSync(`/proc/${d}/environ`, 'latin1').includes(needle)) continue
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8')
      const state = stat[stat.lastIndexOf(')') + 2]
      if (state !== 'Z' && state !== 'X') found.push(Number(d))
    } catch {}
  }
  return found
}

/** Survivors a while after the host ended (then killed, so tests stay clean). */
async function survivors(tag: string): Promise<number> {
  await sleep(300)
  const left = tagged(tag)
  for (const p of left) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {}
  }
  return left.length
}

const starts: Record<string, string> = {
  capture: `for (let i = 0; i < N; i++) a.executeAndCapture('sleep 120', 'bash', { timeout: 0, env: { EXN_RACE: tag } })`,
  spawnCall: `for (let i = 0; i < N; i++) a.spawnCall('sleep', ['120'], { timeout: 0, env: { EXN_RACE: tag } }, () => {}, () => {})`,
  limits: `for (let i = 0; i < N; i++) a.executeAndCapture('sleep 120', 'bash', { timeout: 0, env: { EXN_RACE: tag }, limits: { openFiles: 64 } })`,
}
const ends: Record<string, string> = {
  exit: `process.exit(0)`,
  SIGTERM: `process.kill(process.pid, 'SIGTERM')`,
  SIGINT: `process.kill(process.pid, 'SIGINT')`,
}

describe('runs in flight when the host goes away', () => {
  for (const [how, start] of Object.entries(starts)) {
    for (const [end, stop] of Object.entries(ends)) {
      it(`${how} x 20, then ${end}: no child survives (8 tries, at staggered moments)`, { timeout: 60_000 }, async () => {
        let left = 0
        for (let t = 0; t < 8; t++) {
          const tag = `${how}-${end}-${process.pid}-${t}-${Math.random().toString(36).slice(2)}`
          // end at once, after a tick, or a few ms in: while spawns are in flight
          const when = [`0`, `1`, `3`, `6`][t % 4]
          const script = `const a = require(${JSON.stringify(addon)}); const N = 20; const tag = ${JSON.stringify(tag)};
            ${start}
            setTimeout(() => { ${stop} }, ${when})`
          spawnSync(process.execPath, ['-e', script], { stdio: 'ignore', timeout: 20_000 })
          left += await survivors(tag)
        }
        expect(left).toBe(0)
      })
    }
  }

  it('a worker terminated while 50 runs are queued leaves no child and no descriptors behind', { timeout: 60_000 }, async () => {
    const tag = `worker-${process.pid}-${Math.random().toString(36).slice(2)}`
    const script = `
      const { Worker } = require('node:worker_threads')
      const { readdirSync } = require('node:fs')
      const a = require(${JSON.stringify(addon)}) // the main thread loads the addon too
      const fds = () => readdirSync('/proc/self/fd').length
      const before = fds()
      const results = []
      ;(async () => {
        for (let round = 0; round < 3; round++) {
          const w = new Worker(\`
            const a = require(\${JSON.stringify(${JSON.stringify(addon)})})
            for (let i = 0; i < 50; i++) a.executeAndCapture('sleep 120', 'bash', { timeout: 0, env: { EXN_RACE: ${JSON.stringify(tag)} } })
            require('node:worker_threads').parentPort.postMessage('queued')
          \`, { eval: true })
          await new Promise((r) => w.once('message', r))
          await new Promise((r) => setTimeout(r, round * 3))
          await w.terminate()
        }
        await new Promise((r) => setTimeout(r, 1500))
        console.log(JSON.stringify({ before, after: fds() }))
      })()`
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 40_000 })
    expect(r.stderr).toBe('')
    const { before, after } = JSON.parse(r.stdout.trim())
    expect(await survivors(tag)).toBe(0)
    // a few descriptors of the worker machinery may stay; 150 pipes may not
    expect(after - before).toBeLessThan(20)
  })
})
