// Bursts of spawns of /bin/true at once, of one build of the addon: the wall
// time of each burst (median and minimum). For profiles of the concurrent
// path (issue 28), e.g. `perf record -g -- node benchmark/spawn-burst.mjs`
// or `strace -f -e trace=openat -- node benchmark/spawn-burst.mjs`:
//
//   node benchmark/spawn-burst.mjs [addon.node=./exec-native.linux-x64-gnu.node] [spawnCall|captureCall] [bursts=30] [size=200]
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(import.meta.url)
const file = path.resolve(process.argv[2] ?? 'exec-native.linux-x64-gnu.node')
const call = process.argv[3] ?? 'spawnCall'
const bursts = Number(process.argv[4] ?? 30) || 30
const size = Number(process.argv[5] ?? 200) || 200
const addon = require(file)
const one = () => addon[call]('/bin/true', [])
const walls = []
for (let b = 0; b < bursts; b++) {
  const t0 = performance.now()
  const rs = await Promise.all(Array.from({ length: size }, one))
  walls.push(performance.now() - t0)
  const bad = rs.find((r) => r.exitCode !== 0)
  if (bad) throw new Error(`${call}: exit ${bad.exitCode} ${bad.error ?? ''}`)
}
walls.sort((x, y) => x - y)
console.log(`${file} ${call}: ${bursts} bursts of ${size}, wall median ${walls[walls.length >> 1].toFixed(1)} ms, min ${walls[0].toFixed(1)} ms`)
