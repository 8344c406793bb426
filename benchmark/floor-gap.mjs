// How far a run of ours is from the spawn floor (benchmark/spawn-floor.py:
// posix_spawn + waitpid in a small Python loop) for a short child and a
// longer one, interleaved in rounds: /bin/true, and `bash -c true` through
// captureCall and through executeAndCapture (the language layer). Prints each
// row's median and minimum in ms and its distance from its own floor (issue
// 28: the gap grows with the child's run time).
//
//   node benchmark/floor-gap.mjs [rounds=20] [per round=20] [addon.node=./exec-native.linux-x64-gnu.node]
import { createRequire } from 'node:module'
import { spawn, execFileSync } from 'node:child_process'
import readline from 'node:readline'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const here = path.dirname(fileURLToPath(import.meta.url))
const rounds = Number(process.argv[2] ?? 20)
const per = Number(process.argv[3] ?? 20)
const a = require(path.resolve(process.argv[4] ?? path.join(here, '..', 'exec-native.linux-x64-gnu.node')))
const bash = execFileSync('bash', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim()

const py = spawn('python3', [path.join(here, 'spawn-floor.py')], { stdio: ['pipe', 'pipe', 'inherit'] })
const lines = []
let wake
readline.createInterface({ input: py.stdout }).on('line', (l) => {
  lines.push(l)
  wake?.()
})
async function floor(argv) {
  py.stdin.write(`${JSON.stringify({ op: 'seq', n: per, argv })}\n`)
  while (!lines.length) await new Promise((r) => (wake = r))
  return JSON.parse(lines.shift()).ms
}
async function ours(f) {
  const ms = []
  for (let i = 0; i < per; i++) {
    const t = process.hrtime.bigint()
    await f()
    ms.push(Number(process.hrtime.bigint() - t) / 1e6)
  }
  return ms
}
const median = (xs) => [...xs].sort((x, y) => x - y)[xs.length >> 1]

const rows = {
  'floor: /bin/true': [() => floor(['/bin/true'])],
  "captureCall('/bin/true')": [() => ours(() => a.captureCall('/bin/true', [])), 'floor: /bin/true'],
  'floor: bash -c true': [() => floor([bash, '-c', 'true'])],
  "captureCall(bash, ['-c', 'true'])": [() => ours(() => a.captureCall(bash, ['-c', 'true'])), 'floor: bash -c true'],
  "executeAndCapture('true', 'bash')": [() => ours(() => a.executeAndCapture('true', 'bash')), 'floor: bash -c true'],
}
const ms = Object.fromEntries(Object.keys(rows).map((k) => [k, []]))
for (const [k, [f]] of Object.entries(rows)) await f() // warm-up
for (let r = 0; r < rounds; r++) for (const [k, [f]] of Object.entries(rows)) ms[k].push(...(await f()))
py.stdin.end()
console.log(`| row | median ms | min ms | above its floor: median / min ms |\n|:--|--:|--:|--:|`)
for (const [k, [, base]] of Object.entries(rows)) {
  const gap = base ? `${(median(ms[k]) - median(ms[base])).toFixed(3)} / ${(Math.min(...ms[k]) - Math.min(...ms[base])).toFixed(3)}` : ''
  console.log(`| ${k} | ${median(ms[k]).toFixed(3)} | ${Math.min(...ms[k]).toFixed(3)} | ${gap} |`)
}
