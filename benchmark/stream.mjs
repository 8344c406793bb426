#!/usr/bin/env node
// Streaming 1 GiB through spawnCall callbacks: throughput, event-loop delay
// (p99) and peak RSS growth of the host, beside child_process.spawn with
// 'data' listeners. Runs alternate, medians are printed.
//
//   node benchmark/stream.mjs [rounds]                 exec-native (./index.js) vs spawn
//   node benchmark/stream.mjs --ab A.node B.node [rounds]   two builds of the addon, A B B A ...
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const bytes = 2 ** 30
const argv = process.argv.slice(2)
const ab = argv[0] === '--ab'
const rounds = Number((ab ? argv[3] : argv[0]) ?? 6)

function viaAddon(addon) {
  return () => {
    let got = 0
    return addon.spawnCall('head', ['-c', String(bytes), '/dev/zero'], {}, (s) => (got += s.length)).then(() => got)
  }
}
function viaSpawn() {
  let got = 0
  return new Promise((res, rej) => {
    const c = spawn('head', ['-c', String(bytes), '/dev/zero'])
    c.stdout.on('data', (b) => (got += b.length))
    c.on('error', rej)
    c.on('close', () => res(got))
  })
}

const contenders = ab
  ? { A: viaAddon(require(argv[1])), B: viaAddon(require(argv[2])) }
  : { 'exec-native spawnCall': viaAddon(require('../index.js')), 'child_process.spawn data': viaSpawn }
const names = Object.keys(contenders)
const res = Object.fromEntries(names.map((k) => [k, []]))
for (let r = 0; r < rounds; r++) {
  for (const k of r % 2 ? [...names].reverse() : names) {
    globalThis.gc?.()
    const base = process.memoryUsage().rss
    let peak = base
    const iv = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5)
    const h = monitorEventLoopDelay({ resolution: 1 })
    h.enable()
    const t0 = performance.now()
    const got = await contenders[k]()
    const s = (performance.now() - t0) / 1000
    h.disable()
    clearInterval(iv)
    if (got !== bytes) throw new Error(`${k}: got ${got} of ${bytes} bytes`)
    res[k].push({ gbps: bytes / s / 1e9, p99: h.percentile(99) / 1e6, rss: (peak - base) / 2 ** 20 })
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
for (const k of names) {
  const m = (f) => med(res[k].map((x) => x[f]))
  console.log(`${k.padEnd(28)} ${m('gbps').toFixed(2)} GB/s  loop p99 ${m('p99').toFixed(1)} ms  peak RSS +${m('rss').toFixed(0)} MiB  (median of ${rounds})`)
}
