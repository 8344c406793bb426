// The spawn, capture, streaming and PTY rows of two builds of the addon in one run,
// interleaved (the order rotated each round), medians and the ratio of
// medians. For a change that touches every spawn path: keep the .node of the
// build before it, build, and compare. Each build runs in its own child Node
// process (two copies of the addon in one process share the pid in their run
// marks, so one copy's cleanup would signal the other's runs); a child times
// its own calls.
//
//   cp exec-native.linux-x64-gnu.node /tmp/before.node    # before the change
//   npm run build                                         # after
//   node benchmark/ab.mjs /tmp/before.node [rounds=7] [after=./exec-native.linux-x64-gnu.node]
//   AB_ONLY=<regexp>: only the cases whose name matches
import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'
import path from 'node:path'
import os from 'node:os'

const require = createRequire(import.meta.url)

/** `n` calls of `one` at once; the first failure's result, else exit 0. */
async function burst(n, one) {
  const rs = await Promise.all(Array.from({ length: n }, one))
  return rs.find((r) => r.exitCode !== 0) ?? { exitCode: 0 }
}

/** Each case: a call of the addon, run `count` times per round. */
const cases = {
  'spawnCall /bin/true': { count: 200, run: (a) => a.spawnCall('/bin/true', []) },
  'spawn() handle /bin/true': { count: 200, run: (a) => a.spawn('/bin/true', []).exited },
  'executeAndCapture bash echo': { count: 100, run: (a) => a.executeAndCapture('echo hi', 'bash') },
  'captureCall with options': {
    count: 200,
    run: (a) =>
      a.captureCall('/bin/true', [], { env: { A: '1' }, envDenylist: ['*_TOKEN'], timeout: 5000, maxOutputBytes: 4096 }),
  },
  // the synchronous part of a call (the event-loop stall), not its wall time
  'spawnCall stall (synchronous part)': { count: 200, stall: true, run: (a) => a.spawnCall('/bin/true', []) },
  'captureCall stall (synchronous part)': { count: 200, stall: true, run: (a) => a.captureCall('/bin/true', []) },
  'captureCall /bin/true': { count: 200, run: (a) => a.captureCall('/bin/true', []) },
  // issue 28's concurrency row: the wall time of 200 spawns at once
  '200 spawnCall /bin/true at once': { count: 9, run: (a) => burst(200, () => a.spawnCall('/bin/true', [])) },
  '200 captureCall /bin/true at once': { count: 9, run: (a) => burst(200, () => a.captureCall('/bin/true', [])) },
  'capture 256 MiB (cap 1 MiB)': {
    count: 3,
    run: (a) => a.executeAndCapture(`head -c ${256 << 20} /dev/zero`, 'bash'),
  },
  'capture 1 GiB (cap 1 MiB)': {
    count: 1,
    run: (a) => a.executeAndCapture(`head -c ${1 << 30} /dev/zero`, 'bash'),
  },
  // every chunk handed to JavaScript as a string
  'streaming 64 MiB of text to a callback': {
    count: 2,
    run: async (a) => {
      let n = 0
      const r = await a.spawnCall('sh', ['-c', `yes abcdefghijklmnopqrstuvwxyz0123456789 | head -c ${64 << 20}`], {}, (s) => {
        n += s.length
      })
      return n === 64 << 20 ? r : { exitCode: -1, error: `streamed ${n} bytes` }
    },
  },
  // a PTY run to its end (every byte read, the exit seen)
  'PTY run: seq 1 20000': {
    count: 5,
    run: async (a) => {
      const m = new a.ProcessManager()
      let n = 0
      let closed
      const done = new Promise((resolve) => (closed = resolve))
      await m.start({ argv: ['seq', '1', '20000'], io: { type: 'pty', rows: 24, cols: 80 } }, (e) => {
        if (e.type === 'output') n += e.data?.length ?? 0
        if (e.type === 'exited') closed(e.exitCode)
      })
      const code = await done
      await m.close()
      // seq's 108,894 bytes, each newline a CRLF through the terminal
      return code === 0 && n >= 108894 ? { exitCode: 0 } : { exitCode: -1, error: `exit ${code}, ${n} bytes` }
    },
  },
}

if (process.argv[2] === '--serve') {
  const addon = require(path.resolve(process.argv[3]))
  process.on('message', async ({ name }) => {
    const c = cases[name]
    const times = []
    for (let i = 0; i < c.count; i++) {
      const t = performance.now()
      const p = c.run(addon)
      const sync = performance.now() - t
      const r = await p
      times.push(c.stall ? sync : performance.now() - t)
      if (r.exitCode !== 0) {
        process.send({ error: `${name}: exit ${r.exitCode} ${r.error ?? ''}` })
        return
      }
    }
    times.sort((x, y) => x - y)
    process.send({ ms: times[times.length >> 1], min: times[0] })
  })
  process.send({ ready: true })
} else {
  const before = process.argv[2]
  if (!before) {
    console.error('usage: node benchmark/ab.mjs <before.node> [rounds=7] [after.node]')
    process.exit(2)
  }
  const rounds = Number(process.argv[3] ?? 7)
  console.log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} at the start`)
  const after = process.argv[4] ?? path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'exec-native.linux-x64-gnu.node')
  const me = fileURLToPath(import.meta.url)
  const builds = { before, after }
  const children = {}
  for (const [label, file] of Object.entries(builds)) {
    const child = fork(me, ['--serve', file], { stdio: 'inherit' })
    await new Promise((resolve) => child.once('message', resolve))
    children[label] = child
  }
  const ask = (child, name) =>
    new Promise((resolve, reject) => {
      child.once('message', (m) => (m.error ? reject(new Error(m.error)) : resolve(m)))
      child.send({ name })
    })
  const results = {}
  const only = process.env.AB_ONLY ? new RegExp(process.env.AB_ONLY) : null
  for (const name of Object.keys(cases).filter((n) => !only || only.test(n))) {
    results[name] = { before: [], after: [] }
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 ? ['after', 'before'] : ['before', 'after']
      for (const label of order) results[name][label].push(await ask(children[label], name))
    }
  }
  for (const c of Object.values(children)) c.kill()
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
  const min = (xs) => Math.min(...xs)
  console.log(`load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} at the end`)
  console.log(`| case (median of ${rounds} rounds, each a median per call; min: the fastest call of all rounds) | before ms | after ms | after / before | before min | after min |`)
  console.log('|---|---|---|---|---|---|')
  for (const [name, r] of Object.entries(results)) {
    const b = med(r.before.map((x) => x.ms))
    const a = med(r.after.map((x) => x.ms))
    const bm = min(r.before.map((x) => x.min))
    const am = min(r.after.map((x) => x.min))
    console.log(`| ${name} | ${b.toFixed(3)} | ${a.toFixed(3)} | ${(a / b).toFixed(2)} | ${bm.toFixed(3)} | ${am.toFixed(3)} |`)
  }
}
