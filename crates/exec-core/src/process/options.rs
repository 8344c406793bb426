//! What every process takes, whoever starts it, and how a run of one ends:
//! the two options types of the process layer (issue 24, step 2).
//! [`ProcessOptions`] (cwd, environment, limits, parent death, sandbox) is
//! the `process` field of every spec; [`RunOptions`] (the timeout and what
//! happens at one, the input, the output cap) is the `run` field of a
//! [`ProcessSpec`](crate::process::supervise::ProcessSpec). Front ends fill
//! them from what a caller gave: [`ProcessFields`] is the process fields as
//! given, checked once by `ProcessOptions::try_from` (the addon's
//! `..process` fields, `serve`'s params, a command call's options).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::process::limits::Limits;
use crate::process::sandbox::SandboxPolicy;
use crate::process::spec::EnvSpec;

/// How a run ends on its own: its timeout and the kill at one, what it
/// reads on stdin, how much of its output a capturing caller keeps.
#[derive(Debug, Clone)]
pub struct RunOptions {
  /// Kill the tree after this long (SIGTERM, SIGKILL after `kill_grace`;
  /// exit code 124, `TIMEOUT`); `None`: never. @default 30 s
  pub timeout: Option<Duration>,
  /// Between SIGTERM and SIGKILL, at a timeout, a cancel, a kill and the
  /// sweep after the exit. @default 500 ms
  pub kill_grace: Duration,
  /// Written to stdin, then EOF. `None`: stdin is the spec's
  /// ([`StdinMode`](crate::process::supervise::StdinMode): `/dev/null`, or a
  /// pipe the caller writes to).
  pub input: Option<Vec<u8>>,
  /// Bytes a capturing caller keeps per stream (head + tail, the middle
  /// cut); a streaming run hands every byte over and ignores it.
  /// @default 1 MiB
  pub max_output_bytes: usize,
}

impl RunOptions {
  /// The timeout of a run that captures or streams its output.
  pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
  /// Between SIGTERM and SIGKILL.
  pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(500);

  /// No timeout (a long-lived process, `spawn`'s default, a command that
  /// moves to the background instead); the rest the defaults.
  pub fn untimed() -> Self {
    RunOptions {
      timeout: None,
      ..RunOptions::default()
    }
  }

  /// These options without the input (what a run keeps once its stdin was
  /// fed).
  pub fn without_input(&self) -> Self {
    RunOptions {
      timeout: self.timeout,
      kill_grace: self.kill_grace,
      input: None,
      max_output_bytes: self.max_output_bytes,
    }
  }
}

impl Default for RunOptions {
  /// 30 s, 500 ms of grace, stdin as the spec says, 1 MiB kept per stream.
  fn default() -> Self {
    RunOptions {
      timeout: Some(Self::DEFAULT_TIMEOUT),
      kill_grace: Self::DEFAULT_KILL_GRACE,
      input: None,
      max_output_bytes: HeadTailBuffer::DEFAULT_CAP,
    }
  }
}

/// The process fields as a caller gave them (`None`: not given), before
/// they are checked ([`ProcessOptions::try_from`]) or merged over a
/// runner's ([`CommandDefaults::merge`](crate::command::CommandDefaults::merge)).
#[derive(Debug, Default, Clone)]
pub struct ProcessFields {
  pub cwd: Option<PathBuf>,
  /// `env`: variables to set, or (`None`) to remove.
  pub env: Option<Vec<(String, Option<String>)>>,
  pub extend_env: Option<bool>,
  pub env_allowlist: Option<Vec<String>>,
  pub env_denylist: Option<Vec<String>>,
  pub limits: Option<Limits>,
  pub die_with_parent: Option<bool>,
  /// `Some(None)`: `sandbox: false`.
  pub sandbox: Option<Option<SandboxPolicy>>,
}

impl ProcessFields {
  /// The caller gave an env list (the host's secrets then pass as the
  /// lists say, even sandboxed).
  pub fn explicit_lists(&self) -> bool {
    self.env_allowlist.is_some() || self.env_denylist.is_some()
  }
}

impl TryFrom<ProcessFields> for ProcessOptions {
  type Error = ExecError;

  /// Checked, with the defaults where nothing was given (`None` cwd: the
  /// caller's default). A sandboxed process drops the host's secrets unless
  /// the caller gave its own env lists
  /// ([`SECRET_ENV`](crate::process::sandbox::SECRET_ENV)).
  fn try_from(f: ProcessFields) -> Result<Self, ExecError> {
    let explicit_lists = f.explicit_lists();
    let mut env = EnvSpec::from_options(
      f.extend_env,
      f.env.unwrap_or_default(),
      f.env_allowlist,
      f.env_denylist,
    )?;
    let sandbox = f.sandbox.flatten();
    crate::process::sandbox::drop_secrets(&sandbox, explicit_lists, &mut env);
    Ok(ProcessOptions {
      cwd: f.cwd,
      env,
      limits: f.limits.unwrap_or_default(),
      die_with_parent: f.die_with_parent.unwrap_or(false),
      sandbox,
    })
  }
}

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

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_run_has_the_defaults_every_api_starts_from() {
    let r = RunOptions::default();
    assert_eq!(r.timeout, Some(Duration::from_secs(30)));
    assert_eq!(r.kill_grace, Duration::from_millis(500));
    assert_eq!(r.input, None);
    assert_eq!(r.max_output_bytes, 1 << 20);
    let u = RunOptions::untimed();
    assert_eq!(u.timeout, None);
    assert_eq!(u.kill_grace, r.kill_grace);
    let given = RunOptions {
      input: Some(b"x".to_vec()),
      kill_grace: Duration::from_millis(1234),
      ..RunOptions::default()
    };
    let kept = given.without_input();
    assert_eq!(kept.input, None);
    assert_eq!(kept.kill_grace, Duration::from_millis(1234));
    assert_eq!(kept.timeout, given.timeout);
  }

  #[test]
  fn fields_not_given_take_the_defaults_and_a_sandbox_drops_the_secrets() {
    let p = ProcessOptions::try_from(ProcessFields::default()).unwrap();
    assert_eq!(p.cwd, None);
    assert!(p.env.is_plain_inherit());
    assert!(!p.die_with_parent);
    assert!(p.sandbox.is_none());
    let off = ProcessFields {
      sandbox: Some(None),
      ..ProcessFields::default()
    };
    assert!(ProcessOptions::try_from(off).unwrap().sandbox.is_none());
    let sandboxed = ProcessFields {
      sandbox: Some(Some(SandboxPolicy::default())),
      ..ProcessFields::default()
    };
    let p = ProcessOptions::try_from(sandboxed.clone()).unwrap();
    assert!(p.sandbox.is_some());
    assert!(!p.env.deny.is_empty(), "the host's secrets are dropped");
    let listed = ProcessFields {
      env_denylist: Some(vec!["X_*".into()]),
      ..sandboxed
    };
    let p = ProcessOptions::try_from(listed).unwrap();
    assert_eq!(p.env.deny, vec!["X_*".to_owned()], "the caller's lists win");
  }
}
