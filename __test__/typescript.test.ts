// The TypeScript fast path (types stripped in-process, plain node) against tsx:
// every snippet of the corpus runs both ways and must give the same stdout, the
// same error line on stderr and the same exit code; the snippets that stripping
// can run must run with `typescript: 'strip'` too, the others must be refused by
// it (so they went to tsx in 'auto').
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

import { describe, expect, it } from 'vitest'

import { executeAndCapture, executeStreaming } from '../index.js'

type Path = 'strip' | 'tsx'

// a directory with no tsconfig.json and no tsx of its own (this repository
// has both: there every snippet would go to tsx)
const CWD = mkdtempSync(path.join(tmpdir(), 'exec-native-ts-'))
const corpus: Array<[name: string, path: Path, code: string]> = [
  ['annotations', 'strip', "const x: number = 41; let s: string = 'a'; const b: boolean = true\nconsole.log(x + 1, s, b)"],
  ['interface', 'strip', "interface P { name: string; age?: number }\nconst p: P = { name: 'ann' }\nconsole.log(p.name, p.age)"],
  ['type alias and union', 'strip', "type Id = string | number\nconst ids: Id[] = [1, 'b']\nconsole.log(ids.join(','))"],
  ['generic function', 'strip', 'function first<T>(xs: T[]): T | undefined { return xs[0] }\nconsole.log(first<number>([3, 4]))'],
  ['generic class', 'strip', 'class Box<T> {\n  v: T\n  constructor(v: T) { this.v = v }\n  get(): T { return this.v }\n}\nconsole.log(new Box<string>("in").get())'],
  ['generic arrow', 'strip', 'const id = <T,>(v: T): T => v\nconsole.log(id(7))'],
  ['type-only import', 'tsx', "import type { Stats } from 'fs'\nconst n: number = 1\nconsole.log(n)"],
  ['value import', 'tsx', "import { join } from 'path'\nconsole.log(join('a', 'b'))"],
  ['as and satisfies', 'strip', "const v = JSON.parse('{\"a\":1}') as { a: number }\nconst c = { r: 1 } satisfies Record<string, number>\nconsole.log(v.a + c.r)"],
  ['as const', 'strip', "const t = [1, 'a'] as const\nconsole.log(t.length, t[1])"],
  ['enum', 'tsx', "enum Color { Red, Green = 'g' }\nconsole.log(Color.Red, Color.Green, Color[0])"],
  ['const enum', 'tsx', 'const enum D { Up = 1 }\nconsole.log(D.Up)'],
  ['namespace', 'tsx', 'namespace NS { export const a = 1 }\nconsole.log(NS.a)'],
  ['declare namespace', 'strip', 'declare namespace G { const v: number }\nconsole.log(typeof G)'],
  ['decorators', 'tsx', "function log(v: any, ctx?: any) { return v }\n@log class A {}\nconsole.log('done')"],
  ['parameter properties', 'tsx', 'class P {\n  constructor(public x: number, private y = 2) {}\n  sum() { return this.x + this.y }\n}\nconsole.log(new P(1).sum())'],
  ['abstract class', 'strip', "abstract class S {\n  abstract area(): number\n  describe() { return 'area ' + this.area() }\n}\nclass Sq extends S { s = 3; area() { return this.s * this.s } }\nconsole.log(new Sq().describe())"],
  ['declare', 'strip', 'declare const injected: any\ndeclare function ext(): void\nclass A { declare x: number; y = 1 }\nconsole.log(typeof injected, Object.keys(new A()))'],
  ['overloads', 'strip', "function f(a: string): string\nfunction f(a: number): number\nfunction f(a: any) { return a }\nconsole.log(f(1), f('x'))"],
  ['non-null assertion', 'strip', "const m = new Map<string, number>([['a', 1]])\nconsole.log(m.get('a')! + 1)"],
  ['optional chaining', 'strip', "const o: { a?: { b?: number } } = {}\nconsole.log(o.a?.b ?? 'none')"],
  ['modifiers', 'strip', "class C {\n  private n = 1\n  protected m(): number { return this.n }\n  public readonly r: string = 'r'\n  static s?: number\n  show() { return this.m() + this.r }\n}\nconsole.log(new C().show(), Object.keys(new C()))"],
  ['keyof typeof', 'strip', "const cfg = { a: 1 }\ntype K = keyof typeof cfg\nconst k: K = 'a'\nconsole.log(cfg[k])"],
  ['asserts and predicates', 'strip', "function isStr(v: unknown): v is string { return typeof v === 'string' }\nfunction check(v: unknown): asserts v is number { if (typeof v !== 'number') throw new Error('nan') }\nconst u: unknown = 2\ncheck(u)\nconsole.log(isStr('a'), u * 2)"],
  ['angle-bracket assertion', 'tsx', 'const n = <number>(<unknown>5)\nconsole.log(n)'],
  ['class field without initializer', 'strip', 'class A { x: number; y = 1 }\nconsole.log(Object.keys(new A()))'],
  ['top-level values', 'strip', 'console.log({ a: 1, b: [1, 2] }, new Set([1]), null, undefined, 1n)\nconsole.error("to stderr")'],
  ['unicode', 'strip', "const s: string = 'héllo ✓ 日本'\nconsole.log(s, s.length)"],
  ['require with types', 'strip', "const os = require('os') as typeof import('os')\nconsole.log(typeof os.cpus)"],
  ['async function', 'strip', 'async function f(): Promise<number> { return 2 }\nf().then((v: number) => console.log(v * 21))'],
  ['runtime error', 'strip', "const f = (x: number): number => { throw new Error('boom ' + x) }\nf(1)"],
  ['exit code', 'strip', 'const code: number = 3\nconsole.log("bye")\nprocess.exit(code)'],
  ['syntax error', 'tsx', 'const x: number = ;'],
  ['top-level await', 'tsx', 'const v = await Promise.resolve(5)\nconsole.log(v)'],
  ['top-level this', 'tsx', 'console.log(this === module.exports)'],
  ['local require', 'tsx', "let r: string\ntry { require('./no-such-module'); r = 'found' } catch (e: any) { r = e.code }\nconsole.log(r)"],
  ['dynamic import', 'tsx', "import('node:path').then((p: any) => console.log(typeof p.join))"],
  ['this in methods', 'strip', "const o = { n: 1, get(): number { return this.n } }\nclass K { v = 2; m() { return [1].map(() => this.v) } }\nconsole.log(o.get(), new K().m())"],
]

