// The synchronous part of executeAndCapture for a 1.7 MB TypeScript cell (the
// strip must not run on the JS thread).   node benchmark/ts-strip-stall.cjs [path/to/index.js]
const addon = require(process.argv[2] ?? '../index.js')
const line = '{ const a: number = 1; let b: string = "x"; const f = (n: number): number => n + a; b += f(1) }\n'
const code = line.repeat(Math.ceil(1.7e6 / line.length)) + 'console.log(42)'
;(async () => {
  for (let i = 0; i < 3; i++) {
    const t = performance.now()
    const p = addon.executeAndCapture(code, 'typescript', { cwd: require('node:fs').mkdtempSync(require('node:path').join(require('node:os').tmpdir(), 'ts-stall-')) })
    const sync = performance.now() - t
    const r = await p
    console.log(`synchronous part of executeAndCapture (1.7 MB TypeScript): ${sync.toFixed(1)} ms, total ${(performance.now() - t).toFixed(0)} ms, stdout ${JSON.stringify(r.stdout)}`)
  }
})()
