// Capture throughput of two builds of the addon in one run, interleaved
// (A B C D, the order rotated each round), against the two pipe limits
// measured in the same run. For a change to the capture path: keep the .node
// of the build before it, build, and compare. Each build runs in its own
// child Node process (two copies of the addon in one process share the pid
// in their run marks and count runs alike, so one copy's cleanup would
// signal the other's runs); a child times its own captures.
//
//   cp exec-native.linux-x64-gnu.node /tmp/before.node    # before the change
//   npm run build                                         # after
//   node benchmark/capture-ab.mjs /tmp/before.node [rounds=9] [bytes=1073741824]
import { spawn, spawnSync, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(import.meta.url)

if (process.argv[2] === '--serve') {
  // a child: capture with one build when asked, answer the time and the CPU
  const addon = require(process.argv[3])
  process.on('message', async ({ bytes }) => {
    const c0 = process.cpuUsage()
    const t = performance.now()
    const r = await addon.executeAndCapture(`head -c ${bytes} /dev/zero`, 'bash')
    const ms = performance.now() - t
    const { user, system } = process.cpuUsage(c0)
    const ok = r.stdoutBytes === bytes && r.truncated && r.exitCode === 0
    process.send({ ms, cpu: (user + system) / 1e6, error: ok ? null : JSON.stringify({ ...r, stdout: r.stdout.length }) })
  })
  process.on('disconnect', () => process.exit(0))
} else {
  await main()
}

async function main() {
  const [beforePath, roundsArg, bytesArg] = process.argv.slice(2)
  if (!beforePath) throw new Error('usage: node benchmark/capture-ab.mjs <before.node> [rounds] [bytes]')
  const rounds = Number(roundsArg ?? 9)
  const bytes = Number(bytesArg ?? 2 ** 30)
  const self = fileURLToPath(import.meta.url)
  const server = (addonPath) => {
    const child = fork(self, ['--serve', addonPath])
    return child
  }
  const before = server(path.resolve(beforePath))
  const after = server(path.resolve(path.dirname(self), '../index.js'))

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
  // host CPU (all threads of the child host: user + system) per capture
  const cpuOf = new Map()
  function capture(child, name) {
    return new Promise((resolve, reject) => {
      child.once('message', ({ ms, cpu, error }) => {
        if (error) return reject(new Error(`capture (${name}): ${error}`))
        if (!cpuOf.has(name)) cpuOf.set(name, [])
        cpuOf.get(name).push(cpu)
        resolve(ms)
      })
      child.send({ bytes })
    })
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
      const v = await op()
      ms.get(name).push(typeof v === 'number' ? v : performance.now() - t)
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
  before.disconnect()
  after.disconnect()
}
