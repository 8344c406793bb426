//! What to run: program resolution, environment merging, working-directory
//! checks, all done before anything is spawned so that errors are clear.

use std::ffi::OsString;
#[cfg(unix)]
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, ExecError};

/// How the child's environment is built.
#[derive(Debug, Clone, Default)]
pub struct EnvSpec {
  /// Variables set on top of (or instead of) the host environment.
  pub vars: Vec<(String, String)>,
  /// Start from the host environment (`true`, the default) or from nothing.
  pub extend: bool,
  /// Variables removed from the result (exact names).
  pub remove: Vec<String>,
  /// When set, only host variables matching one of these patterns are passed
  /// (`*` matches any run of characters: `LANG`, `LC_*`). Variables given in
  /// `vars` are always passed.
  pub allow: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped (`*_TOKEN`,
  /// `AWS_*`). Variables given in `vars` are always passed.
  pub deny: Vec<String>,
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
  let (p, n) = (pattern.as_bytes(), name.as_bytes());
  let (mut pi, mut ni) = (0, 0);
  let (mut star, mut mark) = (None, 0);
  while ni < n.len() {
    if pi < p.len() && p[pi] == b'*' {
      star = Some(pi);
      pi += 1;
      mark = ni;
    } else if pi < p.len() && p[pi] == n[ni] {
      pi += 1;
      ni += 1;
    } else if let Some(s) = star {
      pi = s + 1;
      mark += 1;
      ni = mark;
    } else {
      return false;
    }
  }
  while pi < p.len() && p[pi] == b'*' {
    pi += 1;
  }
  pi == p.len()
}

impl EnvSpec {
  pub fn inherit() -> Self {
    EnvSpec {
      vars: Vec::new(),
      extend: true,
      remove: Vec::new(),
      allow: None,
      deny: Vec::new(),
    }
  }

  /// The environment the options of every API describe (the addon's and
  /// `serve`'s): `extend` (default `true`) the host environment, set each
  /// variable of `vars` or, for `None`, remove it, pass host variables by the
  /// `allow` / `deny` patterns. Checked with [`EnvSpec::validate`].
  pub fn from_options(
    extend: Option<bool>,
    vars: Vec<(String, Option<String>)>,
    allow: Option<Vec<String>>,
    deny: Option<Vec<String>>,
  ) -> Result<Self, ExecError> {
    let mut spec = EnvSpec::inherit();
    spec.extend = extend.unwrap_or(true);
    for (k, v) in vars {
      match v {
        Some(v) => spec.vars.push((k, v)),
        None => spec.remove.push(k),
      }
    }
    spec.allow = allow;
    spec.deny = deny.unwrap_or_default();
    spec.validate()?;
    Ok(spec)
  }

  /// Check every key and value: no `=` in keys, no NUL anywhere, no empty key.
  pub fn validate(&self) -> Result<(), ExecError> {
    for (k, v) in &self.vars {
      if k.is_empty() {
        return Err(ExecError::invalid("env has an empty variable name"));
      }
      if k.contains('=') {
        return Err(ExecError::invalid(format!(
          "env variable name '{k}' contains '='"
        )));
      }
      if k.contains('\0') || v.contains('\0') {
        return Err(ExecError::invalid(format!(
          "env variable '{}' contains a NUL byte",
          k.replace('\0', "\\0")
        )));
      }
    }
    Ok(())
  }

  /// Whether the spec changes nothing (the child can inherit `environ` as is).
  pub fn is_plain_inherit(&self) -> bool {
    self.extend
      && self.vars.is_empty()
      && self.remove.is_empty()
      && self.allow.is_none()
      && self.deny.is_empty()
  }

  /// Whether a host variable passes the allow/deny lists.
  fn passes(&self, name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    if let Some(allow) = &self.allow {
      if !allow.iter().any(|p| glob_match(p, &name)) {
        return false;
      }
    }
    !self.deny.iter().any(|p| glob_match(p, &name))
  }

  /// The full environment of the child.
  pub fn build(&self) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = if self.extend {
      std::env::vars_os()
        .filter(|(k, _)| self.passes(k))
        .collect()
    } else {
      Vec::new()
    };
    for (k, v) in &self.vars {
      let k = OsString::from(k);
      if let Some(slot) = out
        .iter_mut()
        .find(|(ek, _)| crate::platform::env_name_eq(ek, &k.to_string_lossy()))
      {
        slot.1 = OsString::from(v);
      } else {
        out.push((k, OsString::from(v)));
      }
    }
    if !self.remove.is_empty() {
      out.retain(|(k, _)| {
        !self
          .remove
          .iter()
          .any(|r| crate::platform::env_name_eq(k, r))
      });
    }
    out
  }

