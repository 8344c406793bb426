//! The TypeScript fast path: strip the types in-process (SWC's strip-only
//! mode, the stripper Node itself ships) and run the result with plain `node`,
//! instead of starting tsx (esbuild plus a second node, ~5x the time).
//!
//! Stripping replaces type syntax by whitespace, so positions (and the line
//! numbers of errors) stay those of the TypeScript source. What stripping
//! cannot express goes to tsx, with the same output either way:
//! - syntax that needs code generated: enums, namespaces with values,
//!   parameter properties, `<T>x` assertions, `import x = require()`,
//!   decorators (parsed as errors here);
//! - ES module syntax (`import`/`export`, top-level `await`): the code is
//!   parsed as a script, as `node -e` runs it; tsx -e rewrites imports to
//!   `require`, so it gets these;
//! - a project whose `tsconfig.json` changes what code means (`paths`,
//!   `baseUrl`, decorators, class-field semantics, `extends`, JSX), or that
//!   brings its own tsx (`<cwd>/node_modules/.bin/tsx`);
//! - code that does not parse: tsx reports the error as the user expects.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use swc_common::errors::{Handler, HANDLER};
use swc_common::sync::Lrc;
use swc_common::{FileName, SourceMap, GLOBALS};
use swc_ecma_ast::{Class, Function, GetterProp, SetterProp, ThisExpr};
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};
use swc_ecma_visit::{Visit, VisitWith};
use swc_ts_fast_strip::{operate, Mode, Options};

/// Which way `typescript` code runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsPath {
  /// Strip types and run node when the code and the project allow it, else tsx.
  #[default]
  Auto,
  /// Always strip (an error when the code needs more than stripping).
  Strip,
  /// Always tsx.
  Tsx,
}

impl TsPath {
  /// `'auto'`, `'strip'` or `'tsx'`, or what the message says instead (the
  /// caller names the option).
  pub fn parse(s: &str) -> Result<Self, String> {
    match s {
      "auto" => Ok(TsPath::Auto),
      "strip" => Ok(TsPath::Strip),
      "tsx" => Ok(TsPath::Tsx),
      other => Err(format!("must be 'auto', 'strip' or 'tsx', got '{other}'")),
    }
  }
}

/// A `Write` into a shared buffer, for the diagnostics of the handler.
#[derive(Clone, Default)]
struct Diagnostics(Arc<Mutex<Vec<u8>>>);

impl Write for Diagnostics {
  fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
    self
      .0
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .extend_from_slice(buf);
    Ok(buf.len())
  }
  fn flush(&mut self) -> std::io::Result<()> {
    Ok(())
  }
}

/// Stack of the thread that strips: the parser and the visitors recurse once
/// per level of nesting, a few KiB each. Reserved, not committed: only the
/// pages a deep input touches are used.
const STRIP_STACK: usize = 256 * 1024 * 1024;

/// Deepest nesting handed to the parser (see [`nesting_estimate`]). With the
/// stack above this leaves a margin of more than 20x over the costliest
/// construct measured (`strip_survives_every_shape_at_the_limit`); deeper
/// code goes to tsx, which runs in its own process.
pub const MAX_NESTING: usize = 1000;

/// The code with its types stripped, or why that is not possible (the first
/// diagnostic, one line). Never on the caller's stack: the work runs on a
/// thread of its own with a known stack, after a depth check, so no input can
/// overflow a stack (a host's JS thread or a worker's would crash the host).
pub fn strip(code: &str) -> Result<String, String> {
  let depth = nesting_estimate(code);
  if depth > MAX_NESTING {
    return Err(format!(
      "the code is nested too deeply to strip in-process ({depth} levels, at most {MAX_NESTING})"
    ));
  }
  let owned = code.to_owned();
  let worker = std::thread::Builder::new()
    .name("exec-ts-strip".into())
    .stack_size(STRIP_STACK)
    .spawn(move || strip_here(&owned));
  match worker {
    Ok(h) => h
      .join()
      .unwrap_or_else(|_| Err("the type stripper failed on this code".into())),
    Err(e) => Err(format!("cannot start the type stripper: {e}")),
  }
}

