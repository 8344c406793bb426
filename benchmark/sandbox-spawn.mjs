#!/usr/bin/env node
// The sandbox's cost per spawn: /bin/true through spawnCall, with and without
// `sandbox: true`, interleaved, at a given JS heap size (the sandbox spawns
// from a short-lived thread and keeps posix_spawn, so it should not grow with
// the heap). Medians and p90 in ms.
//   node benchmark/sandbox-spawn.mjs [runs] [heapMiB] [addon.node] [cwd (default: the temp directory)]
//   node --max-old-space-size=4096 benchmark/sandbox-spawn.mjs 400 1024
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'

const require = createRequire(import.meta.url)
const [runs = 300, heapMb = 0, addonPath = '../index.js', cwd = tmpdir()] = process.argv.slice(2)
const { spawnCall, sandboxStatus } = require(addonPath)
// a big heap the way a long-lived host has one: many small live objects
const keep = []
for (let i = 0; i < Number(heapMb); i++) keep.push(Array.from({ length: 1024 * 16 }, (_, j) => ({ j })))
const opts = { plain: { cwd }, sandboxed: { cwd, sandbox: true } }
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
// on a loaded machine the low quantiles show the cost best (the median moves with the load)
const at = [0, 0.1, 0.25, 0.5, 0.9]
for (const k of Object.keys(times)) console.log(`${k.padEnd(10)} ${at.map((p) => `${p ? `p${p * 100}` : 'min'} ${q(times[k], p).toFixed(3)}`).join('  ')} ms`)
console.log(`sandbox cost (min / p10 / p25 / median / p90): ${at.map((p) => (q(times.sandboxed, p) - q(times.plain, p)).toFixed(3)).join(' / ')} ms`)
console.log(`load average ${(await import('node:os')).loadavg().map((l) => l.toFixed(2)).join(' ')}`)
keep.length = 0