  /// The PATH the child will see.
  pub fn path_var(&self) -> Option<OsString> {
    let is_path = |k: &str| crate::platform::env_name_eq(std::ffi::OsStr::new(k), "PATH");
    if let Some((_, v)) = self.vars.iter().rev().find(|(k, _)| is_path(k)) {
      return Some(OsString::from(v));
    }
    if self.extend
      && !self.remove.iter().any(|r| is_path(r))
      && self.passes(std::ffi::OsStr::new("PATH"))
    {
      return std::env::var_os("PATH");
    }
    None
  }
}

/// Check that `cwd` exists, is a directory and can be entered.
pub fn check_cwd(cwd: &Path) -> Result<(), ExecError> {
  let shown = cwd.display();
  match std::fs::metadata(cwd) {
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ExecError::new(
      ErrorCode::ENOENT,
      format!("Working directory does not exist '{shown}'"),
    )),
    Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(ExecError::new(
      ErrorCode::EACCES,
      format!("Working directory is not accessible '{shown}'"),
    )),
    Err(e) => Err(ExecError::new(
      ErrorCode::EIO,
      format!("Working directory cannot be read '{shown}': {e}"),
    )),
    Ok(m) if !m.is_dir() => Err(ExecError::new(
      ErrorCode::ENOTDIR,
      format!("Working directory is not a directory '{shown}'"),
    )),
    Ok(_) => {
      if !crate::platform::can_enter(cwd) {
        return Err(ExecError::new(
          ErrorCode::EACCES,
          format!("Working directory is not accessible '{shown}'"),
        ));
      }
      Ok(())
    }
  }
}

/// [`resolve_program`] for a spawn that reports its own failure: a path
/// with a slash is taken as is (relative to `cwd`) without looking at it,
/// and nothing checks `cwd`; a bare name is still looked up in PATH. A spawn
/// that fails then gets the checks' message from [`explain_spawn_failure`].
/// Four system calls fewer per spawn on the way to the child (issue 28).
/// Not for a sandboxed run, whose helper reports an exec's failure as the
/// command's own (exit status 127).
pub fn locate_program(
  program: &str,
  path_var: Option<&OsString>,
  cwd: &Path,
) -> Result<PathBuf, ExecError> {
  if !program.is_empty() && !program.contains('\0') && program.contains(std::path::is_separator) {
    return Ok(crate::platform::with_exe_suffix(cwd.join(program)));
  }
  resolve_program(program, path_var, cwd)
}

/// The program of a spawn of `program` in `cwd`: a sandboxed run's is
/// checked first, with its working directory ([`check_cwd`],
/// [`resolve_program`]); any other's is located only ([`locate_program`]),
/// its failure explained after the spawn ([`explain_spawn_failure`]).
pub fn program_for_spawn(
  program: &str,
  path_var: Option<&OsString>,
  cwd: &Path,
  sandboxed: bool,
) -> Result<PathBuf, ExecError> {
  if sandboxed {
    check_cwd(cwd)?;
    resolve_program(program, path_var, cwd)
  } else {
    locate_program(program, path_var, cwd)
  }
}

/// The error of a spawn of [`locate_program`]'s program that failed with
/// `spawn_error`: the working directory's ([`check_cwd`]) or the
/// program's ([`resolve_program`]) when one of them explains it, as they
/// would have before the spawn; else `spawn_error`.
pub fn explain_spawn_failure(
  program: &str,
  path_var: Option<&OsString>,
  cwd: &Path,
  spawn_error: ExecError,
) -> ExecError {
  if let Err(e) = check_cwd(cwd) {
    return e;
  }
  match resolve_program(program, path_var, cwd) {
    Err(e) => e,
    Ok(_) => spawn_error,
  }
}

/// Find `program` as the child would: a path with a slash is taken as is
/// (relative to `cwd`), a bare name is looked up in the child's PATH.
pub fn resolve_program(
  program: &str,
  path_var: Option<&OsString>,
  cwd: &Path,
) -> Result<PathBuf, ExecError> {
  if program.is_empty() {
    return Err(ExecError::invalid("command is empty"));
  }
  if program.contains('\0') {
    return Err(ExecError::invalid("command contains a NUL byte"));
  }
  if program.contains(std::path::is_separator) {
    let p = crate::platform::with_exe_suffix(cwd.join(program));
    return match std::fs::metadata(&p) {
      Ok(m) if m.is_file() => {
        if crate::platform::is_executable(&p) {
          Ok(p)
        } else {
          Err(ExecError::new(
            ErrorCode::EACCES,
            format!("{program} is not executable"),
          ))
        }
      }
      Ok(_) => Err(ExecError::new(
        ErrorCode::EACCES,
        format!("{program} is not a file"),
      )),
      Err(_) => Err(ExecError::new(
        ErrorCode::ENOENT,
        format!("{program} does not exist"),
      )),
    };
  }
  let path = path_var.cloned().unwrap_or_default();
  which::which_in(program, Some(path), cwd)
    .map_err(|_| ExecError::new(ErrorCode::ENOENT, format!("{program} not found in PATH")))
}

