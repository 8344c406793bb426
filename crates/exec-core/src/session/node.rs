//! The Node.js session: a real `node` running `node_driver.mjs` (beside this file) (see
//! [`super::driver`] for the protocol both drivers speak), and the addon's
//! part of running a cell: TypeScript types stripped, module syntax rewritten.
//!
//! A cell is evaluated as a script in V8's REPL mode, where `import` and
//! `export` do not exist, so before it is sent:
//! - `import d, { a as b } from 'm'` becomes
//!   `const { default: d, a: b } = await <import>('m');`, `import * as ns`
//!   `const ns = await <import>('m');`, `import 'm'` `await <import>('m');`,
//!   and `import(x)` calls `<import>(x)`: the driver's `import()`, which
//!   resolves from the session's cwd (`<cwd>/node_modules`, `./local.mjs`);
//! - `export` is dropped from declarations, `export default e` becomes `(e)`,
//!   `export { … }` and `export … from` are dropped;
//! - a cell that is an object literal (`{ a: 1 }`) is wrapped in parentheses,
//!   as Node's REPL does.
//!
//! Each rewrite keeps the lines of the cell (an import spread over three lines
//! is replaced by one line and two line breaks), so `<cell N>:line` in a stack
//! is the line the user wrote. Code that does not parse as a module is sent
//! as it is: V8 reports its syntax error (or runs it, for sloppy-mode code).

use std::time::Duration;

use swc_common::sync::Lrc;
use swc_common::{BytePos, FileName, SourceMap, Spanned, GLOBALS};
use swc_ecma_ast::{
  Callee, DefaultDecl, ImportSpecifier, ModuleDecl, ModuleExportName, ModuleItem,
};
use swc_ecma_parser::{Parser, StringInput, Syntax};
use swc_ecma_visit::{Visit, VisitWith};

use super::cell::{CellException, DriverKind, DriverSpec};
use super::CellLanguage;
use crate::error::{ErrorCode, ExecError};
use crate::process::{ProcessOptions, RunOptions};

/// The driver that runs inside `node` (`node_driver.mjs`, embedded).
pub const DRIVER: &str = include_str!("node_driver.mjs");

/// The driver's `import()` as cell code calls it.
const IMPORT: &str = "globalThis[Symbol.for('exec-native.import')]";

/// How the session's `node` is started.
#[derive(Debug, Clone)]
pub struct NodeOptions {
  /// `node`: a name looked up in PATH or a path. Default `node`.
  pub node: String,
  /// Node options before the driver (`--max-old-space-size=512`).
  pub exec_argv: Vec<String>,
  /// cwd (`None`: the host's), environment, limits, parent death, sandbox.
  pub process: ProcessOptions,
  /// JavaScript run after every start (first start, restarts, reset).
  pub init_code: Option<String>,
  pub owner: u64,
  /// The defaults of each cell ([`RunOptions::session`]): its timeout (an
  /// interrupt, the state kept), how long the cell may take to stop after
  /// the SIGINT of its timeout or of an interrupt before `node` is killed
  /// and its state lost (`kill_grace`), the bytes kept per stream. A cell
  /// has no stdin: an `input` is `EINVAL` at the start.
  pub run: RunOptions,
  pub startup_timeout: Duration,
  /// Cells `history()` keeps (the oldest dropped past it). Default 1000.
  pub max_history: usize,
}

impl Default for NodeOptions {
  fn default() -> Self {
    NodeOptions {
      node: "node".into(),
      exec_argv: Vec::new(),
      process: ProcessOptions::default(),
      init_code: None,
      owner: 0,
      run: RunOptions::session(),
      startup_timeout: Duration::from_secs(30),
      max_history: super::cell::DEFAULT_MAX_HISTORY,
    }
  }
}

