//! Languages: which interpreter runs the code and how the code reaches it.
//!
//! Small code goes inline (`bash -c`, `node -e`, `python3 -c`), exactly as a
//! user would type it. Code that the kernel would refuse as one argv string
//! (over 128 KiB; we switch at 64 KiB) or that contains a NUL byte goes
//! through a temp file read by a one-line bootstrap that keeps the inline
//! semantics: `require`/`import` resolve from `cwd`, `__name__ == '__main__'`.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{ErrorCode, ExecError};
use crate::process::spec::{resolve_program, EnvSpec};
use crate::process::supervise::ProcessSpec;
use crate::ts_strip::{self, TsPath};

/// Code up to this size is passed inline.
pub const INLINE_MAX: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
  Bash,
  JavaScript,
  TypeScript,
  Python,
  /// PowerShell: `pwsh` (PowerShell 7), else Windows PowerShell (`powershell`).
  PowerShell,
  /// Windows' `cmd.exe` (`/d /s /c`); ENOENT elsewhere.
  Cmd,
}

impl Language {
  pub fn as_str(&self) -> &'static str {
    match self {
      Language::Bash => "bash",
      Language::JavaScript => "javascript",
      Language::TypeScript => "typescript",
      Language::Python => "python",
      Language::PowerShell => "powershell",
      Language::Cmd => "cmd",
    }
  }
}

impl FromStr for Language {
  type Err = ExecError;
  fn from_str(s: &str) -> Result<Self, ExecError> {
    match s {
      "bash" | "sh" | "shell" => Ok(Language::Bash),
      "javascript" | "js" | "node" => Ok(Language::JavaScript),
      "typescript" | "ts" | "tsx" => Ok(Language::TypeScript),
      "python" | "python3" | "py" => Ok(Language::Python),
      "powershell" | "pwsh" | "ps1" => Ok(Language::PowerShell),
      "cmd" | "bat" => Ok(Language::Cmd),
      other => Err(ExecError::invalid(format!(
        "Unsupported language '{other}'"
      ))),
    }
  }
}

/// Where the host finds the interpreters it brings along.
#[derive(Debug, Clone, Default)]
pub struct Toolchain {
  /// The node binary to use when `node` is not in PATH (the host's own).
  pub fallback_node: Option<PathBuf>,
  /// tsx's CLI script (`tsx/dist/cli.mjs`) shipped with the package.
  pub bundled_tsx: Option<PathBuf>,
}

/// A spec ready to spawn, plus the temp file that must outlive the run.
pub struct Launch {
  pub spec: ProcessSpec,
  pub temp: Option<tempfile::TempPath>,
}

const JS_BOOT: &str = "const f=process.argv[1];process.argv.splice(1,1);\
const c=require('fs').readFileSync(f,'utf8');\
require('vm').runInThisContext(c,{filename:'[eval]'})";

const PY_BOOT: &str = "import sys\n\
_p=sys.argv.pop(1)\n\
with open(_p,'rb') as _f: _c=_f.read()\n\
del _f\n\
_g={'__name__':'__main__','__builtins__':__builtins__,'__doc__':None}\n\
exec(compile(_c,'<string>','exec'),_g)";

fn needs_file(code: &str) -> bool {
  code.len() > INLINE_MAX || code.as_bytes().contains(&0)
}

pub(crate) fn temp_with(
  code: &str,
  dir: Option<&Path>,
  suffix: &str,
) -> Result<tempfile::TempPath, ExecError> {
  let mut b = tempfile::Builder::new();
  b.prefix(".exec-native-").suffix(suffix);
  let f = match dir {
    Some(d) => b.tempfile_in(d).or_else(|_| b.tempfile()),
    None => b.tempfile(),
  };
  let mut f = f.map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot write the code to a temp file: {e}"),
    )
  })?;
  f.write_all(code.as_bytes())
    .and_then(|_| f.flush())
    .map_err(|e| {
      ExecError::new(
        ErrorCode::EIO,
        format!("cannot write the code to a temp file: {e}"),
      )
    })?;
  Ok(f.into_temp_path())
}

fn find_node(env: &EnvSpec, cwd: &Path, tc: &Toolchain) -> Result<PathBuf, ExecError> {
  match resolve_program("node", env.path_var().as_ref(), cwd) {
    Ok(p) => Ok(p),
    Err(e) => tc.fallback_node.clone().filter(|p| p.exists()).ok_or(e),
  }
}

