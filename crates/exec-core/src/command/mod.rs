//! The agent command tool: `bash -c <command>` for a language model. The model
//! gets back what it needs to read and never more than its context holds:
//! output is sanitized (no terminal escapes), tail-truncated to a line and a
//! byte limit, the full output is offloaded to a log file whenever anything
//! was cut, and a command that outlives its timeout moves to the background
//! instead of being killed.
//!
//! Pipeline per stream: rolling window (2 x `max_bytes`) + counters over the
//! whole stream + lazy log ([`offload`]) -> [`sanitize`] -> [`truncate`] ->
//! [`format`]. Background processes live in a [`CommandRunner`] (a session).

pub mod background;
pub mod format;
pub mod interactive;
pub mod offload;
pub mod sanitize;
pub mod tool;
pub mod truncate;

use std::path::PathBuf;
use std::time::Duration;

use crate::error::ExecError;
use crate::process::spec::EnvSpec;

pub use background::{sweep_logs, BackgroundInfo, CheckResult, CommandRunner, RunnerConfig};
pub use format::ProcessState;
pub use interactive::{Interactive, InteractiveResult, StartOptions};
pub use offload::LogStatus;
pub use sanitize::{sanitize, sanitize_bytes};
pub use truncate::{truncate_tail, OutputLimits, TruncatedBy, Truncation};

/// Milliseconds before a command is moved to the background.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(120_000);
/// Log files older than this are deleted when a runner starts or closes.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Set in every command's environment (unless the caller's `env` says
/// otherwise) so that nothing waits for a human or paints for a terminal.
pub const NON_INTERACTIVE_ENV: &[(&str, &str)] = &[
  ("PAGER", "cat"),
  ("GIT_PAGER", "cat"),
  ("GIT_TERMINAL_PROMPT", "0"),
  ("TERM", "dumb"),
  ("NO_COLOR", "1"),
];

/// The caller's environment over the non-interactive defaults.
pub fn command_env(user: EnvSpec) -> EnvSpec {
  let mut vars: Vec<(String, String)> = NON_INTERACTIVE_ENV
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
  vars.extend(user.vars);
  EnvSpec { vars, ..user }
}

/// Options of one command.
#[derive(Debug, Clone)]
pub struct CommandOptions {
  pub cwd: PathBuf,
  pub env: EnvSpec,
  /// Move to the background after this long (`None`: wait for the end).
  pub timeout: Option<Duration>,
  pub limits: OutputLimits,
  /// Where the log goes (`None`: the runner's directory).
  pub output_dir: Option<PathBuf>,
  /// Start in the background at once.
  pub background: bool,
  /// Opt-in resource limits of the command's tree (see [`crate::limits`]).
  pub resource_limits: crate::limits::Limits,
  /// PR_SET_PDEATHSIG for `bash` (SIGKILL when the host dies).
  pub die_with_parent: bool,
  /// When `bash` exits, terminate what it left running instead of adopting
  /// it as background jobs of the runner.
  pub cleanup: bool,
  /// Opt-in OS sandbox of the command's tree (see [`crate::sandbox`]).
  pub sandbox: Option<crate::sandbox::SandboxPolicy>,
}

impl CommandOptions {
  pub fn new(cwd: impl Into<PathBuf>) -> Self {
    CommandOptions {
      cwd: cwd.into(),
      env: EnvSpec::inherit(),
      timeout: Some(DEFAULT_TIMEOUT),
      limits: OutputLimits::default(),
      output_dir: None,
      background: false,
      resource_limits: crate::limits::Limits::default(),
      die_with_parent: false,
      cleanup: false,
      sandbox: None,
    }
  }
}

/// One stream as the model sees it.
#[derive(Debug, Clone, Default)]
pub struct StreamOutput {
  /// Sanitized and tail-truncated (empty for binary output).
  pub text: String,
  pub truncation: Truncation,
  /// The stream is binary (a NUL byte, or many invalid UTF-8 bytes): the
  /// model is told its size and where the log is instead.
  pub binary: bool,
}

/// A command moved to the background.
#[derive(Debug, Clone)]
pub struct BackgroundRef {
  pub pid: u32,
  pub log: LogStatus,
}

/// The result of [`CommandRunner::run`].
#[derive(Debug, Clone)]
pub struct CommandResult {
  pub pid: u32,
  pub stdout: StreamOutput,
  pub stderr: StreamOutput,
  /// `None` while the command runs in the background; -1 if it never ran.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// The timeout passed and the command went to the background.
  pub timed_out: bool,
  /// The full output (present whenever something was cut, and for background runs).
  pub log: LogStatus,
  pub background: Option<BackgroundRef>,
  /// The result formatted for the model.
  pub text: String,
  /// A non-zero exit, or a command that could not start.
  pub is_error: bool,
  pub duration: Duration,
  /// Why the command could not start.
  pub error: Option<ExecError>,
  /// What the command left running, adopted as background jobs: (pid, command line).
  pub adopted: Vec<(u32, String)>,
  /// A sandboxed command: how the sandbox was applied and what it likely
  /// denied (judged on a finished command only).
  pub sandbox: Option<crate::sandbox::SandboxReport>,
}

impl CommandResult {
  /// A command that never started.
  pub fn failed(error: ExecError) -> Self {
    CommandResult {
      pid: 0,
      stdout: StreamOutput::default(),
      stderr: StreamOutput::default(),
      exit_code: Some(-1),
      signal: None,
      timed_out: false,
      log: LogStatus::NotNeeded,
      background: None,
      text: error.message(),
      is_error: true,
      duration: Duration::ZERO,
      error: Some(error),
      adopted: Vec::new(),
      sandbox: None,
    }
  }
}
