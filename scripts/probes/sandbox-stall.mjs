// The synchronous part (event-loop stall) and wall time of 300 spawnCall(/bin/true) at a held
// JS heap, plain or sandboxed (EXEC_NATIVE_TEST_NO_USERNS=1: Landlock + seccomp only):
//   node --expose-gc --max-old-space-size=4096 scripts/probes/sandbox-stall.mjs <GiB> plain|sandbox
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const a = require('../../index.js')
const gib = Number(process.argv[2] ?? 1)
const hold = []
while (process.memoryUsage().heapUsed < gib * 2 ** 30) for (let i = 0; i < 8192; i++) hold.push({ id: i, data: new Array(120).fill(i) })
globalThis.gc?.()
await new Promise((r) => setTimeout(r, 500))
const opts = process.argv[3] === 'plain' ? {} : { sandbox: true }
const stalls = [], walls = []
for (let i = 0; i < 300; i++) {
  const t = performance.now()
  const p = a.spawnCall('/bin/true', [], opts)
  const s = performance.now()
  await p
  stalls.push(s - t); walls.push(performance.now() - t)
}
const med = (x) => x.sort((p, q) => p - q)[x.length >> 1]
console.log(process.argv[3], `heap ${gib} GiB`, process.env.EXEC_NATIVE_TEST_NO_USERNS ? 'L+S' : '', 'stall', med(stalls).toFixed(3), 'wall', med(walls).toFixed(3))
globalThis.keep = hold
