// Session figures: start time, per-execution round trip (median / p95), with
// the debug or release build that `index.js` loads. Usage: node benchmark/session.mjs
import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const { NodeSession, PythonSession, ShellSession } = require('../index.js')

const N = 200
const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]
async function measure(name, start, code) {
  const t0 = performance.now()
  const s = await start()
  const startMs = performance.now() - t0
  const times = []
  for (let i = 0; i < N; i++) {
    const t = performance.now()
    const r = await s.execute(code(i))
    if (r.status !== 'ok') throw new Error(`${name}: ${r.status}`)
    times.push(performance.now() - t)
  }
  await s.close()
  console.log(`${name}: start ${startMs.toFixed(1)} ms; ${N} executions: median ${q(times, 0.5).toFixed(2)} ms, p95 ${q(times, 0.95).toFixed(2)} ms`)
}
await measure('PythonSession', () => PythonSession.start(), (i) => `x = ${i}\nprint(x)\nx * 2`)
await measure('NodeSession', () => NodeSession.start(), (i) => `let x = ${i}\nconsole.log(x)\nx * 2`)
await measure('ShellSession', () => ShellSession.start(), (i) => `echo ${i}`)