#[cfg(unix)]
/// A program, its arguments and its environment, prepared in the parent for
/// an `execve` between fork and exec. The fork paths (a `pre_exec` step:
/// limits, `dieWithParent`, PTYs) exec through this instead of letting std
/// call `execvp`, whose glibc fallback runs a file the kernel refuses
/// (ENOEXEC: a script without `#!`, a garbage ELF) with `/bin/sh`: the
/// posix_spawn fast path does not, and the same program must give the same
/// result on every path (ESPAWN, "Exec format error").
pub struct ExecImage {
  program: std::ffi::CString,
  _args: Vec<std::ffi::CString>,
  argv: Vec<*const std::ffi::c_char>,
  env: EnvBlock,
  envp: Vec<*const std::ffi::c_char>,
}

// SAFETY: the pointers point into the CStrings and the block owned
// alongside, which are never changed; the image is only read (in the child).
#[cfg(unix)]
unsafe impl Send for ExecImage {}
// SAFETY: shared references only read the pointers and the strings they
// point into, which nothing mutates after construction.
#[cfg(unix)]
unsafe impl Sync for ExecImage {}

#[cfg(unix)]
/// An environment as `execve` takes it: its `NAME=value` entries, each
/// followed by a NUL, in one buffer (one allocation for the whole
/// environment, not three per variable: issue 28).
#[derive(Default, Debug)]
pub struct EnvBlock {
  bytes: Vec<u8>,
  /// Where each entry starts in `bytes`.
  starts: Vec<usize>,
}

#[cfg(unix)]
impl EnvBlock {
  /// `env` in its order.
  pub fn from_pairs<'a>(
    env: impl IntoIterator<Item = &'a (OsString, OsString)>,
  ) -> Result<EnvBlock, ExecError> {
    let mut b = EnvBlock {
      bytes: Vec::with_capacity(4096),
      starts: Vec::with_capacity(64),
    };
    for (k, v) in env {
      b.push(k.as_bytes(), v.as_bytes())?;
    }
    Ok(b)
  }

  /// The host's own environment as `std::env::vars_os` reads it (in its
  /// order; an entry without a `=` after its first byte is left out, as
  /// std does), without the variable `skip`: copied from `environ` into the
  /// block ([`crate::platform::environ_entries`]), with no string made per
  /// variable.
  pub fn inherited(skip: &str) -> EnvBlock {
    let mut b = EnvBlock {
      bytes: Vec::with_capacity(4096),
      starts: Vec::with_capacity(64),
    };
    crate::platform::environ_entries(|entry| {
      let Some(eq) = entry.iter().skip(1).position(|&c| c == b'=') else {
        return;
      };
      if &entry[..eq + 1] == skip.as_bytes() {
        return;
      }
      b.starts.push(b.bytes.len());
      b.bytes.extend_from_slice(entry);
      b.bytes.push(0);
    });
    b
  }

  /// Add `name=value` at the end.
  pub fn push(&mut self, name: &[u8], value: &[u8]) -> Result<(), ExecError> {
    if name.contains(&0) || value.contains(&0) {
      return Err(ExecError::invalid("an env variable contains a NUL byte"));
    }
    self.starts.push(self.bytes.len());
    self.bytes.extend_from_slice(name);
    self.bytes.push(b'=');
    self.bytes.extend_from_slice(value);
    self.bytes.push(0);
    Ok(())
  }

  /// The entries, `NAME=value` without their NUL.
  pub fn entries(&self) -> impl DoubleEndedIterator<Item = &[u8]> {
    self.starts.iter().enumerate().map(|(i, &s)| {
      let end = self.starts.get(i + 1).copied().unwrap_or(self.bytes.len());
      &self.bytes[s..end - 1]
    })
  }

  /// The value of the last `name` (as a lookup in the child would find).
  pub fn var(&self, name: &str) -> Option<&[u8]> {
    let name = name.as_bytes();
    self.entries().rev().find_map(|e| {
      (e.len() > name.len() && e.starts_with(name) && e[name.len()] == b'=')
        .then(|| &e[name.len() + 1..])
    })
  }

  fn pointers(&self) -> Vec<*const std::ffi::c_char> {
    self
      .starts
      .iter()
      .map(|&s| self.bytes[s..].as_ptr().cast())
      .chain(std::iter::once(std::ptr::null()))
      .collect()
  }
}

