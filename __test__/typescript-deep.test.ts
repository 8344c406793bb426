// No TypeScript input may crash the host (issue 12, item 1): deeply nested
// code used to overflow the JS thread's stack in the in-process type strip
// (SIGSEGV, 5 of 5; 1,500 deep in a worker). Each case runs in a child host
// process, so a crash fails the test instead of killing vitest's worker.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

const addon = join(__dirname, '..', 'index.js')

const shapes: Record<string, string> = {
  parens: "'const x: number = ' + '('.repeat(3000) + '1' + ')'.repeat(3000) + '; console.log(x)'",
  brackets: "'const x = ' + '['.repeat(3000) + '1' + ']'.repeat(3000) + '; console.log(x.flat(Infinity)[0])'",
  generics: "'let x: ' + 'Array<'.repeat(3000) + 'number' + '>'.repeat(3000) + ' = []; console.log(x.length)'",
  unaryMinus: "'const x = ' + '-'.repeat(100000) + '1; console.log(x)'",
  chainedCalls: "'const x = [1]' + '.concat()'.repeat(50000) + '; console.log(x.length)'",
}

/** Run `body` in a fresh node host (main thread, or in a worker of it) and return its outcome. */
function host(body: string, inWorker: boolean) {
  const dir = mkdtempSync(join(tmpdir(), 'exec-native-deep-'))
  const script = join(dir, 'host.cjs')
  const run = `
const addon = require(${JSON.stringify(addon)})
;(async () => {
  ${body}
})().then((out) => report(JSON.stringify(out)), (e) => report(JSON.stringify({ thrown: String(e) })))
`
  writeFileSync(
    script,
    inWorker
      ? `const { Worker, isMainThread, parentPort } = require('node:worker_threads')
if (isMainThread) {
  const w = new Worker(__filename)
  w.on('message', (m) => { console.log(m); process.exit(0) })
  w.on('error', (e) => { console.log(JSON.stringify({ workerError: String(e) })); process.exit(0) })
} else {
  const report = (s) => parentPort.postMessage(s)
  ${run}
}`
      : `const report = (s) => console.log(s)\n${run}`,
  )
  const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 120_000, cwd: dir })
  return { status: r.status, signal: r.signal, out: r.stdout.trim(), err: r.stderr }
}

describe('deeply nested TypeScript', () => {
  for (const inWorker of [false, true]) {
    for (const [name, make] of Object.entries(shapes)) {
      it(`${name} ${inWorker ? 'in a worker' : 'on the main thread'}: the host lives, 'auto' runs it on tsx, 'strip' is EINVAL`, () => {
        const r = host(
          `const code = ${make}
  const auto = await addon.executeAndCapture(code, 'typescript', { cwd: require('node:os').tmpdir(), timeout: 5000 })
  const strip = await addon.executeAndCapture(code, 'typescript', { cwd: require('node:os').tmpdir(), typescript: 'strip' })
  return { auto: { exitCode: auto.exitCode, errorCode: auto.errorCode ?? null }, strip: { errorCode: strip.errorCode, error: strip.error } }`,
          inWorker,
        )
        expect(r.signal).toBeNull()
        expect(r.status).toBe(0)
        const out = JSON.parse(r.out)
        expect(out.thrown).toBeUndefined()
        expect(out.workerError).toBeUndefined()
        // tsx (esbuild) ran it in its own process: whatever it made of it, the run has a result
        expect(typeof out.auto.exitCode).toBe('number')
        expect(out.strip.errorCode).toBe('EINVAL')
        expect(out.strip.error).toMatch(/nested too deeply/)
      })
    }
  }

  it('executeStreaming survives it too', () => {
    const r = host(
      `const code = ${shapes.parens}
  const s = await addon.executeStreaming(code, 'typescript', { cwd: require('node:os').tmpdir(), typescript: 'strip' })
  return { errorCode: s.errorCode }`,
      false,
    )
    expect(r.signal).toBeNull()
    expect(JSON.parse(r.out)).toEqual({ errorCode: 'EINVAL' })
  })
})
