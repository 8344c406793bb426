// The host's CPU time per sequential spawnCall('/bin/true') (user + system of
// the whole host process, the runtime's workers and the sweeps after each
// run included), and the wall time per spawn, of one build of the addon:
//
//   node benchmark/spawn-cpu.mjs [addon.node=./exec-native.linux-x64-gnu.node] [runs=3000]
//
// Run two builds alternately to compare them (issue 28).
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(import.meta.url)
const file = path.resolve(process.argv[2] ?? 'exec-native.linux-x64-gnu.node')
const runs = Number(process.argv[3] ?? 3000) || 3000
const addon = require(file)
for (let i = 0; i < 100; i++) await addon.spawnCall('/bin/true', [])
await new Promise((r) => setTimeout(r, 200))
const c0 = process.cpuUsage()
const t0 = performance.now()
for (let i = 0; i < runs; i++) await addon.spawnCall('/bin/true', [])
const wall = (performance.now() - t0) / runs
// the last runs' sweeps end in the background: counted too
await new Promise((r) => setTimeout(r, 300))
const c = process.cpuUsage(c0)
console.log(`${file}: ${((c.user + c.system) / runs).toFixed(0)} µs of host CPU per spawn, ${wall.toFixed(3)} ms wall per spawn (${runs} runs)`)