impl From<NodeOptions> for DriverSpec {
  fn from(o: NodeOptions) -> DriverSpec {
    let mut args: Vec<std::ffi::OsString> = o.exec_argv.into_iter().map(Into::into).collect();
    args.extend(
      [
        "--disable-warning=ExperimentalWarning",
        "--input-type=module",
        "-e",
        DRIVER,
      ]
      .map(Into::into),
    );
    DriverSpec {
      kind: DriverKind::Node,
      program: o.node,
      args,
      process: o.process,
      init_code: o.init_code,
      owner: o.owner,
      run: o.run,
      startup_timeout: o.startup_timeout,
      max_history: o.max_history,
    }
  }
}

/// The oldest Node a session runs on (the driver checks it as it starts).
pub const MIN_NODE: (u32, u32) = (20, 17);

/// `exec: NodeSession needs Node 20.17 or later; node is v18.19.0 (ENOTSUP)`.
pub(crate) fn unsupported(shown: &str, version: &str) -> ExecError {
  ExecError::new(
    ErrorCode::ENOTSUP,
    format!(
      "NodeSession needs Node {}.{} or later; {shown} is {version}",
      MIN_NODE.0, MIN_NODE.1
    ),
  )
}

/// `node` exited as it started: when it is older than [`MIN_NODE`] (one
/// before 20.11 refuses the driver's `--disable-warning` before the driver
/// can check), that is the error. Asks `node --version`.
pub(crate) async fn too_old(program: &std::path::Path, shown: &str) -> Option<ExecError> {
  let run = tokio::process::Command::new(program)
    .arg("--version")
    .stdin(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .kill_on_drop(true)
    .output();
  let out = tokio::time::timeout(Duration::from_secs(5), run)
    .await
    .ok()?
    .ok()?;
  let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
  let mut parts = version.trim_start_matches('v').split('.');
  let major: u32 = parts.next()?.parse().ok()?;
  let minor: u32 = parts.next()?.parse().ok()?;
  ((major, minor) < MIN_NODE).then(|| unsupported(shown, &version))
}

/// The code the driver evaluates for a cell, or the error the cell fails
/// with (a TypeScript syntax error: `SyntaxError`, nothing runs).
pub fn prepare_cell(code: &str, language: CellLanguage) -> Result<String, CellException> {
  let js = match language {
    CellLanguage::JavaScript => code.to_owned(),
    CellLanguage::TypeScript => crate::ts_strip::strip_cell(code).map_err(|why| CellException {
      kind: "SyntaxError".into(),
      message: why.clone(),
      traceback: format!("SyntaxError: {why}\n    at <cell>"),
    })?,
  };
  Ok(rewrite_modules(&js))
}

/// One replacement in the cell's text.
struct Edit {
  from: usize,
  to: usize,
  text: String,
}

/// The cell with its module syntax rewritten (see the module's doc).
fn rewrite_modules(code: &str) -> String {
  if let Some(wrapped) = object_literal(code) {
    return wrapped;
  }
  if !(code.contains("import") || code.contains("export")) {
    return code.to_owned();
  }
  let cm: Lrc<SourceMap> = Default::default();
  let fm = cm.new_source_file(FileName::Anon.into(), code.to_owned());
  let module = GLOBALS.set(&Default::default(), || {
    let mut parser = Parser::new(
      Syntax::Es(Default::default()),
      StringInput::from(&*fm),
      None,
    );
    parser.parse_module().ok()
  });
  let Some(module) = module else {
    return code.to_owned();
  };
  let base = fm.start_pos;
  let at = |p: BytePos| (p - base).0 as usize;
  let src = |s: swc_common::Span| &code[at(s.lo)..at(s.hi)];
  let mut edits = Vec::new();
  for item in &module.body {
    let ModuleItem::ModuleDecl(decl) = item else {
      continue;
    };
    let span = decl.span();
    let (from, to) = (at(span.lo), at(span.hi));
    match decl {
      ModuleDecl::Import(i) => {
        let text = import_text(i, src);
        edits.push(Edit { from, to, text });
      }
      ModuleDecl::ExportDecl(e) => edits.push(blank(code, from, at(e.decl.span().lo))),
      ModuleDecl::ExportDefaultDecl(e) => {
        let inner = match &e.decl {
          DefaultDecl::Class(c) => c.span(),
          DefaultDecl::Fn(f) => f.span(),
          DefaultDecl::TsInterfaceDecl(t) => t.span(),
        };
        edits.push(blank(code, from, at(inner.lo)));
      }
      ModuleDecl::ExportDefaultExpr(e) => {
        let (lo, hi) = (at(e.expr.span().lo), at(e.expr.span().hi));
        let mut open = blank(code, from, lo);
        open.text.replace_range(0..1, "(");
        edits.push(open);
        edits.push(Edit {
          from: hi,
          to: hi,
          text: ")".into(),
        });
      }
      _ => edits.push(blank(code, from, to)),
    }
  }
  let mut calls = DynamicImports(Vec::new());
  module.visit_with(&mut calls);
  for s in calls.0 {
    edits.push(Edit {
      from: at(s.lo),
      to: at(s.hi),
      text: IMPORT.into(),
    });
  }
  apply(code, edits)
}

/// What an `import` declaration becomes: a `const` of the driver's
/// `import()` (see the module's doc). `src` is the text of a span.
fn import_text<'a>(
  i: &swc_ecma_ast::ImportDecl,
  src: impl Fn(swc_common::Span) -> &'a str,
) -> String {
  let target = match &i.with {
    Some(with) => format!("{}, {{ with: {} }}", src(i.src.span), src(with.span)),
    None => src(i.src.span).to_owned(),
  };
  let load = format!("await {IMPORT}({target})");
  let mut names = Vec::new();
  let mut star = None;
  for s in &i.specifiers {
    match s {
      ImportSpecifier::Default(d) => names.push(format!("default: {}", d.local.sym)),
      ImportSpecifier::Namespace(n) => star = Some(n.local.sym.to_string()),
      ImportSpecifier::Named(n) => {
        let imported = match &n.imported {
          Some(ModuleExportName::Ident(id)) => id.sym.to_string(),
          Some(ModuleExportName::Str(s)) => src(s.span).to_owned(),
          None => n.local.sym.to_string(),
        };
        if imported == *n.local.sym {
          names.push(imported);
        } else {
          names.push(format!("{imported}: {}", n.local.sym));
        }
      }
    }
  }
  match (star, names.is_empty()) {
    (None, true) => format!("{load};"),
    (None, false) => format!("const {{ {} }} = {load};", names.join(", ")),
    (Some(ns), true) => format!("const {ns} = {load};"),
    (Some(ns), false) => format!(
      "const {ns} = {load}; const {{ {} }} = {ns};",
      names.join(", ")
    ),
  }
}

