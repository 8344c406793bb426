// PTY start cost of ProcessManager: `node benchmark/pty-start.mjs [addon/index.js] [n]`.
// Sequential start + wait of `true` in a PTY; prints the mean per process and
// the p50/p95 of start() alone. Run it against two builds of the same profile
// (release vs release) to compare.
import { pathToFileURL } from 'node:url'
import { resolve } from 'node:path'

const addon = process.argv[2] ?? new URL('../index.js', import.meta.url).pathname
const N = Number(process.argv[3] ?? 200)
const { ProcessManager } = await import(pathToFileURL(resolve(addon)).href)
const m = new ProcessManager({ maxProcesses: 64, exitedRetentionMs: 100 })
const starts = []
const t0 = performance.now()
for (let i = 0; i < N; i++) {
  const a = performance.now()
  const { processId } = await m.start({ argv: ['true'], io: { type: 'pty', rows: 24, cols: 80 } })
  starts.push(performance.now() - a)
  await m.wait(processId, { timeoutMs: 10000 })
}
const total = performance.now() - t0
starts.sort((x, y) => x - y)
const q = (p) => starts[Math.min(N - 1, Math.floor(N * p))].toFixed(2)
console.log(`${addon}: ${N} PTY start+wait of true: ${(total / N).toFixed(2)} ms each; start() p50 ${q(0.5)} ms p95 ${q(0.95)} ms`)
await m.close()
