#!/usr/bin/env node
// The layering of crates/exec-core, checked (issue 24, step 4; `npm run lint`
// runs this). It reads every `crate::` and `super::` path of the crate's
// non-test code, builds the graph of its modules and fails, naming the edge
// and the file and line it comes from, when
//   - the top-level modules (`process`, `limits`, `session`, ...) form a cycle;
//   - the submodules of one top-level module (`process::registry`,
//     `process::reaper`, ...) form a cycle;
//   - a module imports one of a higher layer (LAYERS below, the list
//     docs/ARCHITECTURE.md shows: a module may use its own layer and those
//     below it).
// Test code (`#[cfg(test)]` items and the files they declare) is left out: a
// test may drive a lower layer from above.
//
// It also checks the one layout of unit tests (issue 24, step 5), in every
// Rust crate of the workspace: a file module keeps its tests inline, in a
// `#[cfg(test)] mod tests { ... }` at its end; a folder module (`mod.rs`)
// keeps them in `tests.rs` beside it (`#[cfg(test)] mod tests;`). No other
// name (`mod tests_x`) and no inline tests in a `mod.rs`.
//
//   node scripts/check-layers.mjs          check (exit 1 on a violation)
//   node scripts/check-layers.mjs --graph  print the edges too
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const src = join(root, 'crates/exec-core/src')

// Top to bottom. A module belongs to the first row that names it (its
// top-level name, or `top::sub` for the process layer's own order) and may
// use modules of its own row and those below. Every top-level module, and
// every submodule of one whose submodules are ordered (`process`), must be in
// a row, so a new one is placed on purpose.
export const LAYERS = [
  ['entry points', ['server', 'mcp', 'hostguard']],
  ['features', ['command', 'session', 'manager', 'language', 'ts_strip']],
  // the process layer, top to bottom
  ['process: runs', ['process', 'process::supervise']],
  ['process: spawn', ['process::setup', 'process::child']],
  ['process: what a spawn applies', ['process::options', 'process::limits', 'process::cgroup', 'process::sandbox']],
  ['process: kill order', ['process::tree']],
  ['process: reaper', ['process::reaper']],
  ['process: registry', ['process::registry']],
  ['process: marks and specs', ['process::marks', 'process::sweeps', 'process::spec']],
  ['platform', ['platform']],
  ['leaves', ['buffer', 'error', 'trace', 'utf8']],
]

// ---- reading the crate ---------------------------------------------------

