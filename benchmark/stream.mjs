#!/usr/bin/env node
// Streaming 1 GiB (`head -c 1073741824 /dev/zero`) to callbacks: throughput,
// event-loop delay (p99), peak RSS growth of the host, callback rate and chunk
// size; exec-native beside child_process.spawn with 'data' listeners, as
// strings and as Buffers. Contenders take turns (the order rotated each
// round); medians are printed. Linux (it reads /proc).
//
//   node --expose-gc benchmark/stream.mjs [rounds]                      ./index.js vs spawn, each run in a fresh process
//   node --expose-gc benchmark/stream.mjs --warm [rounds]               the same, all runs in this process
//   node --expose-gc benchmark/stream.mjs --ab A.node B.node [rounds]   two builds of the addon (and spawn), fresh processes
//   options: --bytes N, --only name,name (substrings of the contender names)
//
// A fresh process per run (benchmark/stream-child.mjs) is the default: runs
// in one process leave state to the next (glibc's heap after a string run
// made every later Buffer run fault its memory in again), and two copies of
// the addon in one process share its signals and children. Each child run
// waits for an idle machine and is redone when other processes took CPU
// during it. `--warm` keeps the old in-process runner, for quick looks.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { measure, runInChild, OTHER_MAX } from './stream-child.mjs'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const argv = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = argv.indexOf(name)
  if (i < 0) return dflt
  const v = argv[i + 1]
  argv.splice(i, 2)
  return v
}
const flag = (name) => {
  const i = argv.indexOf(name)
  if (i >= 0) argv.splice(i, 1)
  return i >= 0
}
const bytes = Number(opt('--bytes', 2 ** 30))
const only = opt('--only', '')
  .split(',')
  .filter(Boolean)
const warm = flag('--warm')
const ab = argv[0] === '--ab'
const rounds = Number((ab ? argv[3] : argv[0]) ?? 5)

const KINDS = [
  ['spawnCall strings', 'spawnCall-str'],
  ['spawn() strings', 'spawn-str'],
  ['spawn() buffers', 'spawn-buf'],
  ['spawnCall buffers', 'spawnCall-buf'],
]
let redone = 0
/** A contender: one measured run, in a child process or (warm) here. */
function contender(addonPath, kind) {
  if (warm) {
    const addon = addonPath === '-' ? null : require(addonPath)
    return () => measure(addon, kind, bytes)
  }
  return async () => {
    const r = await runInChild(addonPath, kind, bytes)
    redone += r.redone
    return r
  }
}

let contenders = {}
if (ab) {
  const [, A, B] = argv
  for (const [name, kind] of KINDS) {
    contenders[`A ${name}`] = contender(path.resolve(A), kind)
    contenders[`B ${name}`] = contender(path.resolve(B), kind)
  }
} else {
  for (const [name, kind] of KINDS) contenders[`exec-native ${name}`] = contender(path.join(root, 'index.js'), kind)
}
Object.assign(contenders, {
  "node spawn setEncoding('utf8')": contender('-', 'node-str'),
  'node spawn buffers': contender('-', 'node-buf'),
  // what the machine can move through a pipe: no callbacks, cat writes to /dev/null
  'pipe limit: head | cat': async () => {
    const t = performance.now()
    await new Promise((res, rej) => {
      const c = spawn('sh', ['-c', `head -c ${bytes} /dev/zero | cat > /dev/null`], { stdio: 'ignore' })
      c.on('error', rej)
      c.on('close', res)
    })
    const s = (performance.now() - t) / 1000
    return { seconds: s, gbps: bytes / s / 1e9, p99: 0, rss: 0, cps: 0, chunk: 0, maxChunk: 0, partialPerSec: 0, cpu: 0, js: 0 }
  },
})
if (only.length) contenders = Object.fromEntries(Object.entries(contenders).filter(([k]) => only.some((o) => k.includes(o))))

const names = Object.keys(contenders)
const res = Object.fromEntries(names.map((k) => [k, []]))
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < names.length; i++) {
    const k = names[(r + i) % names.length]
    res[k].push(await contenders[k]())
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
const ref = names.find((k) => k.startsWith('node spawn setEncoding'))
const refBuf = names.find((k) => k === 'node spawn buffers')
const m = (k, f) => med(res[k].map((x) => x[f]))
console.log(
  `${(bytes / 2 ** 20).toFixed(0)} MiB from head -c, medians of ${rounds} rounds (interleaved)` +
    (warm ? ', all in one process' : `, each run in a fresh process, ${redone} runs redone (other processes took > ${OTHER_MAX} s of CPU)`),
)
console.log('| contender | GB/s | x node utf8 | x node buffers | loop p99 ms | peak RSS +MiB | calls/s | mean chunk KiB | max chunk KiB | host CPU s/GiB | JS thread CPU s/GiB |')
console.log('|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
for (const k of names) {
  const row = [
    k,
    m(k, 'gbps').toFixed(2),
    ref ? (m(k, 'gbps') / m(ref, 'gbps')).toFixed(2) : '',
    refBuf ? (m(k, 'gbps') / m(refBuf, 'gbps')).toFixed(2) : '',
    m(k, 'p99').toFixed(2),
    m(k, 'rss').toFixed(1),
    m(k, 'cps').toFixed(0),
    m(k, 'chunk').toFixed(1),
    Math.max(...res[k].map((x) => x.maxChunk)).toFixed(1),
    m(k, 'cpu').toFixed(2),
    m(k, 'js').toFixed(2),
  ]
  console.log(`| ${row.join(' | ')} |`)
}