/// Build the process that runs `code` in `lang`, checking the interpreter exists.
/// TypeScript takes the fast path when it can (see [`crate::ts_strip`]).
pub fn prepare(
  lang: Language,
  code: &str,
  cwd: &Path,
  env: &EnvSpec,
  tc: &Toolchain,
) -> Result<Launch, ExecError> {
  prepare_with(lang, code, cwd, env, tc, TsPath::Auto, false)
}

/// [`prepare`], choosing how TypeScript runs: its types stripped in-process
/// and plain node (`Auto` when code and project allow it, or `Strip`), or tsx.
/// `no_unix_sockets` (a sandbox with network off): tsx's command line opens
/// a Unix socket server, which such a sandbox refuses, so tsx runs as a
/// loader of node instead (`node --import <tsx>/dist/loader.mjs <file>`,
/// the code in a file beside the caller's).
pub fn prepare_with(
  lang: Language,
  code: &str,
  cwd: &Path,
  env: &EnvSpec,
  tc: &Toolchain,
  ts: TsPath,
  no_unix_sockets: bool,
) -> Result<Launch, ExecError> {
  if lang == Language::TypeScript && ts != TsPath::Tsx {
    let stripped = match ts_strip::project_wants_tsx(cwd) {
      Some(why) if ts == TsPath::Auto => Err(why),
      _ => ts_strip::strip(code),
    };
    match stripped {
      Ok(js) => return prepare_with(Language::JavaScript, &js, cwd, env, tc, ts, no_unix_sockets),
      Err(why) if ts == TsPath::Strip => {
        return Err(ExecError::invalid(format!(
          "this TypeScript needs more than stripping types (use typescript: 'tsx'): {why}"
        )))
      }
      Err(_) => {}
    }
  }
  // the interpreter, the flag that runs code inline, and for a file: the
  // bootstrap that keeps the inline semantics (None: the file is the
  // program), the file's suffix and where it goes (None: the temp dir)
  let (mut spec, flag, boot, suffix, dir) = match lang {
    Language::Bash => (
      ProcessSpec::new(find_bash(env, cwd)?),
      "-c",
      None,
      ".sh",
      None,
    ),
    Language::Python => (python_spec(env, cwd)?, "-c", Some(PY_BOOT), ".py", None),
    Language::JavaScript => (
      ProcessSpec::new(find_node(env, cwd, tc)?),
      "-e",
      Some(JS_BOOT),
      ".js",
      None,
    ),
    // the caller's own tsx first, then the one shipped with the package; a
    // file goes beside the caller's code, so relative imports resolve from cwd
    Language::TypeScript if no_unix_sockets => {
      (tsx_loader_spec(env, cwd, tc)?, "-e", None, ".ts", Some(cwd))
    }
    Language::TypeScript => (tsx_spec(env, cwd, tc)?, "-e", None, ".ts", Some(cwd)),
    Language::PowerShell => return powershell_launch(code, cwd, env),
    Language::Cmd => return cmd_launch(code, cwd, env),
  };
  let as_loader = lang == Language::TypeScript && no_unix_sockets;
  if !needs_file(code) && !as_loader {
    spec.args.push(OsString::from(flag));
    spec.args.push(OsString::from(code));
    return Ok(Launch { spec, temp: None });
  }
  let t = temp_with(code, dir, suffix)?;
  if let Some(boot) = boot {
    spec.args.push(OsString::from(flag));
    spec.args.push(OsString::from(boot));
  }
  spec.args.push(t.to_path_buf().into_os_string());
  Ok(Launch {
    spec,
    temp: Some(t),
  })
}

/// What [`find_bash`] says on Windows when there is no bash to run.
pub const BASH_NOT_FOUND: &str =
  "bash was not found: install Git for Windows (https://git-scm.com) or put bash.exe on PATH";

/// What the bash-based entry points (`ShellSession`, the agent tool, a
/// `serve` session of kind `shell`) fail with on Windows: with no bash found
/// (as [`find_bash`] finds it), its ENOENT that names the fix; with one,
/// ENOTSUP, since they do not run there yet.
#[cfg(windows)]
pub fn needs_bash(what: &str) -> ExecError {
  let cwd = std::env::current_dir().unwrap_or_default();
  match find_bash(&EnvSpec::inherit(), &cwd) {
    Err(e) => e,
    Ok(bash) => ExecError::new(
      ErrorCode::ENOTSUP,
      format!(
        "{what} is not supported on Windows yet (bash was found at {})",
        bash.display()
      ),
    ),
  }
}