/** Source text with comments removed and string/char literals emptied. */
function code(text) {
  let out = ''
  let i = 0
  const n = text.length
  while (i < n) {
    const c = text[i]
    const d = text[i + 1]
    if (c === '/' && d === '/') {
      while (i < n && text[i] !== '\n') i++
    } else if (c === '/' && d === '*') {
      let depth = 0
      do {
        if (text[i] === '/' && text[i + 1] === '*') { depth++; i += 2 }
        else if (text[i] === '*' && text[i + 1] === '/') { depth--; i += 2 }
        else { if (text[i] === '\n') out += '\n'; i++ }
      } while (i < n && depth > 0)
    } else if ((c === 'r' || (c === 'b' && d === 'r')) && /^b?r#*"/.test(text.slice(i, i + 40)) && !/[A-Za-z0-9_]/.test(text[i - 1] ?? '')) {
      const m = /^b?r(#*)"/.exec(text.slice(i, i + 40))
      const close = '"' + m[1]
      let j = text.indexOf(close, i + m[0].length)
      if (j < 0) j = n
      out += '""' + '\n'.repeat((text.slice(i, j).match(/\n/g) ?? []).length)
      i = j + close.length
    } else if (c === '"') {
      let j = i + 1
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1
      out += '""' + '\n'.repeat((text.slice(i, j).match(/\n/g) ?? []).length)
      i = j + 1
    } else if (c === "'") {
      // a char literal ('x', '\n', '\u{..}') or a lifetime ('a)
      const m = /^'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'/u.exec(text.slice(i, i + 12))
      if (m) { out += "' '"; i += m[0].length } else { out += c; i++ }
    } else {
      out += c
      i++
    }
  }
  return out
}

/** The end (exclusive) of the item starting at `i`: its `;` or its `{...}`. */
function itemEnd(s, i) {
  let paren = 0
  for (; i < s.length; i++) {
    const c = s[i]
    if (c === '(' || c === '[') paren++
    else if (c === ')' || c === ']') paren--
    else if (c === ';' && paren === 0) return i + 1
    else if (c === '{' && paren === 0) {
      let depth = 0
      for (; i < s.length; i++) {
        if (s[i] === '{') depth++
        else if (s[i] === '}' && --depth === 0) return i + 1
      }
    }
  }
  return s.length
}

const TEST_ATTR = /#\[cfg\((?:all\()?test\b[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*/g

/** Removes `#[cfg(test)]` items; returns the text and the test-only `mod x;`. */
function withoutTests(s) {
  const testMods = []
  let out = ''
  let last = 0
  TEST_ATTR.lastIndex = 0
  for (let m; (m = TEST_ATTR.exec(s)); ) {
    if (m.index < last) continue
    const start = m.index + m[0].length
    const end = itemEnd(s, start)
    const decl = /^(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;/.exec(s.slice(start, end))
    if (decl) testMods.push(decl[1])
    // keep the line count: positions are reported as lines
    out += s.slice(last, m.index) + s.slice(m.index, end).replace(/[^\n]/g, ' ')
    last = end
    TEST_ATTR.lastIndex = end
  }
  return { text: out + s.slice(last), testMods }
}

/** Every module file: module path (['process', 'reaper']) -> file. */
function moduleFiles() {
  const mods = new Map() // 'process::reaper' -> { file, path: [...] }
  const visit = (file, path) => {
    const key = path.join('::')
    if (mods.has(key)) {
      // a cfg'd twin (`#[path = "registry_windows.rs"] mod registry;`)
      mods.get(key).files.push(file)
    } else {
      mods.set(key, { path, files: [file] })
    }
    const raw = readFileSync(file, 'utf8')
    const { text, testMods } = withoutTests(code(raw))
    const dir = /(?:^|\/)(mod|lib)\.rs$/.test(file) ? dirname(file) : file.replace(/\.rs$/, '')
    // `#[path = "..."]` is read from the raw text (code() empties strings)
    const decls = /((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;/g
    const rawDecls = [...code(raw.replace(/#\[path\s*=\s*"([^"]+)"\]/g, '#[path_is($1)]')).matchAll(decls)]
    for (const m of rawDecls) {
      const name = m[2]
      if (testMods.includes(name)) continue
      if (!new RegExp(`mod\\s+${name}\\s*;`).test(text)) continue
      const pathAttr = /#\[path_is\(([^)]+)\)\]/.exec(m[1])
      let child
      if (pathAttr) child = join(dirname(file), pathAttr[1])
      else if (exists(join(dir, `${name}.rs`))) child = join(dir, `${name}.rs`)
      else child = join(dir, name, 'mod.rs')
      visit(child, [...path, name])
    }
  }
  visit(join(src, 'lib.rs'), [])
  return mods
}

function exists(f) {
  try { return statSync(f).isFile() } catch { return false }
}

// ---- paths -> modules ------------------------------------------------------

/** The `pub use` re-exports of each module: name -> full path segments. */
function reexports(mods) {
  const table = new Map()
  for (const [key, m] of mods) {
    const names = new Map()
    for (const file of m.files) {
      const { text } = withoutTests(code(readFileSync(file, 'utf8')))
      for (const u of text.matchAll(/pub(?:\([^)]*\))?\s+use\s+([^;]+);/g)) {
        for (const p of expand(tidy(u[1]))) {
          const segs = p.split('::')
          const alias = / as (\w+)$/.exec(p)
          const name = alias ? alias[1] : segs[segs.length - 1]
          // `pub use tree::ProcessTree;`: a path from a child module
          const local = mods.has([...m.path, segs[0]].join('::'))
          const abs = local ? [...m.path, ...segs] : resolveRelative(segs, m.path)
          if (abs) names.set(name.replace(/ as \w+$/, ''), abs.map((x) => x.replace(/ as \w+$/, '')))
        }
      }
    }
    table.set(key, names)
  }
  return table
}

/** A path with no space but in `x as y`. */
function tidy(p) {
  return p.replace(/\s+/g, ' ').replace(/ ?(::|[{},]) ?/g, '$1').trim()
}

/** `a::{b,c::{d,e}}` -> ['a::b', 'a::c::d', 'a::c::e'] */
function expand(p) {
  const i = p.indexOf('{')
  if (i < 0) return [p]
  const prefix = p.slice(0, i)
  let depth = 0
  let j = i
  for (; j < p.length; j++) {
    if (p[j] === '{') depth++
    else if (p[j] === '}' && --depth === 0) break
  }
  const inner = p.slice(i + 1, j)
  const parts = []
  let d = 0
  let start = 0
  for (let k = 0; k < inner.length; k++) {
    if (inner[k] === '{') d++
    else if (inner[k] === '}') d--
    else if (inner[k] === ',' && d === 0) { parts.push(inner.slice(start, k)); start = k + 1 }
  }
  parts.push(inner.slice(start))
  return parts.filter((x) => x !== '').flatMap((x) => expand(prefix + x))
}

/** `crate::a::b` / `super::x` / `self::y` as segments from the crate root. */
function resolveRelative(segs, modPath) {
  if (segs[0] === 'crate' || segs[0] === '$crate') return segs.slice(1)
  if (segs[0] === 'super' || segs[0] === 'self') {
    const base = [...modPath]
    let k = 0
    for (; segs[k] === 'super' || segs[k] === 'self'; k++) if (segs[k] === 'super') base.pop()
    return [...base, ...segs.slice(k)]
  }
  return null // an external crate or a local name
}

/** The module a path names: the longest module prefix, following re-exports. */
function target(segs, mods, reexp, seen = 0) {
  let at = []
  for (let k = 0; k < segs.length; k++) {
    const next = [...at, segs[k]].join('::')
    if (mods.has(next)) { at = [...at, segs[k]]; continue }
    const re = reexp.get(at.join('::'))?.get(segs[k])
    if (re && seen < 8) return target([...re, ...segs.slice(k + 1)], mods, reexp, seen + 1)
    break
  }
  return at
}

/** The node a module is counted as: `top`, or `top::sub` under a directory module. */
function unit(path, mods) {
  if (path.length === 0) return 'crate'
  if (path.length >= 2) return path.slice(0, 2).join('::')
  const m = mods.get(path[0])
  const isDir = m && m.files.some((f) => f.endsWith('/mod.rs'))
  return isDir ? path[0] : path[0]
}

function edges(mods) {
  const reexp = reexports(mods)
  const found = [] // { from, to, fromMod, toMod, file, line }
  const PATH = /(?<![\w$:])(\$?crate|super|self)((?:::(?:\w+|\{[^;]*?\}))+)/g
  for (const [, m] of mods) {
    for (const file of m.files) {
      const { text } = withoutTests(code(readFileSync(file, 'utf8')))
      for (const p of text.matchAll(PATH)) {
        const body = p[1] + tidy(p[2])
        // a `{` group: keep it balanced
        for (const full of expand(balance(body))) {
          const segs = full.replace(/ as \w+$/, '').split('::').filter((x) => x !== '')
          const abs = resolveRelative(segs, m.path)
          if (!abs) continue
          const to = target(abs, mods, reexp)
          const line = text.slice(0, p.index).split('\n').length
          found.push({ fromMod: m.path, toMod: to, file: relative(root, file), line })
        }
      }
    }
  }
  return found
}

function balance(s) {
  let depth = 0
  for (let k = 0; k < s.length; k++) {
    if (s[k] === '{') depth++
    else if (s[k] === '}' && --depth < 0) return s.slice(0, k)
  }
  return s + '}'.repeat(depth)
}

// ---- checks --------------------------------------------------------------

function layerOf(path) {
  const names = [path.slice(0, 2).join('::'), path[0]]
  for (const name of names) {
    const i = LAYERS.findIndex(([, ms]) => ms.includes(name))
    if (i >= 0) return i
  }
  return -1
}

/** Elementary cycles are many; one cycle per strongly connected component. */
function cycles(graph) {
  let index = 0
  const idx = new Map()
  const low = new Map()
  const stack = []
  const on = new Set()
  const sccs = []
  const strong = (v) => {
    idx.set(v, index)
    low.set(v, index++)
    stack.push(v)
    on.add(v)
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!idx.has(w)) { strong(w); low.set(v, Math.min(low.get(v), low.get(w))) }
      else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)))
    }
    if (low.get(v) === idx.get(v)) {
      const c = []
      let w
      do { w = stack.pop(); on.delete(w); c.push(w) } while (w !== v)
      if (c.length > 1) sccs.push(c)
    }
  }
  for (const v of graph.keys()) if (!idx.has(v)) strong(v)
  // a shortest cycle through the component's first node, by BFS
  return sccs.map((c) => {
    const inC = new Set(c)
    const start = c.sort()[0]
    const prev = new Map([[start, null]])
    const queue = [start]
    while (queue.length) {
      const v = queue.shift()
      for (const w of graph.get(v).keys()) {
        if (!inC.has(w)) continue
        if (w === start) {
          const path = [v]
          for (let u = prev.get(v); u !== null; u = prev.get(u)) path.unshift(u)
          return { members: c, cycle: [...path, start] }
        }
        if (!prev.has(w)) { prev.set(w, v); queue.push(w) }
      }
    }
    return { members: c, cycle: c }
  })
}

/** Every `.rs` file under `dir` (recursively). */
function rustFiles(dir) {
  const out = []
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) out.push(...rustFiles(p))
    else if (e.name.endsWith('.rs')) out.push(p)
  }
  return out
}

