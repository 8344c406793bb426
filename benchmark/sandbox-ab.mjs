// A/B of the sandboxed spawn between two builds (the addon and its sandbox
// helper each): child Node processes alternate between the builds (the
// order swapped each round); each times 200 `spawnCall('/bin/true')` plain
// and 200 with `sandbox: true` (the full boundary), in the temp directory,
// interleaved in batches of 50. Prints min / p25 / median per build and row,
// and the full boundary's cost over plain by the median.
//
//   node benchmark/sandbox-ab.mjs <before.node> <before-helper> [after.node] [after-helper] [rounds=6]
//
// The helper of a build is `exec-native-sandbox` beside its `.node`
// (`node scripts/build-helper.mjs` puts it there); keep a copy of both from
// before a change.
import { fork } from 'node:child_process'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

if (process.env.AB_CHILD) {
  const m = { exports: {} }
  process.dlopen(m, process.env.AB_ADDON)
  const a = m.exports
  process.chdir(os.tmpdir())
  const n = 200
  const out = { plain: [], full: [] }
  for (let i = 0; i < 5; i++) {
    await a.spawnCall('/bin/true', [], { sandbox: true })
    await a.spawnCall('/bin/true', [])
  }
  for (let r = 0; r < 4; r++)
    for (const k of ['plain', 'full'])
      for (let i = 0; i < n / 4; i++) {
        const s = performance.now()
        const x = await a.spawnCall('/bin/true', [], k === 'full' ? { sandbox: true } : {})
        out[k].push(performance.now() - s)
        if (x.exitCode !== 0 || (k === 'full' && x.sandbox?.applied !== true)) throw new Error(`sandbox-ab: ${k}: ${JSON.stringify(x)}`)
      }
  process.send(out)
  process.exit(0)
}

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const [beforeNode, beforeHelper, afterNode = path.join(root, 'exec-native.linux-x64-gnu.node'), afterHelper = path.join(root, 'exec-native-sandbox'), roundsArg = '6'] = process.argv.slice(2)
if (!beforeNode || !beforeHelper) {
  console.error('usage: node benchmark/sandbox-ab.mjs <before.node> <before-helper> [after.node] [after-helper] [rounds=6]')
  process.exit(2)
}
const builds = { before: [beforeNode, beforeHelper], after: [afterNode, afterHelper] }
const all = { before: { plain: [], full: [] }, after: { plain: [], full: [] } }
const rounds = Number(roundsArg)
for (let r = 0; r < rounds; r++)
  for (const b of r % 2 ? ['after', 'before'] : ['before', 'after']) {
    const c = fork(fileURLToPath(import.meta.url), [], {
      env: { ...process.env, AB_CHILD: '1', AB_ADDON: path.resolve(builds[b][0]), EXEC_NATIVE_SANDBOX_HELPER: path.resolve(builds[b][1]) },
    })
    const got = await new Promise((res, rej) => {
      c.on('message', res)
      c.on('exit', (code) => code && rej(new Error(`sandbox-ab: the ${b} child exited with ${code}`)))
    })
    for (const k in got) all[b][k].push(...got[k])
  }
const q = (a, p) => [...a].sort((x, y) => x - y)[Math.floor(p * (a.length - 1))]
for (const b in all)
  for (const k in all[b]) {
    const s = all[b][k]
    console.log(`${b.padEnd(7)} ${k.padEnd(6)} n ${s.length} min ${q(s, 0).toFixed(3)} p25 ${q(s, 0.25).toFixed(3)} median ${q(s, 0.5).toFixed(3)} ms`)
  }
const cost = (b) => (q(all[b].full, 0.5) - q(all[b].plain, 0.5)).toFixed(3)
console.log(`full boundary - plain, by the median: before ${cost('before')} ms, after ${cost('after')} ms`)
