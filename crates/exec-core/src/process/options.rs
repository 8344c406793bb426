//! What every process takes, whoever starts it, and how a run of one ends:
//! the two options types of the process layer (issue 24, step 2).
//! [`ProcessOptions`] (cwd, environment, limits, parent death, sandbox) is
//! the `process` field of every spec; [`RunOptions`] (the timeout and what
//! happens at one, the input, the output cap) is the `run` field of every
//! spec too: a [`ProcessSpec`](crate::process::supervise::ProcessSpec), the
//! manager's `StartSpec`, the session specs (`PythonOptions`, `NodeOptions`,
//! `ShellOptions`, `DriverSpec`: the defaults of each request), the command
//! runner's `CommandSpec` and `CommandDefaults`. Front ends fill them from
//! what a caller gave: [`ProcessFields`] is the process fields as given,
//! checked once by `ProcessOptions::try_from` (the addon's `..process`
//! fields, `serve`'s params, a command call's options); [`RunFields`] is the
//! run fields as given, put over an API's, a session's or a runner's
//! `RunOptions` by [`RunFields::over`] (a cell's `CellOptions`, a command
//! call's `CallOptions`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::process::limits::Limits;
use crate::process::sandbox::SandboxPolicy;
use crate::process::spec::EnvSpec;

/// How a run ends on its own: its timeout and the kill at one, what it
/// reads on stdin, how much of its output its caller keeps. One type for
/// every API: what happens at the timeout, and what the cap counts, belong
/// to the API that runs it, and each API has its defaults here
/// ([`RunOptions::default`], [`RunOptions::untimed`], [`RunOptions::session`],
/// [`RunOptions::command`], [`RunOptions::managed`]):
/// - a run (`ProcessSpec.run`: `executeAndCapture`, `spawnCall`, `spawn`,
///   `serve`'s `exec`): its tree is killed at the timeout (exit code 124,
///   `TIMEOUT`);
/// - a session cell or shell command (the session spec's `run`, the defaults
///   of each request, a [`CellOptions`](crate::session::CellOptions)'s
///   [`RunFields`] over them): interrupted at the timeout, the session's
///   state kept when it stops within the grace;
/// - a command of the command tool (`CommandSpec.run`, over
///   `CommandDefaults.run`): moved to the background at the timeout, not
///   killed;
/// - a managed process (`StartSpec.run`): as a run, with no timeout unless
///   one is given.
#[derive(Debug, Clone)]
pub struct RunOptions {
  /// `None`: never. A run: its tree is killed (SIGTERM, SIGKILL after
  /// `kill_grace`; exit code 124, `TIMEOUT`). A session request: it is
  /// interrupted (SIGINT), killed with the interpreter or the shell's
  /// processes when it has not stopped `kill_grace` later. A command: it
  /// moves to the background. @default 30 s (a command: 120 s; `spawn`
  /// and a managed process: none)
  pub timeout: Option<Duration>,
  /// Between SIGTERM and SIGKILL, at a timeout, a cancel, a kill and the
  /// sweep after the exit (a command: also of the jobs it left, adopted).
  /// A session request: between the interrupt and the kill (Node: of an
  /// `interrupt()` too). @default 500 ms (a session: 2 s)
  pub kill_grace: Duration,
  /// Written to stdin, then EOF. `None`: stdin is the spec's
  /// ([`StdinMode`](crate::process::supervise::StdinMode): `/dev/null`, or a
  /// pipe the caller writes to); a command's is `/dev/null`. A session
  /// request has no stdin of its own and a managed process's terminal or
  /// open stdin is written by its caller: there a `Some` is `EINVAL`.
  pub input: Option<Vec<u8>>,
  /// The output a caller keeps. A run and a session request: bytes per
  /// stream (head + tail, the middle cut); a streaming run hands every byte
  /// over and ignores it. A command: the bytes of its answer, both streams
  /// together, sanitized (every byte goes to its log; its line limit and
  /// which part is shown are its own, `CommandSpec::limits`). A managed
  /// process: the bytes it retains per stream, within the manager's
  /// `retained_output_bytes`. @default 1 MiB (a command: 50 KiB; a managed
  /// process: the manager's)
  pub max_output_bytes: usize,
}

impl RunOptions {
  /// The timeout of a run that captures or streams its output, and of a
  /// session request.
  pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
  /// Between SIGTERM and SIGKILL.
  pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(500);
  /// A session request's time to stop after the interrupt of its timeout.
  pub const SESSION_KILL_GRACE: Duration = Duration::from_millis(2000);
  /// A command's wait before it moves to the background.
  pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(120_000);
  /// The bytes of a command's answer.
  pub const COMMAND_OUTPUT_BYTES: usize = 50 * 1024;

  /// No timeout (a long-lived process, `spawn`'s default); the rest the
  /// defaults.
  pub fn untimed() -> Self {
    RunOptions {
      timeout: None,
      ..RunOptions::default()
    }
  }