#[cfg(unix)]
impl ExecImage {
  /// `program` as the child will exec it (a path with a slash is taken as
  /// is, relative to the child's working directory; a bare name is looked up
  /// in the child's `PATH`, as std would), with `argv` (its first element is
  /// what the program sees as its name) and exactly `env`.
  pub fn new(
    program: &Path,
    argv: &[OsString],
    env: EnvBlock,
    cwd: Option<&Path>,
  ) -> Result<ExecImage, ExecError> {
    let nul = || ExecError::invalid("an argument contains a NUL byte");
    let mut path = program.to_path_buf();
    if !program.as_os_str().as_bytes().contains(&b'/') {
      let path_var = env
        .var("PATH")
        .map(|v| std::ffi::OsStr::from_bytes(v).to_owned());
      let dir = cwd
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
      if let Ok(found) = which::which_in(program, path_var, dir) {
        path = found;
      }
    }
    let program = std::ffi::CString::new(path.into_os_string().into_vec()).map_err(|_| nul())?;
    let args = argv
      .iter()
      .map(|a| std::ffi::CString::new(a.as_bytes()).map_err(|_| nul()))
      .collect::<Result<Vec<_>, _>>()?;
    let argv = args
      .iter()
      .map(|c| c.as_ptr())
      .chain(std::iter::once(std::ptr::null()))
      .collect::<Vec<_>>();
    Ok(ExecImage {
      argv,
      envp: env.pointers(),
      program,
      _args: args,
      env,
    })
  }

  /// The arguments after the program's name, and the `NAME=value`
  /// strings of the environment.
  pub fn strings(&self) -> (&[std::ffi::CString], Vec<&[u8]>) {
    (
      self._args.get(1..).unwrap_or(&[]),
      self.env.entries().collect(),
    )
  }

  /// The program, argv and envp as `execve` takes them (the pointers live
  /// as long as the image).
  pub fn parts(
    &self,
  ) -> (
    &std::ffi::CStr,
    *const *const std::ffi::c_char,
    *const *const std::ffi::c_char,
  ) {
    (&self.program, self.argv.as_ptr(), self.envp.as_ptr())
  }

  /// In the child: `execve`. Returns only on failure, with the error (which
  /// std's pre-exec machinery reports to the parent as the spawn error).
  /// Async-signal-safe.
  pub fn exec(&self) -> std::io::Error {
    crate::platform::execve(&self.program, &self.argv, &self.envp)
  }
}

#[cfg(all(test, unix))]
mod tests {
  use super::*;

  #[test]
  fn env_from_options_sets_removes_and_checks() {
    let e = EnvSpec::from_options(
      Some(false),
      vec![("A".into(), Some("1".into())), ("B".into(), None)],
      Some(vec!["PATH".into()]),
      None,
    )
    .unwrap();
    assert!(!e.extend);
    assert_eq!(e.vars, vec![("A".to_owned(), "1".to_owned())]);
    assert_eq!(e.remove, vec!["B".to_owned()]);
    assert_eq!(e.allow, Some(vec!["PATH".to_owned()]));
    assert!(EnvSpec::from_options(None, vec![], None, None)
      .unwrap()
      .is_plain_inherit());
    let bad = EnvSpec::from_options(None, vec![("A=B".into(), Some("x".into()))], None, None);
    assert!(bad.unwrap_err().message().contains("contains '='"));
  }

  #[test]
  fn env_block_holds_the_entries_in_order_with_one_buffer() {
    let pairs: Vec<(OsString, OsString)> = vec![
      ("A".into(), "1".into()),
      ("PATH".into(), "/a".into()),
      ("B".into(), "".into()),
      ("PATH".into(), "/b".into()),
    ];
    let b = EnvBlock::from_pairs(&pairs).unwrap();
    let entries: Vec<&[u8]> = b.entries().collect();
    assert_eq!(entries, [&b"A=1"[..], b"PATH=/a", b"B=", b"PATH=/b"]);
    // the last one wins, as a lookup in the child finds it
    assert_eq!(b.var("PATH"), Some(&b"/b"[..]));
    assert_eq!(b.var("PAT"), None);
    assert_eq!(b.var("B"), Some(&b""[..]));
    // execve's array: a pointer to each NUL-terminated entry, then NULL
    let ptrs = b.pointers();
    assert_eq!(ptrs.len(), 5);
    assert!(ptrs[4].is_null());
    // SAFETY: the pointers point into `b`, alive here, at NUL-terminated entries
    let third = unsafe { std::ffi::CStr::from_ptr(ptrs[2]) };
    assert_eq!(third.to_bytes(), b"B=");
    let nul = vec![("A".into(), OsString::from_vec(b"x\0y".to_vec()))];
    assert!(EnvBlock::from_pairs(&nul)
      .unwrap_err()
      .message()
      .contains("NUL byte"));
  }