/** The first line of stderr that names an error (`Error: boom 1`, `SyntaxError: ...`). */
function errorLine(stderr: string): string | null {
  const m = /^(\w*Error)(?::|\b)/m.exec(stderr)
  return m ? m[1] : null
}

describe('typescript: fast path and tsx agree', () => {
  for (const [name, expected, code] of corpus) {
    it(`${name} (${expected})`, async () => {
      const [auto, tsx, strip] = await Promise.all([
        executeAndCapture(code, 'typescript', { cwd: CWD }),
        executeAndCapture(code, 'typescript', { cwd: CWD, typescript: 'tsx' }),
        executeAndCapture(code, 'typescript', { cwd: CWD, typescript: 'strip' }),
      ])
      expect(auto.stdout).toBe(tsx.stdout)
      expect(auto.exitCode).toBe(tsx.exitCode)
      expect(errorLine(auto.stderr as string)).toBe(errorLine(tsx.stderr as string))
      if (auto.exitCode === 0) expect(auto.stderr).toBe(tsx.stderr)
      if (expected === 'strip') {
        expect(strip.errorCode, strip.error).toBeUndefined()
        expect(strip.stdout).toBe(auto.stdout)
        expect(strip.exitCode).toBe(auto.exitCode)
      } else {
        expect(strip.errorCode).toBe('EINVAL')
        expect(strip.exitCode).toBe(-1)
        expect(strip.error).toMatch(/^exec: this TypeScript needs more than stripping types/)
      }
    })
  }

  it('the corpus covers both paths with real output', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30)
    expect(corpus.filter(([, p]) => p === 'tsx').length).toBeGreaterThanOrEqual(8)
  })
})

