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
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use swc_common::errors::{Handler, HANDLER};
use swc_common::sync::Lrc;
use swc_common::{FileName, SourceMap, GLOBALS};
use swc_ecma_ast::{Class, Function, GetterProp, SetterProp, ThisExpr};
use swc_ecma_parser::{Parser, StringInput, Syntax, TsSyntax};
use swc_ecma_visit::{Visit, VisitWith};
use swc_ts_fast_strip::{operate, Mode, Options};

use crate::error::ExecError;

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

impl FromStr for TsPath {
  type Err = ExecError;
  fn from_str(s: &str) -> Result<Self, ExecError> {
    match s {
      "auto" => Ok(TsPath::Auto),
      "strip" => Ok(TsPath::Strip),
      "tsx" => Ok(TsPath::Tsx),
      other => Err(ExecError::invalid(format!(
        "options.typescript must be 'auto', 'strip' or 'tsx', got '{other}'"
      ))),
    }
  }
}

/// A `Write` into a shared buffer, for the diagnostics of the handler.
#[derive(Clone, Default)]
struct Diagnostics(Arc<Mutex<Vec<u8>>>);

impl Write for Diagnostics {
  fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
    self.0.lock().unwrap().extend_from_slice(buf);
    Ok(buf.len())
  }
  fn flush(&mut self) -> std::io::Result<()> {
    Ok(())
  }
}

/// The code with its types stripped, or why that is not possible (the first
/// diagnostic, one line).
pub fn strip(code: &str) -> Result<String, String> {
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
      let text = String::from_utf8_lossy(&diags.0.lock().unwrap()).into_owned();
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
    assert_eq!("auto".parse::<TsPath>().unwrap(), TsPath::Auto);
    assert_eq!("tsx".parse::<TsPath>().unwrap(), TsPath::Tsx);
    assert_eq!(
      "esbuild".parse::<TsPath>().unwrap_err().message(),
      "exec: options.typescript must be 'auto', 'strip' or 'tsx', got 'esbuild' (EINVAL)"
    );
  }
}