  #[test]
  fn env_block_inherited_is_the_hosts_environment_without_the_skipped_variable() {
    let host: Vec<Vec<u8>> = std::env::vars_os()
      .filter(|(k, _)| k != "PATH")
      .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
      .collect();
    let b = EnvBlock::inherited("PATH");
    let got: Vec<Vec<u8>> = b.entries().map(<[u8]>::to_vec).collect();
    assert_eq!(got, host);
    assert!(!host.is_empty());
  }

  #[test]
  fn cwd_checks() {
    assert_eq!(
      check_cwd(Path::new("/tmp/ghost-exec-native-x"))
        .unwrap_err()
        .message(),
      "exec: Working directory does not exist '/tmp/ghost-exec-native-x' (ENOENT)"
    );
    assert_eq!(
      check_cwd(Path::new("/etc/hostname")).unwrap_err().code,
      ErrorCode::ENOTDIR
    );
    assert!(check_cwd(Path::new("/tmp")).is_ok());
  }

  #[test]
  fn resolves_in_path() {
    let path = std::env::var_os("PATH");
    let p = resolve_program("sh", path.as_ref(), Path::new("/")).unwrap();
    assert!(p.ends_with("sh"));
    let e = resolve_program("no-such-program-xyz", path.as_ref(), Path::new("/")).unwrap_err();
    assert_eq!(
      e.message(),
      "exec: no-such-program-xyz not found in PATH (ENOENT)"
    );
  }

  #[test]
  fn globs() {
    assert!(glob_match("*_TOKEN", "GITHUB_TOKEN"));
    assert!(glob_match("AWS_*", "AWS_SECRET_ACCESS_KEY"));
    assert!(glob_match("*KEY*", "MY_KEY_ID"));
    assert!(!glob_match("*_TOKEN", "TOKENS"));
    assert!(glob_match("PATH", "PATH"));
    assert!(!glob_match("PATH", "PATHS"));
  }

  #[test]
  fn allow_and_deny_lists() {
    std::env::set_var("EXEC_NATIVE_TEST_TOKEN", "secret");
    std::env::set_var("EXEC_NATIVE_TEST_OK", "fine");
    let mut e = EnvSpec::inherit();
    e.deny = vec!["*_TOKEN".into()];
    let built = e.build();
    assert!(!built.iter().any(|(k, _)| k == "EXEC_NATIVE_TEST_TOKEN"));
    assert!(built.iter().any(|(k, _)| k == "EXEC_NATIVE_TEST_OK"));
    let mut e = EnvSpec::inherit();
    e.allow = Some(vec!["PATH".into(), "EXEC_NATIVE_TEST_*".into()]);
    e.deny = vec!["*_TOKEN".into()];
    e.vars.push(("GIVEN_TOKEN".into(), "explicit".into()));
    let mut names: Vec<String> = e
      .build()
      .into_iter()
      .map(|(k, _)| k.to_string_lossy().into_owned())
      .collect();
    names.sort();
    assert_eq!(names, vec!["EXEC_NATIVE_TEST_OK", "GIVEN_TOKEN", "PATH"]);
  }

  #[test]
  fn env_validation() {
    let mut e = EnvSpec::inherit();
    e.vars.push(("A=B".into(), "x".into()));
    assert_eq!(e.validate().unwrap_err().code, ErrorCode::EINVAL);
    let mut e = EnvSpec::inherit();
    e.vars.push(("A".into(), "x\0y".into()));
    assert!(e.validate().unwrap_err().message().contains("NUL"));
    let mut e = EnvSpec::inherit();
    e.vars.push(("A".into(), "x=y".into()));
    assert!(e.validate().is_ok());
  }

  #[test]
  fn env_build_overrides_and_replaces() {
    let e = EnvSpec {
      vars: vec![("EXEC_NATIVE_T".into(), "1".into())],
      extend: false,
      ..EnvSpec::inherit()
    };
    assert_eq!(e.build(), vec![("EXEC_NATIVE_T".into(), "1".into())]);
    assert_eq!(e.path_var(), None);
  }
}
