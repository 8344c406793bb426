// One contender of the overhead case alone, for profilers:
//   perf stat -e task-clock,page-faults,context-switches node benchmark/profile.mjs spawnCall 2000
//   valgrind --tool=callgrind --trace-children=no node benchmark/profile.mjs spawnCall 200
// Prints wall ms and host CPU µs (all threads of this process, not the children) per run.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const { spawnCall, executeAndCapture } = require('../index.js')
const which = process.argv[2] ?? 'spawnCall'
const count = Number(process.argv[3] ?? 1000)
const ops = {
  spawnCall: () => spawnCall('/bin/true', []),
  executeAndCapture: () => executeAndCapture('/bin/true', 'bash'),
  spawn: () => new Promise((res, rej) => { const c = spawn('/bin/true', []); c.on('error', rej); c.on('close', res) }),
  execa: async () => (await import('execa')).execa('/bin/true'),
}
const op = ops[which]
if (!op) throw new Error(`profile: one of ${Object.keys(ops).join(', ')}`)
for (let i = 0; i < 20; i++) await op()
const c0 = process.cpuUsage()
const t0 = performance.now()
for (let i = 0; i < count; i++) await op()
const ms = performance.now() - t0
const cpu = process.cpuUsage(c0)
console.log(JSON.stringify({ which, count, msPerRun: ms / count, hostCpuUsPerRun: (cpu.user + cpu.system) / count, userUs: cpu.user / count, sysUs: cpu.system / count }))