/// bash: on Windows, Git for Windows' (its usual places, then PATH, but
/// never `System32\\bash.exe`, which is WSL's launcher and runs Linux, not
/// this host); elsewhere the PATH's. The `bash` language, and on Windows
/// the agent tool and `ShellSession`, find it here.
pub fn find_bash(env: &EnvSpec, cwd: &Path) -> Result<PathBuf, ExecError> {
  if !crate::platform::WINDOWS {
    return resolve_program("bash", env.path_var().as_ref(), cwd);
  }
  let installed = [
    "ProgramFiles",
    "ProgramW6432",
    "ProgramFiles(x86)",
    "LOCALAPPDATA",
  ]
  .iter()
  .filter_map(std::env::var_os)
  .flat_map(|d| {
    let d = PathBuf::from(d);
    [
      d.join("Git").join("bin").join("bash.exe"),
      d.join("Programs").join("Git").join("bin").join("bash.exe"),
    ]
  });
  let in_path = resolve_program("bash", env.path_var().as_ref(), cwd)
    .ok()
    .filter(|p| {
      !p.to_string_lossy()
        .to_ascii_lowercase()
        .contains("\\system32\\")
    });
  installed
    .filter(|p| p.is_file())
    .chain(in_path)
    .next()
    .ok_or_else(|| ExecError::new(ErrorCode::ENOENT, BASH_NOT_FOUND))
}

/// Python: `python3` (POSIX); on Windows `python`, else the launcher `py -3`
/// (no `python3`: on Windows it is usually the Store's placeholder).
fn python_spec(env: &EnvSpec, cwd: &Path) -> Result<ProcessSpec, ExecError> {
  let path = env.path_var();
  if !crate::platform::WINDOWS {
    return Ok(ProcessSpec::new(resolve_program(
      "python3",
      path.as_ref(),
      cwd,
    )?));
  }
  if let Ok(p) = resolve_program("python", path.as_ref(), cwd) {
    return Ok(ProcessSpec::new(p));
  }
  match resolve_program("py", path.as_ref(), cwd) {
    Ok(p) => Ok(ProcessSpec::new(p).arg("-3")),
    Err(_) => Err(ExecError::new(
      ErrorCode::ENOENT,
      "python not found in PATH (neither python nor the py launcher)",
    )),
  }
}

/// PowerShell: `pwsh` (PowerShell 7), else `powershell` (Windows PowerShell).
/// The `powershell` language and the MCP server's `--shell powershell` find
/// it here.
pub fn find_powershell(env: &EnvSpec, cwd: &Path) -> Result<PathBuf, ExecError> {
  let path = env.path_var();
  resolve_program("pwsh", path.as_ref(), cwd)
    .or_else(|_| resolve_program("powershell", path.as_ref(), cwd))
    .map_err(|_| {
      ExecError::new(
        ErrorCode::ENOENT,
        "PowerShell not found in PATH (neither pwsh nor powershell)",
      )
    })
}

/// PowerShell runs `code` with `-Command` (a file with `-File` when large):
/// no profile, no prompts, the execution policy bypassed for the file.
fn powershell_launch(code: &str, cwd: &Path, env: &EnvSpec) -> Result<Launch, ExecError> {
  let program = find_powershell(env, cwd)?;
  let mut spec = ProcessSpec::new(program)
    .arg("-NoLogo")
    .arg("-NoProfile")
    .arg("-NonInteractive");
  if !needs_file(code) {
    spec.args.extend(["-Command".into(), OsString::from(code)]);
    return Ok(Launch { spec, temp: None });
  }
  let t = temp_with(code, None, ".ps1")?;
  spec.args.extend([
    "-ExecutionPolicy".into(),
    "Bypass".into(),
    "-File".into(),
    t.to_path_buf().into_os_string(),
  ]);
  Ok(Launch {
    spec,
    temp: Some(t),
  })
}

/// cmd.exe runs one line inline (`/d /s /c "<line>"`, passed verbatim as
/// Node does for cmd); code of several lines (or large) runs as a temp
/// `.cmd` file, which cmd.exe reads line by line.
pub(crate) fn cmd_launch(code: &str, cwd: &Path, env: &EnvSpec) -> Result<Launch, ExecError> {
  let program = if crate::platform::WINDOWS {
    std::env::var_os("ComSpec")
      .map(PathBuf::from)
      .filter(|p| p.is_file())
      .map_or_else(|| resolve_program("cmd", env.path_var().as_ref(), cwd), Ok)
  } else {
    Err(ExecError::new(
      ErrorCode::ENOENT,
      "cmd is Windows' shell: there is no cmd.exe on this system",
    ))
  }?;
  let inline = !needs_file(code) && code.len() < 8000 && !code.contains(['\r', '\n']);
  if inline {
    let spec = ProcessSpec::new(program)
      .arg("/d")
      .arg("/s")
      .arg("/c")
      .arg(format!("\"{code}\""));
    return Ok(Launch { spec, temp: None });
  }
  let t = temp_with(&format!("@echo off\r\n{code}\r\n"), None, ".cmd")?;
  Ok(Launch {
    spec: ProcessSpec::new(t.to_path_buf()),
    temp: Some(t),
  })
}

