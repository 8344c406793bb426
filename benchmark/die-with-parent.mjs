// What dieWithParent costs per spawn: it needs a fork (pre_exec) instead of
// posix_spawn. Interleaved A B A B, medians. `node benchmark/die-with-parent.mjs [runs]`
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const { spawnCall } = require('../index.js')
const runs = Number(process.argv[2] ?? 500)
const heapMb = Number(process.env.HEAP_MB ?? 0)
const hold = []
for (let i = 0; i < heapMb; i++) hold.push(Buffer.alloc(1024 * 1024, 1).toString('latin1'))
const times = { plain: [], dieWithParent: [] }
for (let i = 0; i < runs; i++) {
  for (const [name, opts] of [['plain', {}], ['dieWithParent', { dieWithParent: true }]]) {
    const t0 = process.hrtime.bigint()
    await spawnCall('/bin/true', [], opts)
    times[name].push(Number(process.hrtime.bigint() - t0) / 1e6)
  }
}
const median = (a) => a.sort((x, y) => x - y)[a.length >> 1]
const p = median(times.plain)
const d = median(times.dieWithParent)
console.log(`heap ${heapMb} MiB, ${runs} runs each: plain ${p.toFixed(3)} ms, dieWithParent ${d.toFixed(3)} ms (+${(d - p).toFixed(3)} ms, ${(d / p).toFixed(2)}x)`)
