// One streaming run (`head -c N /dev/zero` to an output callback) measured in
// a fresh Node process: throughput, event-loop delay, peak RSS growth, CPU of
// the host and of its JS thread, callback rate and chunk sizes.
//
// Each run is preceded, in its process, by a warm-up run of the same kind
// (an eighth of the bytes), so the contender is measured warm, in its own
// steady state. Why a fresh process per run: a run leaves state behind that the next one
// pays for, whatever the garbage collection between them does. The clearest
// case is glibc's heap: after exec-native's string runs, the Buffers of a
// later Buffer run (ours or Node's) were trimmed back to the kernel after
// every collection and faulted in again, ~250000 page faults and 2x the JS
// thread's CPU per GiB, where the same run after another Buffer run took
// ~3000 (docs/PERFORMANCE.md, "Streaming in fresh processes"). Used by case
// 3b of bench.mjs and by stream.mjs.
//
//   node --expose-gc benchmark/stream-child.mjs --child ADDON KIND --bytes N
//     ADDON: a path to the addon (index.js or a .node), or - for Node alone
//     KIND: spawnCall-str, spawnCall-buf, spawn-str, spawn-buf, node-str, node-buf
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = fileURLToPath(import.meta.url)

/** One run of `kind`; `on` counts what arrives. Resolves when every byte came. */
export function start(addon, kind, bytes, on) {
  const cmd = ['head', ['-c', String(bytes), '/dev/zero']]
  const node = (utf8) =>
    new Promise((res, rej) => {
      const c = spawn(cmd[0], cmd[1], { stdio: ['ignore', 'pipe', 'inherit'] })
      if (utf8) c.stdout.setEncoding('utf8')
      c.stdout.on('data', on)
      c.on('error', rej)
      c.on('close', res)
    })
  switch (kind) {
    case 'spawnCall-str':
      return addon.spawnCall(cmd[0], cmd[1], {}, on)
    case 'spawnCall-buf':
      return addon.spawnCall(cmd[0], cmd[1], { encoding: 'buffer' }, on)
    case 'spawn-str':
      return addon.spawn(cmd[0], cmd[1], { onStdout: on }).exited
    case 'spawn-buf':
      return addon.spawn(cmd[0], cmd[1], { onStdout: on, encoding: 'buffer' }).exited
    case 'node-str':
      return node(true)
    case 'node-buf':
      return node(false)
    default:
      throw new Error(`stream-child: unknown kind ${kind}`)
  }
}

/** CPU seconds of this process's JS thread (its task has the process id). */
export function jsThreadCpu() {
  const st = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8')
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12])) / 100
}
export const hwm = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) * 1024

/** Measure one run in this process. */
export async function measure(addon, kind, bytes) {
  globalThis.gc?.()
  const base = process.memoryUsage.rss()
  writeFileSync('/proc/self/clear_refs', '5') // VmHWM from here
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  let got = 0
  let calls = 0
  let maxChunk = 0
  let partial = 0
  const cpu0 = process.cpuUsage()
  const js0 = jsThreadCpu()
  const t0 = performance.now()
  await start(addon, kind, bytes, (d) => {
    got += d.length
    calls++
    if (d.length > maxChunk) maxChunk = d.length
    // (a chunk of whole characters may end up to 3 bytes short of 64 KiB)
    if (d.length < 65533) partial++
  })
  const s = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const js = jsThreadCpu() - js0
  h.disable()
  if (got !== bytes) throw new Error(`stream-child: ${kind} got ${got} of ${bytes} bytes`)
  const perGiB = 2 ** 30 / bytes
  return {
    seconds: s,
    gbps: bytes / s / 1e9,
    p99: h.percentile(99) / 1e6,
    rss: (hwm() - base) / 2 ** 20,
    cps: calls / s,
    chunk: calls ? bytes / calls / 1024 : 0,
    maxChunk: maxChunk / 1024,
    partialPerSec: partial / s,
    cpu: ((cpu.user + cpu.system) / 1e6) * perGiB,
    js: js * perGiB,
  }
}

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

/** Other processes may take this much CPU (s) during a run before it is redone. */
export const OTHER_MAX = 0.12

/**
 * One run of `kind` in a fresh `node --expose-gc` process that loads
 * `addonPath` (`-`: none). Waits for an idle machine first (under 0.05 s of
 * CPU in 0.5 s, for up to 20 s; a machine busy longer is measured as it is)
 * and redoes the run (up to 8 times) when other processes took more than
 * OTHER_MAX of CPU during it: on 2 shared cores a build beside the bench
 * moved medians by +-15%. Returns the measurement and how often it was
 * redone.
 */
export async function runInChild(addonPath, kind, bytes) {
  for (let attempt = 0; ; attempt++) {
    for (let i = 0; i < 40; i++) {
      const b = machineBusy()
      await new Promise((r) => setTimeout(r, 500))
      if (machineBusy() - b < 0.05) break
    }
    const b0 = machineBusy()
    const c0 = childrenCpu()
    const r = spawnSync(process.execPath, ['--expose-gc', here, '--child', addonPath, kind, '--bytes', String(bytes)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const other = machineBusy() - b0 - (childrenCpu() - c0)
    if (r.status !== 0) throw new Error(`stream-child: ${kind} failed (${r.status ?? r.signal})`)
    if (other > OTHER_MAX && attempt < 8) continue
    return { ...JSON.parse(r.stdout), redone: attempt }
  }
}

if (process.argv[1] === here && process.argv[2] === '--child') {
  const [, , , addonPath, kind] = process.argv
  const i = process.argv.indexOf('--bytes')
  const bytes = Number(i > 0 ? process.argv[i + 1] : 2 ** 30)
  const addon = addonPath === '-' ? null : require(addonPath)
  // warm up with a shorter run of the same kind: the JIT has compiled the
  // contender's JavaScript (Node's streams are mostly JavaScript) and the
  // heap is in this contender's own steady state, not a cold one
  await measure(addon, kind, Math.max(2 ** 20, Math.round(bytes / 8)))
  console.log(JSON.stringify(await measure(addon, kind, bytes)))
  process.exit(0)
}