/// An upper estimate of how deep the syntax tree of `code` nests, from the
/// tokens alone. The parser and the visitors recurse once per bracket level
/// (`(`, `[`, `{`, `${`, and `<` right after a name, as in `Array<`) and once
/// per operator or link of one expression (`a.b().c()`, `1+1+1`, `- - -x`
/// each nest one level per token), so the estimate is the bracket depth plus,
/// on each level, the operators and links since the last `,` or `;` (or the
/// last line break that ends a statement). Strings and comments are skipped.
/// An overestimate only costs the fast path (tsx runs instead).
pub fn nesting_estimate(code: &str) -> usize {
  let b = code.as_bytes();
  let mut lv = Levels::new();
  let mut worst = 0usize;
  let mut prev = b';'; // the last significant byte
  let mut i = 0;
  while i < b.len() {
    let c = b[i];
    match c {
      b'/' if matches!(b.get(i + 1), Some(b'/' | b'*')) => {
        i = skip_comment(b, i);
        continue;
      }
      b'\'' | b'"' => i = skip_string(b, i),
      // a template's text is skipped; `${` opens a level like a bracket,
      // and the text goes on after the `}` that closes it
      b'`' => i = lv.template(b, i + 1),
      // a line break ends a statement unless the expression goes on
      b'\n' if statement_ends(b, i, prev) => {
        lv.pop_angles();
        lv.reset_top();
      }
      b';' | b',' => {
        if c == b';' {
          lv.pop_angles();
        }
        lv.reset_top();
      }
      b'(' | b'[' | b'{' => {
        lv.op();
        lv.levels.push((c, 0));
      }
      b'<' if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b'$' => {
        lv.levels.push((b'<', 0));
      }
      b'}' if lv.top_is(b'$') => {
        lv.pop();
        i = lv.template(b, i + 1);
      }
      b')' | b']' | b'}' | b'>' => lv.close(c),
      c if c.is_ascii_punctuation() && !matches!(c, b'_' | b'$' | b'#' | b'@') => lv.op(),
      _ => {}
    }
    if !c.is_ascii_whitespace() {
      prev = c;
    }
    worst = worst.max(lv.depth());
    i += 1;
  }
  worst
}

/// [`nesting_estimate`]'s bracket levels: each level's opener and the
/// operators of its current expression, and the sum of those counts.
struct Levels {
  levels: Vec<(u8, usize)>,
  ops: usize,
}

impl Levels {
  fn new() -> Self {
    Levels {
      levels: vec![(0, 0)],
      ops: 0,
    }
  }

  fn depth(&self) -> usize {
    self.levels.len() - 1 + self.ops
  }

  /// Whether the innermost level (not the outermost) was opened by `c`.
  fn top_is(&self, c: u8) -> bool {
    self.levels.len() > 1 && self.levels.last().is_some_and(|l| l.0 == c)
  }

  /// An operator or link in the current expression.
  fn op(&mut self) {
    if let Some(top) = self.levels.last_mut() {
      top.1 += 1;
    }
    self.ops += 1;
  }

  fn pop(&mut self) {
    if let Some((_, n)) = self.levels.pop() {
      self.ops -= n;
    }
  }

  /// Close the `<` levels still open: they were comparisons.
  fn pop_angles(&mut self) {
    while self.top_is(b'<') {
      self.pop();
    }
  }

  /// The current expression ends (`,`, `;` or the end of a statement).
  fn reset_top(&mut self) {
    if let Some(top) = self.levels.last_mut() {
      self.ops -= top.1;
      top.1 = 0;
    }
  }

  /// A closing `)`, `]`, `}` or `>`.
  fn close(&mut self, c: u8) {
    let opener = match c {
      b')' => b'(',
      b']' => b'[',
      b'}' => b'{',
      _ => b'<',
    };
    if c != b'>' {
      // a `<` still open was a comparison, not type arguments
      self.pop_angles();
    }
    if self.top_is(opener) {
      self.pop();
    } else if c == b'>' {
      self.op();
    }
  }

  /// Skip template text from `i` (see [`template_text`]), opening a level
  /// for a `${`; the index to go on from.
  fn template(&mut self, b: &[u8], i: usize) -> usize {
    let (end, opened) = template_text(b, i);
    if opened {
      self.levels.push((b'$', 0));
    }
    end
  }
}

/// Skip the comment at `i` (`//` or `/*`): the index after it (a line
/// comment's line break is not skipped).
fn skip_comment(b: &[u8], mut i: usize) -> usize {
  if b.get(i + 1) == Some(&b'/') {
    while i < b.len() && b[i] != b'\n' {
      i += 1;
    }
    return i;
  }
  i += 2;
  while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
    i += 1;
  }
  i + 2
}

