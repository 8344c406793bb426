#!/usr/bin/env node
// Streaming 1 GiB (`head -c 1073741824 /dev/zero`) to callbacks: throughput,
// event-loop delay (p99), peak RSS growth of the host, callback rate and chunk
// size; exec-native beside child_process.spawn with 'data' listeners, as
// strings and as Buffers. Contenders take turns (the order rotated each
// round, garbage collected between turns); medians are printed.
//
//   node --expose-gc benchmark/stream.mjs [rounds]                      ./index.js vs spawn
//   node --expose-gc benchmark/stream.mjs --ab A.node B.node [rounds]   two builds of the addon (and spawn)
//   options: --bytes N, --only name,name (substrings of the contender names)
//
// With --ab every run is a fresh child process that loads one build: two
// copies of the addon in one process share its signals and children (a run of
// the old build lost 25% of its bytes with the new one loaded beside it).
// Each child run waits for an idle machine and is redone (up to 8 times) when
// other processes took more than 0.12 s of CPU during it (/proc/stat less the
// child's own and its head's): on 2 shared cores a build beside the bench
// moved the medians by +-15% between runs of the same builds.
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const argv = process.argv.slice(2)
const opt = (name, dflt) => {
  const i = argv.indexOf(name)
  if (i < 0) return dflt
  const v = argv[i + 1]
  argv.splice(i, 2)
  return v
}
const bytes = Number(opt('--bytes', 2 ** 30))
const only = opt('--only', '')
  .split(',')
  .filter(Boolean)
const child = argv[0] === '--child'
const ab = argv[0] === '--ab'
const rounds = Number((ab ? argv[3] : argv[0]) ?? 5)
const cmd = ['head', ['-c', String(bytes), '/dev/zero']]

/** One run; `attach(onData)` starts it and resolves when every byte came. */
function counted(attach) {
  return async () => {
    let got = 0
    let calls = 0
    let maxChunk = 0
    await attach((d) => {
      got += d.length
      calls++
      if (d.length > maxChunk) maxChunk = d.length
    })
    return { got, calls, maxChunk }
  }
}
const viaSpawnCall = (addon, encoding) =>
  counted((on) => addon.spawnCall(cmd[0], cmd[1], encoding ? { encoding } : {}, on))
const viaSubprocess = (addon, encoding) =>
  counted((on) => addon.spawn(cmd[0], cmd[1], { onStdout: on, ...(encoding ? { encoding } : {}) }).exited)
const viaNode = (utf8) =>
  counted(
    (on) =>
      new Promise((res, rej) => {
        const c = spawn(cmd[0], cmd[1], { stdio: ['ignore', 'pipe', 'inherit'] })
        if (utf8) c.stdout.setEncoding('utf8')
        c.stdout.on('data', on)
        c.on('error', rej)
        c.on('close', res)
      }),
  )

