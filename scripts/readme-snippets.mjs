#!/usr/bin/env node
// Runs the README's code blocks against the built package, so a snippet that
// does not run fails `npm test` (and CI, which runs `npm test`).
//
//   node scripts/readme-snippets.mjs [README.md] [--list]
//
// Needs a build: the addon (`npm run build` or `build:debug`) and dist/
// (`npm run build:host`).
//
// Each block runs in a fresh temporary project, as a user's code would:
// node_modules/exec-native is a link to this repository, so the block imports
// 'exec-native', 'exec-native/exec', ... by the package's name. The project
// has a package.json whose `test` and `dev` scripts stand in for a real
// project's (the README's agent examples run `npm test` and `npm run dev`).
//
//   ```js   an ES module (.mjs); CommonJS (.cjs) when it uses require() and
//           has no import statement
//   ```ts   TypeScript (.mts), run by node with tsx's loader (no type check)
//   ```sh   bash -e -o pipefail, each command line's status checked (so a
//           failure inside `a && b` counts), the package's bin on PATH
//   ```json parsed
// Other languages (toml) are not checked.
//
// A marker comment right above a block changes what is done with it:
//   <!-- snippet: skip (why) -->          not run; the reason is required
//   <!-- snippet: stdout-includes TEXT --> run, and its stdout must contain TEXT
// (several marker lines may stand above one block; a blank line may separate
// them from the fence)
// It also fails on a link to a file or heading that does not exist
// (`[x](#heading)`, `[x](docs/F.md#heading)`), which a moved section leaves.
//
// A block passes when its process exits 0 within the time limit (so it must
// also close what it started: a handle left open keeps it alive).
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const listOnly = args.includes('--list')
const readme = resolve(args.find((a) => !a.startsWith('--')) ?? join(repo, 'README.md'))
const name = basename(readme)
const LIMIT_MS = Number(process.env.SNIPPET_TIMEOUT_MS ?? 30_000)
const PARALLEL = Number(process.env.SNIPPET_PARALLEL ?? 3)
const RUN = new Set(['js', 'ts', 'sh', 'json'])

/** The fenced blocks of a Markdown text, each with its language, line and marker. */
export function extract(text) {
  const lines = text.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i])
    if (!open) continue
    const indent = open[1].length // a block inside a list item
    const start = i
    const body = []
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i].slice(Math.min(indent, lines[i].search(/\S|$/))))
    if (i >= lines.length) throw new Error(`${readme}:${start + 1}: unclosed code block`)
    // the marker lines right above the fence (a blank line between is allowed)
    const markers = []
    let j = start - 1
    if (j >= 0 && lines[j].trim() === '') j--
    for (; j >= 0; j--) {
      const m = /^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$/.exec(lines[j])
      if (!m) break
      markers.unshift(m[1])
    }
    blocks.push({ lang: open[2], line: start + 1, code: body.join('\n') + '\n', markers })
  }
  return blocks
}

/** What to do with a block: { action: 'run' | 'skip' | 'ignore', reason?, expect: [] }. */
export function plan(block) {
  const expect = []
  for (const m of block.markers) {
    const skip = /^skip\s*\((.+)\)$/.exec(m)
    if (skip) return { action: 'skip', reason: skip[1], expect }
    if (/^skip\b/.test(m)) throw new Error(`line ${block.line}: 'skip' needs a reason: <!-- snippet: skip (why) -->`)
    const inc = /^stdout-includes\s+(.+)$/.exec(m)
    if (!inc) throw new Error(`line ${block.line}: unknown snippet marker '${m}'`)
    if (!RUN.has(block.lang) || block.lang === 'json') throw new Error(`line ${block.line}: stdout-includes on a ${block.lang || 'plain'} block`)
    expect.push(inc[1])
  }
  return { action: RUN.has(block.lang) ? 'run' : 'ignore', expect }
}

/** GitHub's anchor for a heading. */
function slug(heading) {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')
}