/// Spaces for `code[from..to]`, its line breaks kept.
fn blank(code: &str, from: usize, to: usize) -> Edit {
  let text = code[from..to]
    .chars()
    .map(|c| if c == '\n' { '\n' } else { ' ' })
    .collect();
  Edit { from, to, text }
}

/// Apply the edits (none overlap); a replacement that has fewer line breaks
/// than what it replaces gets the missing ones, so the lines after it stay.
fn apply(code: &str, mut edits: Vec<Edit>) -> String {
  edits.sort_by_key(|e| (e.from, e.to));
  let mut out = String::with_capacity(code.len() + 64 * edits.len());
  let mut pos = 0;
  for e in edits {
    if e.from < pos {
      continue;
    }
    out.push_str(&code[pos..e.from]);
    out.push_str(&e.text);
    let lost = code[e.from..e.to].matches('\n').count();
    let kept = e.text.matches('\n').count();
    for _ in kept..lost {
      out.push('\n');
    }
    pos = e.to;
  }
  out.push_str(&code[pos..]);
  out
}

/// `import(x)` calls, by the span of their `import`.
struct DynamicImports(Vec<swc_common::Span>);

impl Visit for DynamicImports {
  fn visit_callee(&mut self, c: &Callee) {
    if let Callee::Import(i) = c {
      self.0.push(i.span);
    }
    c.visit_children_with(self);
  }
}