  /// A session's defaults for each request: 30 s, 2 s between the
  /// interrupt and the kill, 1 MiB kept per stream.
  pub fn session() -> Self {
    RunOptions {
      kill_grace: Self::SESSION_KILL_GRACE,
      ..RunOptions::default()
    }
  }

  /// A command's defaults: to the background after 120 s, 500 ms of
  /// grace at a kill, stdin `/dev/null`, an answer of 50 KiB.
  pub fn command() -> Self {
    RunOptions {
      timeout: Some(Self::COMMAND_TIMEOUT),
      kill_grace: Self::DEFAULT_KILL_GRACE,
      input: None,
      max_output_bytes: Self::COMMAND_OUTPUT_BYTES,
    }
  }

  /// A managed process's defaults: no timeout, 500 ms of grace, no cap of
  /// its own (the manager's `retained_output_bytes` holds).
  pub fn managed() -> Self {
    RunOptions {
      max_output_bytes: usize::MAX,
      ..RunOptions::untimed()
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

  /// `EINVAL` when an input was given to `what`, which has no stdin to feed
  /// it to (a field is refused, never dropped).
  pub fn refuse_input(&self, what: &str) -> Result<(), ExecError> {
    match self.input {
      Some(_) => Err(ExecError::invalid(format!(
        "{what} takes no input (run.input): it has no stdin to feed it to"
      ))),
      None => Ok(()),
    }
  }
}

impl Default for RunOptions {
  /// A run's: 30 s, 500 ms of grace, stdin as the spec says, 1 MiB kept
  /// per stream.
  fn default() -> Self {
    RunOptions {
      timeout: Some(Self::DEFAULT_TIMEOUT),
      kill_grace: Self::DEFAULT_KILL_GRACE,
      input: None,
      max_output_bytes: HeadTailBuffer::DEFAULT_CAP,
    }
  }
}

/// The run fields as a caller gave them (`None`: not given), put over the
/// options they default to with [`RunFields::over`]: an API's
/// [`RunOptions`], a session's (for one request), a command runner's (for
/// one call).
#[derive(Debug, Default, Clone)]
pub struct RunFields {
  /// `Some(None)`: no timeout (0 or Infinity).
  pub timeout: Option<Option<Duration>>,
  pub kill_grace: Option<Duration>,
  pub input: Option<Vec<u8>>,
  pub max_output_bytes: Option<usize>,
}

impl RunFields {
  /// What was given over `base`, the rest `base`'s.
  pub fn over(self, base: &RunOptions) -> RunOptions {
    RunOptions {
      timeout: self.timeout.unwrap_or(base.timeout),
      kill_grace: self.kill_grace.unwrap_or(base.kill_grace),
      input: self.input.or_else(|| base.input.clone()),
      max_output_bytes: self.max_output_bytes.unwrap_or(base.max_output_bytes),
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
  fn each_api_keeps_its_own_defaults() {
    let s = RunOptions::session();
    assert_eq!(s.timeout, Some(Duration::from_secs(30)));
    assert_eq!(s.kill_grace, Duration::from_secs(2));
    assert_eq!(s.max_output_bytes, 1 << 20);
    let c = RunOptions::command();
    assert_eq!(c.timeout, Some(Duration::from_secs(120)));
    assert_eq!(c.kill_grace, Duration::from_millis(500));
    assert_eq!(c.max_output_bytes, 51200);
    let m = RunOptions::managed();
    assert_eq!(m.timeout, None);
    assert_eq!(m.kill_grace, Duration::from_millis(500));
    assert_eq!(m.max_output_bytes, usize::MAX);
    for o in [s, c, m] {
      assert_eq!(o.input, None);
      assert!(o.refuse_input("a cell").is_ok());
    }
    let fed = RunOptions {
      input: Some(b"x".to_vec()),
      ..RunOptions::session()
    };
    let e = fed.refuse_input("a session cell").unwrap_err();
    assert_eq!(e.code, ErrorCode::EINVAL);
    assert!(e
      .message()
      .starts_with("exec: a session cell takes no input"));
  }

  #[test]
  fn fields_given_go_over_the_base_and_the_rest_is_the_bases() {
    let base = RunOptions::session();
    let none = RunFields::default().over(&base);
    assert_eq!(none.timeout, base.timeout);
    assert_eq!(none.kill_grace, base.kill_grace);
    assert_eq!(none.max_output_bytes, base.max_output_bytes);
    assert_eq!(none.input, None);
    let given = RunFields {
      timeout: Some(None),
      kill_grace: Some(Duration::from_millis(7)),
      input: Some(b"in".to_vec()),
      max_output_bytes: Some(9),
    }
    .over(&base);
    assert_eq!(given.timeout, None, "Some(None): no timeout");
    assert_eq!(given.kill_grace, Duration::from_millis(7));
    assert_eq!(given.input.as_deref(), Some(&b"in"[..]));
    assert_eq!(given.max_output_bytes, 9);
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
