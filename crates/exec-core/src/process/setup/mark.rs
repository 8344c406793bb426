//! The run's mark in the child's environment: `EXEC_NATIVE_RUN_ID=<mark>`
//! (see [`crate::process::marks`]), which every descendant inherits, so a
//! process that leaves the group or the session is still found. A mark the
//! host itself carries is replaced.

use std::ffi::OsString;

use crate::process::marks::MARK_VAR;
use crate::process::spec::EnvSpec;

/// The environment a caller gives its child.
#[derive(Clone, Copy)]
pub enum ChildEnv<'a> {
  /// Built from the options (the host's, filtered and extended).
  Spec(&'a EnvSpec),
  /// Exactly these variables.
  Vars(&'a [(OsString, OsString)]),
}

impl ChildEnv<'_> {
  /// The child's `PATH` (where a sandbox looks its program up).
  pub(super) fn path_var(&self) -> Option<OsString> {
    match self {
      ChildEnv::Spec(s) => s.path_var(),
      ChildEnv::Vars(v) => v
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone()),
    }
  }
}

/// The environment as the exec image takes it (the fork and clone paths),
/// the mark last: the host's own read in place when it is inherited as is
/// (the common case: no variable made per spawn), else the options'
/// variables; a mark the host carries is left out.
#[cfg(unix)]
pub(super) fn block(
  env: &ChildEnv,
  mark: &str,
) -> Result<crate::process::spec::EnvBlock, crate::error::ExecError> {
  use crate::process::spec::EnvBlock;
  let not_mark = |(k, _): &&(OsString, OsString)| k != MARK_VAR;
  let mut b = match env {
    ChildEnv::Spec(s) if s.is_plain_inherit() => EnvBlock::inherited(MARK_VAR),
    ChildEnv::Spec(s) => EnvBlock::from_pairs(s.build().iter().filter(not_mark))?,
    ChildEnv::Vars(v) => EnvBlock::from_pairs(v.iter().filter(not_mark))?,
  };
  b.push(MARK_VAR.as_bytes(), mark.as_bytes())?;
  Ok(b)
}

/// The same environment on std's `Command` (its `posix_spawn` path).
pub(super) fn set_env(cmd: &mut std::process::Command, env: &ChildEnv, mark: &str) {
  match env {
    ChildEnv::Spec(s) if s.is_plain_inherit() => {}
    ChildEnv::Spec(s) => {
      cmd.env_clear();
      cmd.envs(s.build());
    }
    ChildEnv::Vars(v) => {
      cmd.env_clear();
      cmd.envs(v.iter().map(|(k, v)| (k, v)));
    }
  }
  cmd.env(MARK_VAR, mark);
}