/// `{ a: 1 }` as a whole cell is an object, not a block: `({ a: 1 })`.
fn object_literal(code: &str) -> Option<String> {
  let t = code.trim();
  if !t.starts_with('{') || t.ends_with(';') {
    return None;
  }
  let wrapped = format!("({t})");
  let cm: Lrc<SourceMap> = Default::default();
  let fm = cm.new_source_file(FileName::Anon.into(), wrapped.clone());
  let ok = GLOBALS.set(&Default::default(), || {
    let mut parser = Parser::new(
      Syntax::Es(Default::default()),
      StringInput::from(&*fm),
      None,
    );
    parser.parse_expr().is_ok() && parser.take_errors().is_empty()
  });
  ok.then_some(wrapped)
}

/// The program of a cell: only used by tests to check the rewrite parses.
#[cfg(test)]
fn parses_as_script(code: &str) -> Option<swc_ecma_ast::Module> {
  let cm: Lrc<SourceMap> = Default::default();
  let fm = cm.new_source_file(FileName::Anon.into(), code.to_owned());
  GLOBALS.set(&Default::default(), || {
    let mut parser = Parser::new(
      Syntax::Es(Default::default()),
      StringInput::from(&*fm),
      None,
    );
    parser.parse_module().ok()
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn imports_become_awaited_dynamic_imports_on_the_same_lines() {
    let code = "import fs, { readFileSync as rf, existsSync } from 'node:fs'\nimport * as path from \"node:path\"\nimport './side.mjs'\nfs.x";
    let out = rewrite_modules(code);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
      lines[0],
      format!("const {{ default: fs, readFileSync: rf, existsSync }} = await {IMPORT}('node:fs');")
    );
    assert_eq!(
      lines[1],
      format!("const path = await {IMPORT}(\"node:path\");")
    );
    assert_eq!(lines[2], format!("await {IMPORT}('./side.mjs');"));
    assert_eq!(lines[3], "fs.x");
    assert!(parses_as_script(&out).is_some());
  }

  #[test]
  fn a_multi_line_import_keeps_the_lines_after_it() {
    let out = rewrite_modules("import {\n  a,\n  b,\n} from 'm'\nthrow 1");
    assert_eq!(out.lines().count(), 5, "{out}");
    assert_eq!(out.lines().nth(4), Some("throw 1"));
  }

  #[test]
  fn exports_are_dropped_and_dynamic_imports_rerouted() {
    let out = rewrite_modules(
      "export const a = 1\nexport default a + 1\nexport { a }\nconst m = await import('x')",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].trim_start(), "const a = 1");
    assert_eq!(lines[1].split_whitespace().collect::<String>(), "(a+1)");
    assert_eq!(lines[2].trim(), "");
    assert_eq!(lines[3], format!("const m = await {IMPORT}('x')"));
  }

  #[test]
  fn an_object_literal_cell_is_wrapped_and_a_block_is_not() {
    assert_eq!(rewrite_modules("{ a: 1, b: [2] }"), "({ a: 1, b: [2] })");
    assert_eq!(rewrite_modules("{ let x = 1; x }"), "{ let x = 1; x }");
  }

  #[test]
  fn code_that_does_not_parse_is_sent_as_it_is() {
    assert_eq!(rewrite_modules("import { from 'x'"), "import { from 'x'");
  }

  #[test]
  fn typescript_types_are_stripped_and_an_enum_transformed() {
    let out = prepare_cell(
      "let n: number = 1\ninterface P { x: number }\nn",
      CellLanguage::TypeScript,
    )
    .unwrap();
    assert_eq!(out.lines().count(), 3);
    assert!(!out.contains("number"), "{out}");
    let e = prepare_cell(
      "enum Color { Red, Green }\nColor.Green",
      CellLanguage::TypeScript,
    )
    .unwrap();
    assert!(e.contains("Color"), "{e}");
    assert!(!e.contains("enum "), "{e}");
    let bad = prepare_cell("let x: = 1", CellLanguage::TypeScript).unwrap_err();
    assert_eq!(bad.kind, "SyntaxError");
  }
}
