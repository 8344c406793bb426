//! What a run is: the process to start ([`ProcessSpec`], its [`StdinMode`])
//! and how it is supervised ([`RunPolicy`]: the timeout, the kill grace, the
//! drain, the cleanup, the owner).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::process::ProcessOptions;

/// What the child's stdin is.
#[derive(Debug, Clone, Default)]
pub enum StdinMode {
  /// `/dev/null`: a program that reads gets EOF at once.
  #[default]
  Null,
  /// These bytes, then EOF.
  Bytes(Vec<u8>),
  /// A pipe the caller writes to
  /// ([`Execution::take_stdin`](super::Execution::take_stdin)).
  Piped,
}

/// A resolved process to start.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
  pub program: PathBuf,
  pub args: Vec<OsString>,
  pub arg0: Option<OsString>,
  pub stdin: StdinMode,
  /// cwd (`None`: the host's), environment, opt-in resource limits (see
  /// [`crate::process::limits`]), the parent-death SIGKILL (Linux
  /// PR_SET_PDEATHSIG, even when the host dies by SIGKILL) and the opt-in
  /// OS sandbox (see [`crate::process::sandbox`]).
  pub process: ProcessOptions,
}

impl ProcessSpec {
  pub fn new(program: impl Into<PathBuf>) -> Self {
    ProcessSpec {
      program: program.into(),
      args: Vec::new(),
      arg0: None,
      stdin: StdinMode::Null,
      process: ProcessOptions::default(),
    }
  }

  pub fn arg(mut self, a: impl Into<OsString>) -> Self {
    self.args.push(a.into());
    self
  }
}

/// How a run is supervised.
#[derive(Debug, Clone)]
pub struct RunPolicy {
  /// Kill the group after this long (`None`: never).
  pub timeout: Option<Duration>,
  /// The timeout as the caller gave it, for the message (`after 1s`).
  pub timeout_label: Option<String>,
  /// Between SIGTERM and SIGKILL.
  pub kill_grace: Duration,
  /// How long to keep reading after the child exited, for output still in the
  /// pipes or held open by a grandchild.
  pub drain: Duration,
  /// Terminate what is left of the tree (its process group and every marked
  /// descendant, even one that left the group) when the child exits.
  pub cleanup_group_on_exit: bool,
  /// Id of the host environment that owns the run (see
  /// [`process::kill_all`](crate::process::kill_all)).
  pub owner: u64,
}

impl Default for RunPolicy {
  fn default() -> Self {
    RunPolicy {
      timeout: Some(Duration::from_secs(30)),
      timeout_label: None,
      kill_grace: Duration::from_millis(500),
      drain: Duration::from_millis(100),
      cleanup_group_on_exit: true,
      owner: 0,
    }
  }
}