/// Skip the string literal opened at `i`: the index of its closing quote
/// (or of the line break or end that cuts it).
fn skip_string(b: &[u8], mut i: usize) -> usize {
  let quote = b[i];
  i += 1;
  while i < b.len() && b[i] != quote && b[i] != b'\n' {
    i += if b[i] == b'\\' { 2 } else { 1 };
  }
  i
}

/// Whether the line break at `i` ends a statement: the line does not end
/// open (an operator, a comma...) and the next starts a new one.
fn statement_ends(b: &[u8], i: usize, prev: u8) -> bool {
  let next = b[i + 1..].iter().find(|x| !x.is_ascii_whitespace());
  let open_ended = |x: u8| {
    !(x.is_ascii_alphanumeric()
      || matches!(x, b')' | b']' | b'}' | b'\'' | b'"' | b'`' | b'_' | b'$'))
  };
  !open_ended(prev)
    && next.is_none_or(|&n| n.is_ascii_alphanumeric() || n == b'_' || n == b'$' || n == b'}')
}

/// Skip template text from `i`: the index of the closing backtick, or of the
/// `{` of a `${` (then true).
fn template_text(b: &[u8], mut i: usize) -> (usize, bool) {
  while i < b.len() {
    match b[i] {
      b'\\' => i += 2,
      b'`' => return (i, false),
      b'$' if b.get(i + 1) == Some(&b'{') => return (i + 1, true),
      _ => i += 1,
    }
  }
  (i, false)
}

/// A NodeSession cell's types stripped: parsed as a module (imports, exports
/// and top-level `await` are the caller's to rewrite), positions kept. What
/// stripping cannot express (enums, namespaces, parameter properties) is
/// transformed instead (its lines may move). Imports are never elided, even
/// when the cell itself does not use them: a later cell may. The error is the
/// first diagnostic, one line. Runs on its own thread, as [`strip`] does.
#[cfg_attr(windows, allow(dead_code))] // the sessions' (POSIX only)
pub fn strip_cell(code: &str) -> Result<String, String> {
  let depth = nesting_estimate(code);
  if depth > MAX_NESTING {
    return Err(format!(
      "the code is nested too deeply to strip ({depth} levels, at most {MAX_NESTING})"
    ));
  }
  let owned = code.to_owned();
  let worker = std::thread::Builder::new()
    .name("exec-ts-strip".into())
    .stack_size(STRIP_STACK)
    .spawn(move || {
      strip_module(&owned, Mode::StripOnly).or_else(|first| {
        strip_module(&owned, Mode::Transform).map_err(|second| {
          // a real syntax error: strip's message names it as well
          if first.contains("not supported in strip-only mode") {
            second
          } else {
            first
          }
        })
      })
    });
  match worker {
    Ok(h) => h
      .join()
      .unwrap_or_else(|_| Err("the type stripper failed on this code".into())),
    Err(e) => Err(format!("cannot start the type stripper: {e}")),
  }
}