let contenders = {}
/** CPU seconds the machine spent busy (all processes), from /proc/stat. */
function machineBusy() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  return (f.reduce((a, b) => a + b, 0) - f[3] - f[4]) / 100
}
/** CPU seconds of this process's children that were waited for (and theirs). */
function childrenCpu() {
  const st = readFileSync('/proc/self/stat', 'utf8')
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
  return (Number(f[13]) + Number(f[14])) / 100
}
const OTHER_MAX = 0.12
let redone = 0
/** A contender run in a fresh process: `node stream.mjs --child ADDON KIND` */
const inChild = (addonPath, kind) => Object.assign(async () => {
  for (let attempt = 0; ; attempt++) {
    // an idle machine first: under 0.05 s of CPU in 0.5 s
    for (let i = 0; i < 1200; i++) {
      const b = machineBusy()
      await new Promise((r) => setTimeout(r, 500))
      if (machineBusy() - b < 0.05) break
    }
    const b0 = machineBusy()
    const c0 = childrenCpu()
    const r = spawnSync(process.execPath, ['--expose-gc', new URL(import.meta.url).pathname, '--child', addonPath, kind, '--bytes', String(bytes)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const other = machineBusy() - b0 - (childrenCpu() - c0)
    if (r.status !== 0) throw new Error(`child ${kind} failed`)
    if (other > OTHER_MAX && attempt < 8) {
      redone++
      continue
    }
    return JSON.parse(r.stdout)
  }
}, { measuresItself: true })
if (child) {
  // one measured run of one contender, printed as JSON
  const [, addonPath, kind] = argv
  const addon = addonPath === '-' ? null : require(addonPath)
  const runs = {
    'spawnCall-str': () => viaSpawnCall(addon)(),
    'spawnCall-buf': () => viaSpawnCall(addon, 'buffer')(),
    'spawn-str': () => viaSubprocess(addon)(),
    'spawn-buf': () => viaSubprocess(addon, 'buffer')(),
    'node-str': () => viaNode(true)(),
    'node-buf': () => viaNode(false)(),
  }
  console.log(JSON.stringify(await measure(runs[kind])))
  process.exit(0)
} else if (ab) {
  const [, A, B] = argv
  Object.assign(contenders, {
    'A spawnCall strings': inChild(A, 'spawnCall-str'),
    'B spawnCall strings': inChild(B, 'spawnCall-str'),
    'A spawn() strings': inChild(A, 'spawn-str'),
    'B spawn() strings': inChild(B, 'spawn-str'),
    'A spawn() buffers': inChild(A, 'spawn-buf'),
    'B spawn() buffers': inChild(B, 'spawn-buf'),
    'A spawnCall buffers': inChild(A, 'spawnCall-buf'),
    'B spawnCall buffers': inChild(B, 'spawnCall-buf'),
    "node spawn setEncoding('utf8')": inChild('-', 'node-str'),
    'node spawn buffers': inChild('-', 'node-buf'),
  })
} else {
  const addon = require('../index.js')
  Object.assign(contenders, {
    'exec-native spawnCall strings': viaSpawnCall(addon),
    'exec-native spawn() strings': viaSubprocess(addon),
    'exec-native spawn() buffers': viaSubprocess(addon, 'buffer'),
    'exec-native spawnCall buffers': viaSpawnCall(addon, 'buffer'),
  })
}
Object.assign(contenders, {
  ...(ab
    ? {}
    : {
        "node spawn setEncoding('utf8')": viaNode(true),
        'node spawn buffers': viaNode(false),
      }),
  // what the machine can move through a pipe: no callbacks, cat writes to /dev/null
  'pipe limit: head | cat': async () => {
    await new Promise((res, rej) => {
      const c = spawn('sh', ['-c', `head -c ${bytes} /dev/zero | cat > /dev/null`], { stdio: 'ignore' })
      c.on('error', rej)
      c.on('close', res)
    })
    return { got: bytes, calls: 0, maxChunk: 0 }
  },
})
// exploration: NAME@VAR=value,VAR=value runs NAME with those variables set (read by the addon per run)
for (const spec of (process.env.STREAM_VARIANTS ?? '').split(';').filter(Boolean)) {
  const [base, vars] = spec.split('@')
  const env = Object.fromEntries(vars.split(',').map((kv) => kv.split('=')))
  const run = contenders[base]
  contenders[spec] = async () => {
    const old = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]))
    Object.assign(process.env, env)
    try {
      return await run()
    } finally {
      for (const [k, v] of Object.entries(old)) if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}
if (only.length) contenders = Object.fromEntries(Object.entries(contenders).filter(([k]) => only.some((o) => k.includes(o))))

function hwmReset() {
  try {
    writeFileSync('/proc/self/clear_refs', '5')
    return true
  } catch {
    return false
  }
}
/** CPU seconds of the JS thread (its task has the process id). */
function jsThreadCpu() {
  const st = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / 100
}
function hwm() {
  return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024
}

async function measure(run) {
  globalThis.gc?.()
  const base = process.memoryUsage.rss()
  const reset = hwmReset()
  let peak = base
  const iv = reset ? null : setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5)
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const cpu0 = process.cpuUsage()
  const js0 = jsThreadCpu()
  const t0 = performance.now()
  const { got, calls, maxChunk } = await run()
  const s = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const js = jsThreadCpu() - js0
  h.disable()
  if (iv) clearInterval(iv)
  if (reset) peak = hwm()
  if (got !== bytes) throw new Error(`got ${got} of ${bytes} bytes`)
  const perGiB = 2 ** 30 / bytes
  return { cpu: ((cpu.user + cpu.system) / 1e6) * perGiB, js: js * perGiB, gbps: bytes / s / 1e9, p99: h.percentile(99) / 1e6, rss: (peak - base) / 2 ** 20, cps: calls / s, chunk: calls ? bytes / calls / 1024 : 0, maxChunk: maxChunk / 1024 }
}

const names = Object.keys(contenders)
const res = Object.fromEntries(names.map((k) => [k, []]))
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < names.length; i++) {
    const k = names[(r + i) % names.length]
    const c = contenders[k]
    // a child run measures itself; an in-process one is measured here
    res[k].push(c.measuresItself ? await c() : await measure(c))
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
const ref = names.find((k) => k.startsWith("node spawn setEncoding")) ?? names[names.length - 1]
const refBuf = names.find((k) => k === 'node spawn buffers')
const m = (k, f) => med(res[k].map((x) => x[f]))
console.log(`${(bytes / 2 ** 20).toFixed(0)} MiB from head -c, medians of ${rounds} rounds (interleaved)${ab ? `, ${redone} runs redone (other processes took > ${OTHER_MAX} s of CPU)` : ''}`)
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
if (process.env.STREAM_JSON) writeFileSync(process.env.STREAM_JSON, JSON.stringify(res, null, 1))
