// Why the sandboxed rows of `npm run bench`'s heap case grow with the heap
// (issue 22): the same calls as the harness's heap child, on the same heap
// shape, medians of 5 rounds of 40 in rotated order, gc() before each block
// (gc=1) or not. Run it with and without V8's `--single-threaded-gc`.
//   node --max-old-space-size=3072 --expose-gc scripts/probes/heap-gc-sandbox.mjs 1 plain,full,ls 1
//   node --max-old-space-size=3072 --expose-gc --single-threaded-gc scripts/probes/heap-gc-sandbox.mjs 1 plain,full,ls 1
// Rows: plain spawnCall, full (sandbox: true), ls (Landlock + seccomp only),
// cp (child_process.spawn).
import { createRequire } from 'node:module'
import { spawn } from 'node:child_process'
const require = createRequire(import.meta.url)
const { spawnCall } = require('../../index.js')
const [gib = 1, which = 'plain,full,ls', useGc = '1'] = process.argv.slice(2)
const hold = []
while (process.memoryUsage().heapUsed < Number(gib) * 2 ** 30) for (let i = 0; i < 8192; i++) hold.push({ id: i, data: new Array(120).fill(i) })
globalThis.gc?.()
const all = {
  plain: () => spawnCall('/bin/true', []),
  full: () => spawnCall('/bin/true', [], { sandbox: true }),
  ls: async () => { process.env.EXEC_NATIVE_TEST_NO_USERNS = '1'; try { await spawnCall('/bin/true', [], { sandbox: true }) } finally { delete process.env.EXEC_NATIVE_TEST_NO_USERNS } },
  cp: () => new Promise((res) => spawn('/bin/true', []).on('close', res)),
}
const names = which.split(',')
const t = Object.fromEntries(names.map((n) => [n, []]))
for (const n of names) for (let i = 0; i < 3; i++) await all[n]()
for (let r = 0; r < 5; r++) for (let k = 0; k < names.length; k++) {
  const n = names[(r + k) % names.length]
  if (useGc === '1') globalThis.gc?.()
  for (let i = 0; i < 40; i++) { const s = performance.now(); await all[n](); t[n].push(performance.now() - s) }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1]
console.log(`${gib} GiB gc=${useGc}: ` + names.map((n) => `${n} ${med(t[n]).toFixed(3)}`).join('  '))
