// Where the time of one spawn goes (issue 28): the phases of sequential runs
// of /bin/true, from timestamps the addon takes when it is built with the
// `spawn-trace` feature (never in the product):
//
//   npx napi build --platform --release --features spawn-trace --output-dir /tmp/trace
//   node benchmark/spawn-trace.mjs /tmp/trace/exec-native.linux-x64-gnu.node [runs=2000] [--sandbox]
//
// Prints, per phase (the interval from the previous timestamp), the minimum
// and the median over the runs, in µs.
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'

const require = createRequire(import.meta.url)
const file = path.resolve(process.argv[2] ?? 'exec-native.linux-x64-gnu.node')
const runs = Number(process.argv[3] ?? 2000) || 2000
const addon = require(file)
if (typeof addon.spawnTrace !== 'function') {
  console.error(`spawn-trace: ${file} was built without the spawn-trace feature`)
  process.exit(2)
}
const contenders = {
  spawnCall: () => addon.spawnCall('/bin/true', []),
  captureCall: () => addon.captureCall('/bin/true', []),
  // the sandbox's host side (launch, the helper's arguments) between rt.mark
  // and rt.sandboxed; with namespaces the helper's run is in the child phases
  ...(process.argv.includes('--sandbox')
    ? {
        'spawnCall, sandbox: true': () => addon.spawnCall('/bin/true', [], { cwd: os.tmpdir(), sandbox: true }),
        'spawnCall, sandbox: landlock+seccomp only': async () => {
          process.env.EXEC_NATIVE_TEST_NO_USERNS = '1'
          try {
            return await addon.spawnCall('/bin/true', [], { cwd: os.tmpdir(), sandbox: true })
          } finally {
            delete process.env.EXEC_NATIVE_TEST_NO_USERNS
          }
        },
      }
    : {}),
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
console.log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}, ${runs} runs each, µs`)
for (const [name, call] of Object.entries(contenders)) {
  for (let i = 0; i < 50; i++) {
    await call()
    addon.spawnTraceResumed()
  }
  addon.spawnTrace()
  for (let i = 0; i < runs; i++) {
    const r = await call()
    addon.spawnTraceResumed()
    if (r.exitCode !== 0) throw new Error(`${name}: exit ${r.exitCode}`)
  }
  // one run: from js.enter to js.resumed; the events of a run in the order
  // they were taken (the sweep after a run may add none of these)
  const events = addon.spawnTrace()
  const phases = new Map()
  let run = null
  for (const [what, t] of events) {
    if (what === 'js.enter') run = [[what, t]]
    else if (run) run.push([what, t])
    if (what === 'js.resumed' && run) {
      for (let i = 1; i < run.length; i++) {
        const key = `${run[i - 1][0]} -> ${run[i][0]}`
        if (!phases.has(key)) phases.set(key, [])
        phases.get(key).push(run[i][1] - run[i - 1][1])
      }
      const total = 'total (js.enter -> js.resumed)'
      if (!phases.has(total)) phases.set(total, [])
      phases.get(total).push(t - run[0][1])
      run = null
    }
  }
  console.log(`\n${name}`)
  console.log('| phase | runs | min µs | median µs |')
  console.log('|:--|--:|--:|--:|')
  for (const [k, v] of phases) console.log(`| ${k} | ${v.length} | ${Math.min(...v).toFixed(1)} | ${median(v).toFixed(1)} |`)
}