#[cfg_attr(windows, allow(dead_code))] // the sessions' (POSIX only)
fn strip_module(code: &str, mode: Mode) -> Result<String, String> {
  let cm: Lrc<SourceMap> = Default::default();
  let diags = Diagnostics::default();
  let handler = Handler::with_emitter_writer(Box::new(diags.clone()), Some(cm.clone()));
  let transform = serde_json::from_value(serde_json::json!({
    "verbatimModuleSyntax": true,
    "noEmptyExport": true,
    "nativeClassProperties": true,
  }))
  .ok();
  let options = Options {
    module: Some(true),
    mode,
    transform,
    parser: swc_ecma_parser_syntax(),
    deprecated_ts_module_as_error: Some(true),
    ..Default::default()
  };
  let out = GLOBALS.set(&Default::default(), || {
    HANDLER.set(&handler, || {
      operate(&cm, &handler, code.to_owned(), options)
    })
  });
  out.map(|o| o.code).map_err(|e| {
    let text =
      String::from_utf8_lossy(&diags.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    text
      .lines()
      .map(str::trim)
      .find(|l| !l.is_empty())
      .map(|l| l.trim_start_matches("x ").to_owned())
      .unwrap_or_else(|| e.message.clone())
  })
}

fn strip_here(code: &str) -> Result<String, String> {
  let cm: Lrc<SourceMap> = Default::default();
  let diags = Diagnostics::default();
  let handler = Handler::with_emitter_writer(Box::new(diags.clone()), Some(cm.clone()));
  let options = Options {
    // `node -e` runs a script: ES module syntax is left to tsx
    module: Some(false),
    mode: Mode::StripOnly,
    parser: swc_ecma_parser_syntax(),
    deprecated_ts_module_as_error: Some(true),
    ..Default::default()
  };
  let out = GLOBALS.set(&Default::default(), || {
    HANDLER.set(&handler, || {
      operate(&cm, &handler, code.to_owned(), options)
    })
  });
  match out {
    // on the stripped code: `typeof import('x')` types are gone
    Ok(o) if loads_local_code(&o.code) => {
      Err("it loads local modules, which may be TypeScript (tsx can load them)".into())
    }
    Ok(_) if has_top_level_this(code) => {
      Err("top-level `this` (tsx makes it `module.exports`, node -e `globalThis`)".into())
    }
    Ok(o) => Ok(o.code),
    Err(e) => {
      let text =
        String::from_utf8_lossy(&diags.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
      let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("x ").to_owned());
      Err(first.unwrap_or_else(|| e.message.clone()))
    }
  }
}

/// Whether the code loads a module by path (`require('./x')`) or imports
/// anything at run time (`import('x')`): the module may be TypeScript, which
/// only tsx can load.
fn loads_local_code(code: &str) -> bool {
  let b = code.as_bytes();
  let mut i = 0;
  while let Some(at) = code[i..].find(['r', 'i']).map(|p| p + i) {
    i = at + 1;
    let rest = &code[at..];
    let (call, dynamic_import) = if let Some(r) = rest.strip_prefix("require") {
      (r, false)
    } else if let Some(r) = rest.strip_prefix("import") {
      (r, true)
    } else {
      continue;
    };
    if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b'$') {
      continue;
    }
    let call = call.trim_start();
    let Some(arg) = call.strip_prefix('(') else {
      continue;
    };
    if dynamic_import {
      return true;
    }
    let arg = arg.trim_start();
    let arg = arg.strip_prefix(['\'', '"', '`']).unwrap_or("x");
    if arg.starts_with('.') || arg.starts_with('/') {
      return true;
    }
  }
  false
}

/// Whether `this` is used outside any function or class: tsx -e (esbuild's
/// CommonJS output) makes it `module.exports`, `node -e` makes it `globalThis`.
fn has_top_level_this(code: &str) -> bool {
  if !code.contains("this") {
    return false;
  }
  let cm: Lrc<SourceMap> = Default::default();
  let fm = cm.new_source_file(FileName::Anon.into(), code.to_owned());
  GLOBALS.set(&Default::default(), || {
    let mut parser = Parser::new(
      Syntax::Typescript(swc_ecma_parser_syntax()),
      StringInput::from(&*fm),
      None,
    );
    match parser.parse_script() {
      Ok(script) => {
        let mut v = TopLevelThis::default();
        script.visit_with(&mut v);
        v.found
      }
      Err(_) => true,
    }
  })
}

/// Finds a `this` whose binding is the top level (arrows inherit it).
#[derive(Default)]
struct TopLevelThis {
  depth: usize,
  found: bool,
}

impl Visit for TopLevelThis {
  fn visit_function(&mut self, n: &Function) {
    self.depth += 1;
    n.visit_children_with(self);
    self.depth -= 1;
  }
  fn visit_class(&mut self, n: &Class) {
    self.depth += 1;
    n.visit_children_with(self);
    self.depth -= 1;
  }
  fn visit_getter_prop(&mut self, n: &GetterProp) {
    self.depth += 1;
    n.visit_children_with(self);
    self.depth -= 1;
  }
  fn visit_setter_prop(&mut self, n: &SetterProp) {
    self.depth += 1;
    n.visit_children_with(self);
    self.depth -= 1;
  }
  fn visit_this_expr(&mut self, _: &ThisExpr) {
    if self.depth == 0 {
      self.found = true;
    }
  }
}

/// TypeScript syntax without decorators: node cannot run them, so code with
/// decorators fails to parse here and goes to tsx.
fn swc_ecma_parser_syntax() -> TsSyntax {
  TsSyntax {
    decorators: false,
    ..Default::default()
  }
}

/// tsconfig options that change what the code means beyond its types.
const TSCONFIG_KEYS: &[&str] = &[
  "\"paths\"",
  "\"baseUrl\"",
  "\"extends\"",
  "\"experimentalDecorators\"",
  "\"emitDecoratorMetadata\"",
  "\"useDefineForClassFields\"",
  "\"jsx",
  "\"verbatimModuleSyntax\"",
  "\"importsNotUsedAsValues\"",
  "\"preserveValueImports\"",
];