function anchors(text) {
  const out = new Set()
  let fenced = false
  for (const line of text.split('\n')) {
    if (/^```/.test(line)) fenced = !fenced
    const h = !fenced && /^#{1,6}\s+(.*)$/.exec(line)
    if (h) out.add(slug(h[1]))
  }
  return out
}

/** Links to a missing file or heading: `[x](#a)`, `[x](docs/F.md)`, `[x](docs/F.md#a)`. */
export function brokenLinks(text, base) {
  const broken = []
  for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/.test(target)) continue // http:, https:, mailto:
    const [file, hash] = target.split('#')
    const path = file ? resolve(base, file) : null
    if (path && !existsSync(path)) { broken.push(target); continue }
    if (hash === undefined) continue
    const doc = path ? readFileSync(path, 'utf8') : text
    if (!anchors(doc).has(hash)) broken.push(target)
  }
  return broken
}

/**
 * A shell block with each command line's status checked: `set -e` ignores a
 * failure in `a && b`, which the README's first command is. Blocks with
 * heredocs or compound commands are left to `set -e` alone.
 */
export function checkedShell(code) {
  const lines = code.replace(/\\\n/g, ' ').split('\n')
  if (lines.some((l) => /<<|^\s*(if|for|while|case|until)\b|[{(|]\s*$|\b(do|then)\s*$/.test(l))) return code
  return lines
    .map((l, i) => (l.trim() === '' || l.trim().startsWith('#') ? l
      : `${l}\n__rc=$?; if [ $__rc -ne 0 ]; then echo "snippet line ${i + 1} failed with $__rc" >&2; exit $__rc; fi`))
    .join('\n')
}

function isCommonJs(code) {
  return /\brequire\(/.test(code) && !/^\s*import\s[^(]/m.test(code)
}

function project() {
  const dir = mkdtempSync(join(tmpdir(), 'exec-native-snippet-'))
  mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true })
  symlinkSync(repo, join(dir, 'node_modules', 'exec-native'), 'dir')
  symlinkSync(join(repo, 'bin', 'exec-native.mjs'), join(dir, 'node_modules', '.bin', 'exec-native'))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: 'snippet-project',
    private: true,
    scripts: {
      test: 'node -e "console.log(\'3 tests passed\')"',
      dev: 'node -e "setInterval(() => console.log(\'dev server: ready\'), 1000)"',
    },
  }, null, 2))
  return dir
}

function run(cmd, argv, cwd) {
  return new Promise((done) => {
    const child = spawn(cmd, argv, {
      cwd,
      env: { ...process.env, PATH: `${join(cwd, 'node_modules', '.bin')}:${process.env.PATH}` },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (s) => { stdout += s })
    child.stderr.setEncoding('utf8').on('data', (s) => { stderr += s })
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try { process.kill(-child.pid, 'SIGKILL') } catch {}
    }, LIMIT_MS)
    child.on('error', (err) => { clearTimeout(timer); done({ code: -1, stdout, stderr: `${stderr}${err.message}`, timedOut }) })
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      try { process.kill(-child.pid, 'SIGKILL') } catch {} // anything the block left behind
      done({ code: code ?? signal, stdout, stderr, timedOut })
    })
  })
}

const tsxLoader = import.meta.resolve('tsx')

async function runBlock(block, p) {
  if (block.lang === 'json') {
    try { JSON.parse(block.code); return { ok: true } } catch (e) { return { ok: false, why: `invalid JSON: ${e.message}` } }
  }
  const dir = project()
  try {
    let r
    if (block.lang === 'sh') {
      writeFileSync(join(dir, 'snippet.sh'), checkedShell(block.code))
      r = await run('bash', ['-eo', 'pipefail', 'snippet.sh'], dir)
    } else {
      const file = block.lang === 'ts' ? 'snippet.mts' : isCommonJs(block.code) ? 'snippet.cjs' : 'snippet.mjs'
      writeFileSync(join(dir, file), block.code)
      const loader = block.lang === 'ts' ? ['--import', tsxLoader] : []
      r = await run(process.execPath, [...loader, file], dir)
    }
    if (r.timedOut) return { ok: false, why: `still running after ${LIMIT_MS} ms`, ...r }
    if (r.code !== 0) return { ok: false, why: `exited with ${r.code}`, ...r }
    const missing = p.expect.filter((e) => !r.stdout.includes(e))
    if (missing.length) return { ok: false, why: `stdout lacks ${missing.map((e) => JSON.stringify(e)).join(', ')}`, ...r }
    return { ok: true, ...r }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function main() {
  const text = readFileSync(readme, 'utf8')
  const blocks = extract(text).map((b) => ({ ...b, plan: plan(b) }))
  const broken = brokenLinks(text, dirname(readme))
  for (const link of broken) console.log(`FAIL ${name}: broken link (${link})`)
  if (broken.length) process.exitCode = 1
  const torun = blocks.filter((b) => b.plan.action === 'run')
  const skipped = blocks.filter((b) => b.plan.action === 'skip')
  if (listOnly) {
    for (const b of blocks) console.log(`${b.line}\t${b.lang || '-'}\t${b.plan.action}${b.plan.reason ? `\t${b.plan.reason}` : ''}`)
    return
  }
  const t0 = performance.now()
  const results = new Map()
  const queue = [...torun]
  await Promise.all(Array.from({ length: PARALLEL }, async () => {
    for (let b = queue.shift(); b; b = queue.shift()) {
      const s = performance.now()
      const r = await runBlock(b, b.plan)
      results.set(b, { ...r, ms: performance.now() - s })
    }
  }))
  let failed = 0
  for (const b of torun) {
    const r = results.get(b)
    console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${name}:${b.line} ${b.lang} (${Math.round(r.ms)} ms)${r.ok ? '' : `: ${r.why}`}`)
    if (!r.ok) {
      failed++
      for (const [stream, text] of [['stdout', r.stdout], ['stderr', r.stderr]]) {
        if (text) console.log(`  ${stream}:\n${text.trimEnd().replace(/^/gm, '    ')}`)
      }
    }
  }
  for (const b of skipped) console.log(`skip ${name}:${b.line} ${b.lang}: ${b.plan.reason}`)
  const ignored = blocks.length - torun.length - skipped.length
  console.log(`${torun.length - failed} of ${torun.length} blocks ran, ${skipped.length} skipped, ${ignored} not checked (${[...new Set(blocks.filter((b) => b.plan.action === 'ignore').map((b) => b.lang || 'plain'))].join(', ') || 'none'}), ${failed} failed, in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  if (failed) process.exitCode = 1
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((e) => { console.error(`readme-snippets: ${e.message}`); process.exitCode = 1 })
}
