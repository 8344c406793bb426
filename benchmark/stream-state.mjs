#!/usr/bin/env node
// What one streaming run leaves to the next in the same process: a sequence
// of 1 GiB runs, one line each with throughput, the JS thread's CPU, peak RSS
// growth, V8's new space before and after, the garbage collections by kind
// and the page faults of the process. Linux (it reads /proc).
//
//   node --expose-gc benchmark/stream-state.mjs str buf buf nbuf      kinds: str buf (exec-native spawn()), nstr nbuf (Node)
//   MALLOC_TRIM_THRESHOLD_=268435456 node --expose-gc benchmark/stream-state.mjs str buf nbuf
//   node --expose-gc benchmark/stream-state.mjs --addon /tmp/before.node str buf    another build
//
// The finding it shows (docs/PERFORMANCE.md, streaming item 7): after a run of
// exec-native strings, every later Buffer run, ours or Node's, faulted its
// Buffers in afresh (glibc trimmed the heap after each collection); a higher
// trim threshold makes it go away.
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { PerformanceObserver } from 'node:perf_hooks'
import v8 from 'node:v8'
import { start, jsThreadCpu, hwm } from './stream-child.mjs'

const require = createRequire(import.meta.url)
const args = process.argv.slice(2)
const at = args.indexOf('--addon')
const addon = require(at >= 0 ? args.splice(at, 2)[1] : '../index.js')
const bytes = 2 ** 30
const newSpace = () => v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space').space_size / 2 ** 20
/** The kinds of stream-child.mjs, by short name. */
const kinds = { str: 'spawn-str', buf: 'spawn-buf', nstr: 'node-str', nbuf: 'node-buf' }
const GC = { 1: 'scavenge', 2: 'minor-mc', 4: 'mark-compact', 8: 'incremental', 16: 'weak' }
let gcs = {}
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const k = GC[e.detail?.kind] ?? e.detail?.kind
    gcs[k] = (gcs[k] ?? 0) + 1
  }
}).observe({ entryTypes: ['gc'] })

for (const k of args) {
  if (!kinds[k]) throw new Error(`stream-state: unknown kind ${k} (str, buf, nstr, nbuf)`)
  globalThis.gc?.()
  await new Promise((r) => setImmediate(r))
  gcs = {}
  const ns0 = newSpace()
  const base = process.memoryUsage.rss()
  writeFileSync('/proc/self/clear_refs', '5')
  const faults0 = process.resourceUsage().minorPageFault
  const js0 = jsThreadCpu()
  let got = 0
  const t = performance.now()
  await start(addon, kinds[k], bytes, (d) => (got += d.length))
  const s = (performance.now() - t) / 1000
  if (got !== bytes) throw new Error(`stream-state: ${k} got ${got} of ${bytes}`)
  const faults = process.resourceUsage().minorPageFault - faults0
  await new Promise((r) => setImmediate(r))
  console.log(
    `${k.padEnd(4)} ${(bytes / s / 1e9).toFixed(2)} GB/s  JS thread ${(jsThreadCpu() - js0).toFixed(2)} s  RSS +${((hwm() - base) / 2 ** 20).toFixed(1)} MiB  ` +
      `new space ${ns0.toFixed(0)} -> ${newSpace().toFixed(0)} MiB  page faults ${faults}  GCs ${JSON.stringify(gcs)}`,
  )
}
