//! What to run: program resolution, environment merging, working-directory
//! checks, all done before anything is spawned so that errors are clear.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
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
}

impl EnvSpec {
  pub fn inherit() -> Self {
    EnvSpec {
      vars: Vec::new(),
      extend: true,
      remove: Vec::new(),
    }
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
    self.extend && self.vars.is_empty() && self.remove.is_empty()
  }

  /// The full environment of the child.
  pub fn build(&self) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = if self.extend {
      std::env::vars_os().collect()
    } else {
      Vec::new()
    };
    for (k, v) in &self.vars {
      let k = OsString::from(k);
      if let Some(slot) = out.iter_mut().find(|(ek, _)| *ek == k) {
        slot.1 = OsString::from(v);
      } else {
        out.push((k, OsString::from(v)));
      }
    }
    if !self.remove.is_empty() {
      out.retain(|(k, _)| !self.remove.iter().any(|r| k.as_bytes() == r.as_bytes()));
    }
    out
  }

  /// The PATH the child will see.
  pub fn path_var(&self) -> Option<OsString> {
    if let Some((_, v)) = self.vars.iter().rev().find(|(k, _)| k == "PATH") {
      return Some(OsString::from(v));
    }
    if self.extend && !self.remove.iter().any(|r| r == "PATH") {
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
      if nix::unistd::access(cwd, nix::unistd::AccessFlags::X_OK).is_err() {
        return Err(ExecError::new(
          ErrorCode::EACCES,
          format!("Working directory is not accessible '{shown}'"),
        ));
      }
      Ok(())
    }
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
  if program.contains('/') {
    let p = cwd.join(program);
    return match std::fs::metadata(&p) {
      Ok(m) if m.is_file() => {
        if nix::unistd::access(&p, nix::unistd::AccessFlags::X_OK).is_ok() {
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

#[cfg(test)]
mod tests {
  use super::*;

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
      remove: vec![],
    };
    assert_eq!(e.build(), vec![("EXEC_NATIVE_T".into(), "1".into())]);
    assert_eq!(e.path_var(), None);
  }
}
