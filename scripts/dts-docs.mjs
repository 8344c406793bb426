// napi-rs copies doc comments into index.d.ts from the token of the `doc`
// attribute. A `///` comment that passes through a `macro_rules!` macro (the
// option objects declared with `js_options!`, see src/read.rs) arrives as a
// raw string (`#[doc = r" text"]`), and napi-rs keeps its `r"` prefix. This
// removes it, so the declarations read as written. Run after `napi build`.
import { readFileSync, writeFileSync } from 'node:fs'

const file = process.argv[2] ?? 'index.d.ts'
const before = readFileSync(file, 'utf8')
const after = before.replace(/^(\s*(?:\/\*\*|\*)) r#*"(?: |$)/gm, '$1 ').replace(/^(\s*\*) $/gm, '$1')
if (/^\s*(?:\/\*\*|\*) r#*"/m.test(after)) {
  console.error(`${file}: a raw doc prefix is left`)
  process.exit(1)
}
if (after !== before) writeFileSync(file, after)
