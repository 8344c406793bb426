// Capture throughput of two builds of the addon in one process, interleaved
// (A B C D, the order rotated each round), against the two pipe limits
// measured in the same run. For a change to the capture path: keep the .node
// of the build before it, build, and compare.
//
//   cp exec-native.linux-x64-gnu.node /tmp/before.node    # before the change
//   npm run build                                         # after
//   node benchmark/capture-ab.mjs /tmp/before.node [rounds=9] [bytes=1073741824]
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(import.meta.url)
const [beforePath, roundsArg, bytesArg] = process.argv.slice(2)
if (!beforePath) throw new Error('usage: node benchmark/capture-ab.mjs <before.node> [rounds] [bytes]')
const rounds = Number(roundsArg ?? 9)
const bytes = Number(bytesArg ?? 2 ** 30)
const before = require(path.resolve(beforePath))
const after = require('../index.js')

function sh(script) {
  return new Promise((resolve, reject) => {
    const c = spawn('sh', ['-c', script], { stdio: 'ignore' })
    c.on('error', reject)
    c.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${script}: ${code}`))))
  })
}
// python3's real path: a pyenv shim in PATH is a shell script (~100 ms a start)
const python = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).stdout.trim() || 'python3'
const spliceToNull = [
  'import os, fcntl',
  'fcntl.fcntl(0, fcntl.F_SETPIPE_SZ, 1 << 20)',
  'out = os.open("/dev/null", os.O_WRONLY)',
  'while os.splice(0, out, 1 << 30): pass',
].join('\n')
// host CPU (all threads: user + system) per capture
const cpuOf = new Map()
async function capture(addon, name) {
  const c0 = process.cpuUsage()
  const r = await addon.executeAndCapture(`head -c ${bytes} /dev/zero`, 'bash')
  const { user, system } = process.cpuUsage(c0)
  if (r.stdoutBytes !== bytes || !r.truncated || r.exitCode !== 0) throw new Error(`capture (${name}): ${JSON.stringify({ ...r, stdout: r.stdout.length })}`)
  if (!cpuOf.has(name)) cpuOf.set(name, [])
  cpuOf.get(name).push((user + system) / 1e6)
}
const contenders = [
  ['pipe limit: head | cat > /dev/null', () => sh(`head -c ${bytes} /dev/zero | cat > /dev/null`)],
  ['zero-copy limit: head | splice > /dev/null (1 MiB pipe)', () => sh(`head -c ${bytes} /dev/zero | ${python} -S -c '${spliceToNull}'`)],
  ['executeAndCapture, before', () => capture(before, 'executeAndCapture, before')],
  ['executeAndCapture, after', () => capture(after, 'executeAndCapture, after')],
]
const ms = new Map(contenders.map(([n]) => [n, []]))
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < contenders.length; k++) {
    const [name, op] = contenders[(r + k) % contenders.length]
    const t = performance.now()
    await op()
    ms.get(name).push(performance.now() - t)
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const m = (n) => median(ms.get(n))
const pipe = m(contenders[0][0])
const zero = m(contenders[1][0])
console.log(`${(bytes / 2 ** 30).toFixed(2)} GiB, ${rounds} rounds interleaved, medians`)
console.log('| contender | median s | GB/s | of pipe limit | of zero-copy limit | x before | host CPU s |')
console.log('|:--|--:|--:|--:|--:|--:|--:|')
for (const [n] of contenders) {
  const s = m(n) / 1000
  console.log(`| ${n} | ${s.toFixed(3)} | ${(bytes / 1e9 / s).toFixed(2)} | ${(pipe / m(n)).toFixed(2)} | ${(zero / m(n)).toFixed(2)} | ${(m('executeAndCapture, before') / m(n)).toFixed(2)} | ${cpuOf.has(n) ? median(cpuOf.get(n)).toFixed(3) : ''} |`)
}
