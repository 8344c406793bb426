//! What a run is: the process to start ([`ProcessSpec`], its [`StdinMode`],
//! its [`ProcessOptions`] and [`RunOptions`]: the timeout, the kill grace,
//! the input) and how the host supervises it ([`RunPolicy`]: the drain, the
//! cleanup, the owner).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::process::{ProcessOptions, RunOptions};

/// What the child's stdin is when its [`RunOptions::input`] is `None` (with
/// an input, a pipe fed those bytes, then closed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StdinMode {
  /// `/dev/null`: a program that reads gets EOF at once.
  #[default]
  Null,
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
  /// Without an input in `run`.
  pub stdin: StdinMode,
  /// cwd (`None`: the host's), environment, opt-in resource limits (see
  /// [`crate::process::limits`]), the parent-death SIGKILL (Linux
  /// PR_SET_PDEATHSIG, even when the host dies by SIGKILL) and the opt-in
  /// OS sandbox (see [`crate::process::sandbox`]).
  pub process: ProcessOptions,
  /// The timeout and the kill at one, the input, the output cap.
  pub run: RunOptions,
}

impl ProcessSpec {
  pub fn new(program: impl Into<PathBuf>) -> Self {
    ProcessSpec {
      program: program.into(),
      args: Vec::new(),
      arg0: None,
      stdin: StdinMode::Null,
      process: ProcessOptions::default(),
      run: RunOptions::default(),
    }
  }

  /// The child gets a pipe as its stdin: for its input, or for the caller.
  pub fn stdin_piped(&self) -> bool {
    self.run.input.is_some() || self.stdin == StdinMode::Piped
  }

  pub fn arg(mut self, a: impl Into<OsString>) -> Self {
    self.args.push(a.into());
    self
  }
}

/// How the host supervises a run, beyond what its caller asked for in the
/// spec's [`RunOptions`] (the timeout and the kill grace are there).
#[derive(Debug, Clone)]
pub struct RunPolicy {
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
      drain: Duration::from_millis(100),
      cleanup_group_on_exit: true,
      owner: 0,
    }
  }
}
