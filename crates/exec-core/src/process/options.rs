//! What every process takes, whoever starts it: the one options type of the
//! process layer (issue 24, step 2). A spec of a feature embeds it as its
//! `process` field instead of repeating the five fields; the binding fills
//! it once from the `..process` fields of every options object.

use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, ExecError};
use crate::process::limits::Limits;
use crate::process::sandbox::SandboxPolicy;
use crate::process::spec::EnvSpec;

/// The working directory, environment, resource limits, parent-death signal
/// and OS sandbox of a process and its tree.
#[derive(Debug, Clone)]
pub struct ProcessOptions {
  /// `None`: the caller's default (the host's cwd; a runner's own). A
  /// session resolves it when it starts ([`ProcessOptions::resolve_cwd`]).
  pub cwd: Option<PathBuf>,
  /// How the environment is built from the host's.
  pub env: EnvSpec,
  /// Opt-in resource limits of the whole tree.
  pub limits: Limits,
  /// `PR_SET_PDEATHSIG`: the process gets SIGKILL when its parent thread's
  /// process dies (Linux).
  pub die_with_parent: bool,
  /// Opt-in OS sandbox of the process and every descendant.
  pub sandbox: Option<SandboxPolicy>,
}

impl Default for ProcessOptions {
  /// The host's cwd and environment, no limits, no sandbox.
  fn default() -> Self {
    ProcessOptions {
      cwd: None,
      env: EnvSpec::inherit(),
      limits: Limits::default(),
      die_with_parent: false,
      sandbox: None,
    }
  }
}

impl ProcessOptions {
  /// With a cwd given; the rest the defaults.
  pub fn in_dir(cwd: impl Into<PathBuf>) -> Self {
    ProcessOptions {
      cwd: Some(cwd.into()),
      ..ProcessOptions::default()
    }
  }

  /// Give `cwd` the host's working directory when it was left to the
  /// caller's default: ENOENT when the host's own directory is gone.
  pub fn resolve_cwd(&mut self) -> Result<&Path, ExecError> {
    if self.cwd.is_none() {
      self.cwd = Some(host_cwd()?);
    }
    Ok(self.cwd())
  }

  /// The cwd: the one given or resolved, else `.` (the host's, as a spawn
  /// without a cwd inherits it).
  pub fn cwd(&self) -> &Path {
    self.cwd.as_deref().unwrap_or(Path::new("."))
  }
}

/// The host's working directory: ENOENT when it is gone (removed under the
/// host), which every caller's default cwd reports the same way.
pub fn host_cwd() -> Result<PathBuf, ExecError> {
  std::env::current_dir().map_err(|e| {
    ExecError::new(
      ErrorCode::ENOENT,
      format!("the host's working directory is gone: {e}"),
    )
  })
}