// tsx registers a loader for .ts files in the child; plain node does not
const MARKER = "const m: string = typeof require.extensions['.ts']\nconsole.log(m)"

describe('typescript: which path runs', () => {
  it('plain TypeScript runs on plain node (no tsx in the child)', async () => {
    const r = await executeAndCapture(MARKER, 'typescript', { cwd: CWD })
    expect(r.stdout).toBe('undefined\n')
    expect(r.success).toBe(true)
  })

  it("typescript: 'tsx' runs tsx", async () => {
    const r = await executeAndCapture(MARKER, 'typescript', { cwd: CWD, typescript: 'tsx' })
    expect(r.stdout).toBe('function\n')
  })

  it('an enum sends the code to tsx', async () => {
    const r = await executeAndCapture(`enum E { A }\n${MARKER}`, 'typescript', { cwd: CWD })
    expect(r.stdout).toBe('function\n')
  })

  it('executeStreaming takes the fast path too', async () => {
    let out = ''
    const r = await executeStreaming(MARKER, 'typescript', { cwd: CWD }, (s) => (out += s))
    expect(r.exitCode).toBe(0)
    expect(out).toBe('undefined\n')
  })

  it('large code (over the inline limit) runs through the temp file, stripped', async () => {
    const code = `${MARKER}\n// ${'x'.repeat(70 * 1024)}\nconst n: number = 2\nconsole.log(n)`
    const r = await executeAndCapture(code, 'typescript', { cwd: CWD })
    expect(r.stdout).toBe('undefined\n2\n')
  })

  it('a tsconfig.json with paths in cwd sends the code to tsx', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'exec-native-ts-'))
    writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { baseUrl: '.', paths: { '@/*': ['src/*'] } } }))
    const r = await executeAndCapture(MARKER, 'typescript', { cwd: dir })
    expect(r.stdout).toBe('function\n')
    // a tsconfig that changes nothing stripping ignores keeps the fast path
    const plain = mkdtempSync(path.join(tmpdir(), 'exec-native-ts-'))
    writeFileSync(path.join(plain, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true } }))
    const p = await executeAndCapture(MARKER, 'typescript', { cwd: plain })
    expect(p.stdout).toBe('undefined\n')
  })

  it('in this repository (its own tsx) the code goes to tsx', async () => {
    const r = await executeAndCapture(MARKER, 'typescript', { cwd: path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..') })
    expect(r.stdout).toBe('function\n')
  })

  it("the project's own tsx is used", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'exec-native-ts-'))
    mkdirSync(path.join(dir, 'node_modules/.bin'), { recursive: true })
    const fake = path.join(dir, 'node_modules/.bin/tsx')
    writeFileSync(fake, '#!/bin/sh\necho "own tsx $1"\n', { mode: 0o755 })
    const r = await executeAndCapture('const a: number = 1', 'typescript', { cwd: dir })
    expect(r.stdout).toBe('own tsx -e\n')
  })

  it('a bad typescript option is a TypeError', async () => {
    await expect(executeAndCapture('1', 'typescript', { typescript: 'esbuild' as never })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'EINVAL',
      message: "exec: options.typescript must be 'auto', 'strip' or 'tsx', got 'esbuild' (EINVAL)",
    })
  })

  it("typescript: 'strip' refuses what needs tsx, with the reason", async () => {
    const r = await executeAndCapture('enum E { A }', 'typescript', { typescript: 'strip' })
    expect(r.success).toBe(false)
    expect(r.errorCode).toBe('EINVAL')
    expect(r.error).toMatch(/enum/)
  })
})
