#!/usr/bin/env node
// The sandbox's cost per spawn: /bin/true through spawnCall, with and without
// `sandbox: true`, interleaved, at a given JS heap size (the sandbox spawns
// from a short-lived thread and keeps posix_spawn, so it should not grow with
// the heap). Medians and p90 in ms.
//   node benchmark/sandbox-spawn.mjs [runs] [heapMiB] [addon.node]
//   node --max-old-space-size=4096 benchmark/sandbox-spawn.mjs 400 1024
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'

const require = createRequire(import.meta.url)
const [runs = 300, heapMb = 0, addonPath = '../index.js'] = process.argv.slice(2)
const { spawnCall, sandboxStatus } = require(addonPath)
// a big heap the way a long-lived host has one: many small live objects
const keep = []
for (let i = 0; i < Number(heapMb); i++) keep.push(Array.from({ length: 1024 * 16 }, (_, j) => ({ j })))
const opts = { plain: { cwd: tmpdir() }, sandboxed: { cwd: tmpdir(), sandbox: true } }
const times = { plain: [], sandboxed: [] }
for (let i = 0; i < 20; i++) for (const o of Object.values(opts)) await spawnCall('/bin/true', [], o)
for (let i = 0; i < Number(runs); i++) {
  for (const k of i % 2 ? ['plain', 'sandboxed'] : ['sandboxed', 'plain']) {
    const t0 = performance.now()
    const r = await spawnCall('/bin/true', [], opts[k])
    times[k].push(performance.now() - t0)
    if (r.exitCode !== 0) throw new Error(`${k}: ${r.error}`)
  }
}
const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)]
const rss = (process.memoryUsage().rss / 2 ** 20).toFixed(0)
console.log(`landlock ABI ${sandboxStatus().landlockAbi}, heap ~${heapMb} MiB (rss ${rss} MiB), ${runs} runs each`)
for (const k of Object.keys(times)) console.log(`${k.padEnd(10)} median ${q(times[k], 0.5).toFixed(3)} ms  p90 ${q(times[k], 0.9).toFixed(3)} ms`)
console.log(`sandbox cost: ${(q(times.sandboxed, 0.5) - q(times.plain, 0.5)).toFixed(3)} ms at the median`)
keep.length = 0