/** Where unit tests are kept in another way than the one layout (above). */
export function testLayoutProblems(dirs) {
  const problems = []
  for (const file of dirs.flatMap(rustFiles)) {
    const text = readFileSync(file, 'utf8')
    const rel = relative(root, file)
    const folder = file.endsWith('/mod.rs')
    for (const [i, line] of text.split('\n').entries()) {
      const m = /^mod (tests\w*)\s*(;|\{)/.exec(line)
      if (!m) continue
      if (m[1] !== 'tests') problems.push(`test layout: ${rel}:${i + 1}: tests are in \`mod tests\`, not \`mod ${m[1]}\``)
      else if (folder && m[2] === '{') problems.push(`test layout: ${rel}:${i + 1}: a folder module keeps its tests in tests.rs beside mod.rs (\`#[cfg(test)] mod tests;\`)`)
      else if (!folder && m[2] === ';') problems.push(`test layout: ${rel}:${i + 1}: a file module keeps its tests inline (\`#[cfg(test)] mod tests { ... }\`)`)
    }
  }
  return problems
}

/** A lock taken with `.lock().unwrap()` outside tests: a thread that
 * panicked while it held the lock would make every later caller panic too
 * (the host with it); the code recovers the guard instead
 * (`unwrap_or_else(|e| e.into_inner())`). */
export function poisonProblems(dirs) {
  const problems = []
  for (const file of dirs.flatMap(rustFiles)) {
    if (/(^|\/)tests?\.rs$/.test(file)) continue
    const { text } = withoutTests(readFileSync(file, 'utf8'))
    for (const [i, line] of text.split('\n').entries()) {
      if (/\.lock\(\)\s*\.unwrap\(\)/.test(line)) {
        problems.push(`poisoned lock: ${relative(root, file)}:${i + 1}: \`.lock().unwrap()\` panics once a holder panicked: recover the guard (\`.lock().unwrap_or_else(|e| e.into_inner())\`)`)
      }
    }
  }
  return problems
}

function main() {
  const mods = moduleFiles()
  const all = edges(mods)
  const dirs = ['crates/exec-core/src', 'crates/sandbox/src', 'src'].map((d) => join(root, d))
  const problems = [...testLayoutProblems(dirs), ...poisonProblems(dirs)]

  const ordered = new Set(LAYERS.flatMap(([, ms]) => ms).filter((n) => n.includes('::')).map((n) => n.split('::')[0]))
  const named = new Set(LAYERS.flatMap(([, ms]) => ms))
  for (const [key, m] of mods) {
    const needs = m.path.length === 1 || (m.path.length === 2 && ordered.has(m.path[0]))
    if (needs && !named.has(key)) {
      problems.push(`module ${key} is in no layer: add it to LAYERS in scripts/check-layers.mjs and to docs/ARCHITECTURE.md`)
    }
  }

  // the graphs: top-level modules, and each top-level module's submodules
  const top = new Map()
  const inner = new Map()
  const add = (g, a, b, e) => {
    if (!g.has(a)) g.set(a, new Map())
    if (!g.has(b)) g.set(b, new Map())
    if (!g.get(a).has(b)) g.get(a).set(b, e)
  }
  for (const e of all) {
    if (e.toMod.length === 0) continue // the crate root's re-exports and helpers
    const a = e.fromMod[0]
    const b = e.toMod[0]
    if (a !== b) add(top, a, b, e)
    else if (e.fromMod.length >= 2 && e.toMod.length >= 2 && e.fromMod[1] !== e.toMod[1]) {
      add(inner, unit(e.fromMod, mods), unit(e.toMod, mods), e)
    }
    const la = layerOf(e.fromMod)
    const lb = layerOf(e.toMod)
    if (la >= 0 && lb >= 0 && lb < la) {
      problems.push(
        `layer: ${e.fromMod.join('::')} (${LAYERS[la][0]}) imports ${e.toMod.join('::')} (${LAYERS[lb][0]}), a higher layer, at ${e.file}:${e.line}`,
      )
    }
  }
  const where = (g, a, b) => {
    const e = g.get(a).get(b)
    return `${e.file}:${e.line}`
  }
  for (const g of [top, inner]) {
    for (const { cycle } of cycles(g)) {
      const steps = []
      for (let k = 0; k + 1 < cycle.length; k++) steps.push(`  ${cycle[k]} -> ${cycle[k + 1]}  (${where(g, cycle[k], cycle[k + 1])})`)
      problems.push(`cycle: ${cycle.join(' -> ')}\n${steps.join('\n')}`)
    }
  }

  if (process.argv.includes('--graph')) {
    for (const g of [top, inner]) {
      for (const [a, bs] of [...g].sort()) for (const b of [...bs.keys()].sort()) console.log(`${a} -> ${b}  (${where(g, a, b)})`)
    }
  }
  const seen = new Set()
  const unique = problems.filter((p) => {
    const k = p.replace(/ at \S+$/, '')
    if (seen.has(k)) return false
    seen.add(k)
    return true
  })
  if (unique.length) {
    console.error(`check-layers: ${unique.length} problem(s) in crates/exec-core:\n`)
    for (const p of unique) console.error(p + '\n')
    process.exit(1)
  }
  console.log(`check-layers: ${mods.size} modules, ${top.size} top-level; no cycle, no import from a higher layer; unit tests in the one layout; no lock that panics once poisoned`)
}

main()