/// tsx as a loader of node, for `cwd`: `<cwd>/node_modules/tsx`'s, else the
/// bundled one.
fn tsx_loader_spec(env: &EnvSpec, cwd: &Path, tc: &Toolchain) -> Result<ProcessSpec, ExecError> {
  let local = cwd.join("node_modules/tsx/dist/loader.mjs");
  let loader = if local.is_file() {
    local
  } else if let Some(l) = tc
    .bundled_tsx
    .as_ref()
    .and_then(|cli| cli.parent())
    .map(|d| d.join("loader.mjs"))
    .filter(|p| p.is_file())
  {
    l
  } else {
    return Err(ExecError::new(
      ErrorCode::ENOENT,
      "tsx's loader not found (neither <cwd>/node_modules/tsx nor the bundled copy)",
    ));
  };
  Ok(
    ProcessSpec::new(find_node(env, cwd, tc)?)
      .arg("--import")
      .arg(loader),
  )
}

/// tsx for `cwd`: `<cwd>/node_modules/.bin/tsx`, else the bundled CLI on node.
fn tsx_spec(env: &EnvSpec, cwd: &Path, tc: &Toolchain) -> Result<ProcessSpec, ExecError> {
  // Windows: npm's shim is `tsx.cmd`, which would put the code through
  // cmd.exe: the project's tsx runs as its CLI script on node instead
  if crate::platform::WINDOWS {
    let cli = cwd.join("node_modules/tsx/dist/cli.mjs");
    if cli.is_file() {
      return Ok(ProcessSpec::new(find_node(env, cwd, tc)?).arg(cli));
    }
  }
  let local = cwd.join("node_modules/.bin/tsx");
  if local.is_file() && !crate::platform::WINDOWS {
    Ok(ProcessSpec::new(local))
  } else if let Some(cli) = tc.bundled_tsx.clone().filter(|p| p.is_file()) {
    Ok(ProcessSpec::new(find_node(env, cwd, tc)?).arg(cli))
  } else {
    Err(ExecError::new(
      ErrorCode::ENOENT,
      "tsx not found (neither <cwd>/node_modules/.bin/tsx nor the bundled copy)",
    ))
  }
}

/// `$'...'` quoting: every byte of `s` reaches bash unchanged.
pub fn ansi_c_quote(s: &str) -> String {
  let mut out = String::with_capacity(s.len() + 3);
  out.push_str("$'");
  for ch in s.chars() {
    match ch {
      '\\' => out.push_str("\\\\"),
      '\'' => out.push_str("\\'"),
      '\n' => out.push_str("\\n"),
      c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
      c => out.push(c),
    }
  }
  out.push('\'');
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn parses_languages() {
    assert_eq!("python".parse::<Language>().unwrap(), Language::Python);
    assert_eq!(
      "ruby".parse::<Language>().unwrap_err().message(),
      "exec: Unsupported language 'ruby' (EINVAL)"
    );
  }

  #[test]
  fn small_code_is_inline_large_code_is_a_file() {
    let cwd = Path::new("/tmp");
    let env = EnvSpec::inherit();
    let l = prepare(Language::Bash, "echo hi", cwd, &env, &Toolchain::default()).unwrap();
    assert_eq!(
      l.spec.args,
      vec![OsString::from("-c"), OsString::from("echo hi")]
    );
    assert!(l.temp.is_none());
    let big = "#".repeat(INLINE_MAX + 1);
    let l = prepare(Language::Bash, &big, cwd, &env, &Toolchain::default()).unwrap();
    let t = l.temp.expect("temp file");
    assert_eq!(std::fs::read_to_string(&t).unwrap().len(), INLINE_MAX + 1);
  }

  #[test]
  fn missing_interpreter_is_enoent() {
    let mut env = EnvSpec::inherit();
    env.vars.push(("PATH".into(), "/nonexistent".into()));
    let e = match prepare(
      Language::Python,
      "1",
      Path::new("/tmp"),
      &env,
      &Toolchain::default(),
    ) {
      Err(e) => e,
      Ok(_) => panic!("python3 found in /nonexistent"),
    };
    assert_eq!(e.message(), "exec: python3 not found in PATH (ENOENT)");
  }
}