/// Why the project in `cwd` wants tsx whatever the code: its own tsx, or a
/// tsconfig.json (the nearest, as tsx finds it) with options stripping ignores.
pub fn project_wants_tsx(cwd: &Path) -> Option<String> {
  if cwd.join("node_modules/.bin/tsx").is_file() {
    return Some("the project has its own tsx".into());
  }
  let config = cwd
    .ancestors()
    .map(|d| d.join("tsconfig.json"))
    .find(|p| p.is_file())?;
  let text = std::fs::read_to_string(&config).ok()?;
  TSCONFIG_KEYS
    .iter()
    .find(|k| text.contains(*k))
    .map(|k| format!("{} sets {}", config.display(), k.trim_matches('"')))
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Shapes that nest the syntax tree `n` levels deep.
  fn shapes(n: usize) -> Vec<(&'static str, String)> {
    vec![
      (
        "parens",
        format!("const x: number = {}1{};", "(".repeat(n), ")".repeat(n)),
      ),
      (
        "brackets",
        format!("const x = {}1{};", "[".repeat(n), "]".repeat(n)),
      ),
      (
        "objects",
        format!("const x = {}1{};", "{a:".repeat(n), "}".repeat(n)),
      ),
      (
        "generics",
        format!("let x: {}number{} = [];", "Array<".repeat(n), ">".repeat(n)),
      ),
      ("unary minus", format!("const x = {}1;", "-".repeat(n))),
      ("spaced unary", format!("const x = {}1;", "- ".repeat(n))),
      (
        "chained calls",
        format!("const x = [1]{};", ".concat()".repeat(n)),
      ),
      ("sum", format!("const x = 1{};", "+1".repeat(n))),
      ("arrows", format!("const f = {}0;", "a => ".repeat(n))),
      ("ternaries", format!("const x = {}0;", "1 ? 2 : ".repeat(n))),
      (
        "templates",
        format!("const x = {}1{};", "`${".repeat(n), "}`".repeat(n)),
      ),
      ("blocks", format!("{}{}", "{".repeat(n), "}".repeat(n))),
      ("ifs", format!("{}1{}", "if (1) {".repeat(n), "}".repeat(n))),
      (
        "functions",
        format!("{}{}", "function f() {".repeat(n), "}".repeat(n)),
      ),
      (
        "chain over lines",
        format!("const x = [1]{};", "\n  .concat()".repeat(n)),
      ),
    ]
  }

  #[test]
  fn deep_nesting_is_refused_before_parsing() {
    for (name, code) in shapes(3000) {
      let est = nesting_estimate(&code);
      assert!(est > MAX_NESTING, "{name}: estimated {est}");
      let e = strip(&code).unwrap_err();
      assert!(e.contains("nested too deeply"), "{name}: {e}");
    }
    let unary = format!("const x = {}1;", "-".repeat(100_000));
    assert!(strip(&unary).unwrap_err().contains("nested too deeply"));
    let calls = format!("const x = [1]{};", ".concat()".repeat(50_000));
    assert!(strip(&calls).unwrap_err().contains("nested too deeply"));
  }

  #[test]
  fn the_estimate_is_at_least_the_depth() {
    for (name, code) in shapes(200) {
      assert!(
        nesting_estimate(&code) >= 200,
        "{name}: {}",
        nesting_estimate(&code)
      );
    }
  }

  #[test]
  fn strip_survives_every_shape_at_the_limit() {
    // the deepest each shape can be and still be parsed: no stack overflow
    for (name, _) in shapes(1) {
      let mut n = MAX_NESTING;
      let code = loop {
        let (_, c) = shapes(n).into_iter().find(|(s, _)| *s == name).unwrap();
        if nesting_estimate(&c) <= MAX_NESTING {
          break c;
        }
        n -= n / 20 + 1;
      };
      let _ = strip(&code);
    }
  }

  #[test]
  fn ordinary_code_is_far_below_the_limit() {
    let code = r#"
interface Row { id: number; name: string; tags: Array<Map<string, number[]>> }
const rows: Row[] = [{ id: 1, name: 'a', tags: [] }, { id: 2, name: "b", tags: [] }]
function total(xs: Row[]): number {
  return xs.map((r) => r.id * 2 + 1).filter((n) => n > 2 && n < 100).reduce((a, b) => a + b, 0)
}
const text = `ids: ${rows.map((r) => `${r.id}:${r.name}`).join(', ')}`
let x = 1
x = x + 2
console.log(total(rows), text, x) // done: (((( in a comment
const s = ')))]]]' + "((((" + '{{{'
"#;
    let big = code.repeat(2000);
    assert!(nesting_estimate(code) < 60, "{}", nesting_estimate(code));
    assert!(nesting_estimate(&big) < 60, "{}", nesting_estimate(&big));
    assert!(strip(&big).is_ok());
  }

  #[test]
  fn strips_types_in_place() {
    let js = strip("const x: number = 41;\nconsole.log(x as number + 1)").unwrap();
    assert_eq!(js, "const x         = 41;\nconsole.log(x           + 1)");
  }

  #[test]
  fn interfaces_generics_and_satisfies_strip() {
    let code = "interface P { a: number }\nfunction id<T>(v: T): T { return v }\nconst p = { a: 1 } satisfies P\nconsole.log(id<number>(p.a)!)";
    let js = strip(code).unwrap();
    assert!(!js.contains("interface"), "{js}");
    assert!(!js.contains("satisfies"), "{js}");
    assert_eq!(js.lines().count(), 4);
  }

  #[test]
  fn what_needs_code_generation_is_refused() {
    for (code, why) in [
      ("enum E { A }", "enum"),
      ("namespace N { export const a = 1 }", "namespace"),
      (
        "class A { constructor(private x: number) {} }",
        "parameter property",
      ),
      ("const a = <number>1", "angle-bracket"),
    ] {
      let e = strip(code).unwrap_err();
      assert!(e.contains(why), "{code}: {e}");
    }
  }

  #[test]
  fn modules_and_decorators_are_refused() {
    assert!(strip("import fs from 'fs'; console.log(fs)").is_err());
    assert!(strip("import type { A } from './a'; const a = 1").is_err());
    assert!(strip("export const a = 1").is_err());
    assert!(strip("await Promise.resolve(1)").is_err());
    assert!(strip("function d(t: any) {}\n@d class A {}").is_err());
  }

  #[test]
  fn top_level_this_is_refused_this_in_functions_is_not() {
    assert!(strip("console.log(this)").is_err());
    assert!(strip("const f = () => this; f()").is_err());
    assert!(
      strip("class A { m() { return this } }\nfunction f(this: any) { return this }").is_ok()
    );
    assert!(strip("const o = { get x() { return this }, m() { return this } }").is_ok());
    assert!(strip("const thisIsFine = 1").is_ok());
  }

  #[test]
  fn loading_local_modules_is_refused() {
    assert!(strip("const u = require('./util')").is_err());
    assert!(strip("const u = require( \"/abs/x\" )").is_err());
    assert!(strip("import('fs').then(() => 1)").is_err());
    assert!(strip("const os = require('os') as typeof import('os')").is_ok());
    assert!(strip("const fs = require('fs'); const p = require(\"node:path\")").is_ok());
    assert!(
      strip("const myrequire = (x: string) => x; myrequire('./a'); const imported = 1").is_ok()
    );
  }

  #[test]
  fn syntax_errors_are_refused() {
    assert!(strip("const = ;").is_err());
  }

  #[test]
  fn project_settings_send_code_to_tsx() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(project_wants_tsx(dir.path()), None);
    std::fs::write(
      dir.path().join("tsconfig.json"),
      "{\"compilerOptions\":{\"strict\":true}}",
    )
    .unwrap();
    assert_eq!(project_wants_tsx(dir.path()), None);
    let sub = dir.path().join("src");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(
      dir.path().join("tsconfig.json"),
      "{\"compilerOptions\":{\"paths\":{\"@/*\":[\"src/*\"]}}}",
    )
    .unwrap();
    assert!(project_wants_tsx(&sub).unwrap().contains("paths"));
    std::fs::create_dir_all(sub.join("node_modules/.bin")).unwrap();
    std::fs::write(sub.join("node_modules/.bin/tsx"), "").unwrap();
    assert_eq!(
      project_wants_tsx(&sub).as_deref(),
      Some("the project has its own tsx")
    );
  }

  #[test]
  fn path_option_parses() {
    assert_eq!(TsPath::parse("auto").unwrap(), TsPath::Auto);
    assert_eq!(TsPath::parse("tsx").unwrap(), TsPath::Tsx);
    assert_eq!(
      TsPath::parse("esbuild").unwrap_err(),
      "must be 'auto', 'strip' or 'tsx', got 'esbuild'"
    );
  }
}
