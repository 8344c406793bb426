// Nothing leaks: after many sequential and concurrent executions the host's
// open fds, threads and RSS return to their baseline and every result belongs
// to its own call. CI runs scaled-down counts; `npm run stress` the full ones
// (STRESS_FULL=1: 10,000 sequential, 200 concurrent).
import { readdirSync, readFileSync } from 'node:fs'

import { describe, expect, it } from 'vitest'

import { executeAndCapture, liveProcessGroups, spawnCall } from '../index.js'

const FULL = process.env.STRESS_FULL === '1'
const SEQUENTIAL = FULL ? 10_000 : 1_000
const CONCURRENT = 200
const ROUNDS = FULL ? 10 : 3

function host() {
  const status = readFileSync('/proc/self/status', 'utf8')
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0)
  return { fds: readdirSync('/proc/self/fd').length, threads: field('Threads'), rssKb: field('VmRSS') }
}

async function settle() {
  for (let i = 0; i < 100 && liveProcessGroups() > 0; i++) await new Promise((r) => setTimeout(r, 20))
  await new Promise((r) => setTimeout(r, 200))
  global.gc?.()
}

describe('stress: nothing leaks', () => {
  it(`${SEQUENTIAL} sequential executions`, async () => {
    // warm up the runtime's threads and allocator first
    for (let i = 0; i < 50; i++) await executeAndCapture(`echo ${i}`, 'bash')
    await settle()
    const before = host()
    for (let i = 0; i < SEQUENTIAL; i++) {
      const r = await (i % 2
        ? executeAndCapture(`echo ${i}`, 'bash')
        : spawnCall('/bin/echo', [String(i)], {}, (d) => {
            if (d !== `${i}\n`) throw new Error(`wrong output ${d} for ${i}`)
          }))
      if (r.exitCode !== 0 || ('stdout' in r && r.stdout !== `${i}\n`)) throw new Error(`run ${i} went wrong`)
    }
    await settle()
    const after = host()
    console.log(`sequential x${SEQUENTIAL}: before ${JSON.stringify(before)} after ${JSON.stringify(after)}`)
    expect(liveProcessGroups()).toBe(0)
    expect(after.fds).toBeLessThanOrEqual(before.fds + 2)
    expect(after.threads).toBeLessThanOrEqual(before.threads + 4)
    expect(after.rssKb - before.rssKb).toBeLessThan(64 * 1024)
  }, 600_000)

  it(`${CONCURRENT} concurrent executions, ${ROUNDS} rounds`, async () => {
    await settle()
    const before = host()
    for (let round = 0; round < ROUNDS; round++) {
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, (_, i) =>
          executeAndCapture(`echo ${round}-${i}; echo e${i} >&2; exit $((${i} % 5))`, 'bash'),
        ),
      )
      results.forEach((r, i) => {
        expect(r.stdout).toBe(`${round}-${i}\n`)
        expect(r.stderr).toBe(`e${i}\n`)
        expect(r.exitCode).toBe(i % 5)
      })
    }
    await settle()
    const after = host()
    console.log(`concurrent ${CONCURRENT}x${ROUNDS}: before ${JSON.stringify(before)} after ${JSON.stringify(after)}`)
    expect(liveProcessGroups()).toBe(0)
    expect(after.fds).toBeLessThanOrEqual(before.fds + 2)
    expect(after.threads).toBeLessThanOrEqual(before.threads + 4)
    expect(after.rssKb - before.rssKb).toBeLessThan(64 * 1024)
  }, 600_000)
})
