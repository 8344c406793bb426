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
//!
//! A command's options are the process layer's two types, with a command's
//! meaning: `process` ([`ProcessOptions`]) and `run` ([`RunOptions`], from
//! [`RunOptions::command`]): its timeout moves it to the background, its
//! kill grace holds at a cancel, a cleanup, a kill of it as a background job
//! and of the jobs it left, its input is fed to its stdin (else `/dev/null`),
//! and its output cap is the bytes of its answer (`max_bytes`, both streams
//! together, besides [`CommandSpec::max_lines`] and the truncation mode).

pub mod background;
pub mod format;
pub mod interactive;
pub mod offload;
pub mod sanitize;
pub mod stateful;
pub mod tool;
pub mod tools;
pub mod truncate;

use std::path::PathBuf;
use std::time::Duration;

use crate::error::ExecError;
use crate::process::spec::EnvSpec;
use crate::process::{ProcessFields, ProcessOptions, RunFields, RunOptions};

pub use background::{sweep_logs, BackgroundInfo, CheckResult, CommandRunner, RunnerConfig};
pub use format::{ProcessState, Vocabulary};
pub use interactive::{Interactive, InteractiveResult, StartOptions};
pub use offload::LogStatus;
pub use sanitize::{sanitize, sanitize_bytes};
pub use truncate::{
  truncate, truncate_head_tail, truncate_tail, OutputLimits, TruncatedBy, Truncation,
  TruncationMode,
};

/// Milliseconds before a command is moved to the background
/// ([`RunOptions::command`]'s).
pub const DEFAULT_TIMEOUT: Duration = RunOptions::COMMAND_TIMEOUT;
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

/// Longer commands go to `bash` through a file: one argument of `execve`
/// holds at most 128 KiB (`MAX_ARG_STRLEN`; E2BIG beyond).
pub const INLINE_COMMAND_MAX: usize = 64 * 1024;

/// The arguments after `bash` for `command`: `-c <command>`, or for a long
/// one `-c '. "$0"' <file>` with the file that must outlive the run (the
/// script runs in the same shell, so `exit`, `$?` and `&` behave alike).
pub fn bash_args(command: &str) -> Result<(Vec<String>, Option<tempfile::TempPath>), ExecError> {
  if command.len() <= INLINE_COMMAND_MAX {
    return Ok((vec!["-c".into(), command.into()], None));
  }
  let file = crate::language::temp_with(command, None, ".sh")?;
  let path = file.to_string_lossy().into_owned();
  Ok((vec!["-c".into(), ". \"$0\"".into(), path], Some(file)))
}

/// The shell that runs the agent tool's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shell {
  /// `bash -c <command>` (on Windows, Git for Windows' bash:
  /// [`crate::language::find_bash`]).
  #[default]
  Bash,
  /// `pwsh` (else Windows PowerShell) `-NoProfile -NonInteractive -Command
  /// <command>`: one process per command, no shared state.
  PowerShell,
  /// Windows' `cmd.exe /d /s /c "<command>"` (a command of several lines
  /// runs as a `.cmd` file): one process per command; ENOENT elsewhere.
  Cmd,
}

impl Shell {
  /// `bash`, `powershell` or `cmd` (the MCP server's `--shell`).
  pub fn parse(name: &str) -> Result<Shell, ExecError> {
    match name {
      "bash" => Ok(Shell::Bash),
      "powershell" | "pwsh" => Ok(Shell::PowerShell),
      "cmd" => Ok(Shell::Cmd),
      other => Err(ExecError::invalid(format!(
        "shell must be 'bash', 'powershell' or 'cmd', got '{other}'"
      ))),
    }
  }

  pub fn name(self) -> &'static str {
    match self {
      Shell::Bash => "bash",
      Shell::PowerShell => "powershell",
      Shell::Cmd => "cmd",
    }
  }

  /// The program and arguments that run `command` in this shell, found as
  /// the child would find them (`env`'s PATH, `cwd`), and the file a long
  /// command is passed in, which must outlive the run.
  pub fn launch(
    self,
    command: &str,
    env: &EnvSpec,
    cwd: &std::path::Path,
  ) -> Result<(PathBuf, Vec<std::ffi::OsString>, Option<tempfile::TempPath>), ExecError> {
    match self {
      Shell::Bash => {
        let (args, script) = bash_args(command)?;
        let bash = find_bash(env, cwd)?;
        Ok((bash, args.into_iter().map(Into::into).collect(), script))
      }
      Shell::PowerShell => Ok((
        crate::language::find_powershell(env, cwd)?,
        powershell_args(command)
          .into_iter()
          .map(Into::into)
          .collect(),
        None,
      )),
      Shell::Cmd => {
        let l = crate::language::cmd_launch(command, cwd, env)?;
        Ok((l.spec.program, l.spec.args, l.temp))
      }
    }
  }
}

/// `bash` as the child would find it (on Windows, Git for Windows' bash),
/// else `/bin/bash`.
fn find_bash(env: &EnvSpec, cwd: &std::path::Path) -> Result<PathBuf, ExecError> {
  match crate::language::find_bash(env, cwd) {
    Ok(p) => Ok(p),
    Err(e) => {
      let fallback = std::path::Path::new("/bin/bash");
      if !crate::platform::WINDOWS && fallback.is_file() {
        Ok(fallback.to_owned())
      } else {
        Err(e)
      }
    }
  }
}

/// The arguments after `pwsh`/`powershell` for `command`. PowerShell reads
/// the command from its command line (32 767 UTF-16 units on Windows).
pub fn powershell_args(command: &str) -> Vec<String> {
  [
    "-NoLogo",
    "-NoProfile",
    "-NonInteractive",
    "-Command",
    command,
  ]
  .map(str::to_owned)
  .to_vec()
}

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
pub struct CommandSpec {
  /// `bash`'s cwd (always given: [`ProcessOptions::cwd`] is `Some`),
  /// environment, the opt-in resource limits of the command's tree (see
  /// [`crate::process::limits`]), PR_SET_PDEATHSIG for `bash` (SIGKILL when
  /// the host dies) and the opt-in OS sandbox of the command's tree (see
  /// [`crate::process::sandbox`]).
  pub process: ProcessOptions,
  /// `timeout`: move to the background after this long (`None`: wait for
  /// the end); `kill_grace`: between SIGTERM and SIGKILL when it (or what
  /// it left running, adopted) is killed; `input`: fed to its stdin, then
  /// EOF (`None`: `/dev/null`); `max_output_bytes`: the bytes of its
  /// answer, both streams together. See [`RunOptions::command`].
  pub run: RunOptions,
  /// The lines of its answer (the last ones).
  pub max_lines: usize,
  /// Which part of a long output is shown.
  pub truncation: TruncationMode,
  /// Where the log goes (`None`: the runner's directory).
  pub output_dir: Option<PathBuf>,
  /// Start in the background at once.
  pub background: bool,
  /// When `bash` exits, terminate what it left running instead of adopting
  /// it as background jobs of the runner.
  pub cleanup: bool,
  /// The call named its own directory (`workdir`, `options.cwd`). In a
  /// stateful runner that is a `cd` there which carries over; otherwise
  /// the command starts where the shared state left the shell.
  pub cwd_given: bool,
  /// Whose words the text uses to say how to manage background jobs: the
  /// tool's from [`CommandSpec::new`], the JavaScript API's from
  /// [`CommandDefaults::merge`] (the binding's path).
  pub vocabulary: Vocabulary,
  /// While the command runs in the foreground, this cancels it: its whole
  /// tree is killed and nothing is adopted (an MCP `notifications/cancelled`).
  /// Not watched once the command is in the background.
  pub cancel: Option<crate::CancellationToken>,
}

impl CommandSpec {
  pub fn new(cwd: impl Into<PathBuf>) -> Self {
    CommandSpec {
      process: ProcessOptions::in_dir(cwd),
      run: RunOptions::command(),
      max_lines: truncate::DEFAULT_MAX_LINES,
      truncation: TruncationMode::Tail,
      output_dir: None,
      background: false,
      cleanup: false,
      cwd_given: false,
      vocabulary: Vocabulary::Tool,
      cancel: None,
    }
  }

  /// What its answer shows: `max_lines`, `run.max_output_bytes`, the mode.
  pub fn limits(&self) -> OutputLimits {
    OutputLimits {
      max_lines: self.max_lines,
      max_bytes: self.run.max_output_bytes,
      mode: self.truncation,
    }
  }
}

/// The options of one call as given (`None`: not given), before they are
/// merged over a runner's ([`CommandDefaults::merge`]).
#[derive(Debug, Default)]
pub struct CallOptions {
  /// cwd, env, its lists, limits, parent death, sandbox, as given.
  pub process: ProcessFields,
  /// The timeout (`Some(None)`: none, 0 or Infinity), the kill grace, the
  /// input, the bytes of the answer (`maxBytes`), as given.
  pub run: RunFields,
  pub max_lines: Option<usize>,
  /// Which part of a long output is shown (tail, or head and tail).
  pub truncation: Option<TruncationMode>,
  pub output_dir: Option<PathBuf>,
  pub background: Option<bool>,
  pub cleanup: Option<bool>,
}

/// A runner's settings that each of its calls starts from.
#[derive(Debug, Clone)]
pub struct CommandDefaults {
  /// What each call's process starts from (`cwd` `None`: the host's cwd at
  /// each call).
  pub process: ProcessOptions,
  /// What each call's run starts from ([`RunOptions::command`]: the
  /// timeout, the runner's kill grace, the answer's bytes).
  pub run: RunOptions,
  pub max_lines: usize,
  pub truncation: TruncationMode,
}

impl Default for CommandDefaults {
  fn default() -> Self {
    CommandDefaults {
      process: ProcessOptions::default(),
      run: RunOptions::command(),
      max_lines: truncate::DEFAULT_MAX_LINES,
      truncation: TruncationMode::Tail,
    }
  }
}

impl CommandDefaults {
  /// A runner's settings from its options (the built-in defaults where
  /// they are silent). A sandboxed runner drops the host's secrets unless
  /// it was given env lists.
  pub fn new(o: CallOptions) -> Result<Self, ExecError> {
    let d = CommandDefaults::default();
    Ok(CommandDefaults {
      process: ProcessOptions::try_from(o.process)?,
      run: o.run.over(&d.run),
      max_lines: o.max_lines.unwrap_or(d.max_lines),
      truncation: o.truncation.unwrap_or(d.truncation),
    })
  }

  /// The options of one call: what it gave over the runner's. The call's
  /// `env` adds to the runner's (and `extendEnv: false` of either wins); its
  /// env lists and limits replace the runner's; its sandbox may only narrow
  /// the runner's (EINVAL otherwise). `host_cwd` is asked only when neither
  /// gave a cwd.
  pub fn merge(
    &self,
    call: CallOptions,
    host_cwd: impl FnOnce() -> Result<PathBuf, ExecError>,
  ) -> Result<CommandSpec, ExecError> {
    let given = call.process;
    let call_cwd = given.cwd.clone();
    let cwd = match given.cwd.or_else(|| self.process.cwd.clone()) {
      Some(c) => c,
      None => host_cwd()?,
    };
    let mut env = self.process.env.clone();
    if given.env.is_some() || given.extend_env.is_some() {
      let vars =
        EnvSpec::from_options(given.extend_env, given.env.unwrap_or_default(), None, None)?;
      env.vars.extend(vars.vars);
      env.remove.extend(vars.remove);
      env.extend = env.extend && vars.extend;
    }
    let explicit_lists = given.env_allowlist.is_some() || given.env_denylist.is_some();
    if let Some(allow) = given.env_allowlist {
      env.allow = Some(allow);
    }
    if let Some(deny) = given.env_denylist {
      env.deny = deny;
    }
    let sandbox = self.merge_sandbox(given.sandbox, explicit_lists, &mut env)?;
    self.check_call_cwd(sandbox.as_ref(), call_cwd.as_deref())?;
    Ok(CommandSpec {
      process: ProcessOptions {
        cwd: Some(cwd),
        env,
        limits: given.limits.unwrap_or_else(|| self.process.limits.clone()),
        die_with_parent: given
          .die_with_parent
          .unwrap_or(self.process.die_with_parent),
        sandbox,
      },
      run: call.run.over(&self.run),
      max_lines: call.max_lines.unwrap_or(self.max_lines),
      truncation: call.truncation.unwrap_or(self.truncation),
      output_dir: call.output_dir,
      background: call.background.unwrap_or(false),
      cleanup: call.cleanup.unwrap_or(false),
      cwd_given: call_cwd.is_some(),
      vocabulary: Vocabulary::Api,
      cancel: None,
    })
  }

  /// The call's sandbox over the runner's: the runner's when the call gave
  /// none, the call's when it narrows the runner's (EINVAL otherwise).
  /// Without a runner's sandbox, the call's drops the secrets from `env`.
  fn merge_sandbox(
    &self,
    call: Option<Option<crate::process::sandbox::SandboxPolicy>>,
    explicit_lists: bool,
    env: &mut EnvSpec,
  ) -> Result<Option<crate::process::sandbox::SandboxPolicy>, ExecError> {
    match (&self.process.sandbox, call) {
      (None, call) => {
        let call = call.flatten();
        crate::process::sandbox::drop_secrets(&call, explicit_lists, env);
        Ok(call)
      }
      (Some(base), Some(None)) => Err(ExecError::invalid(format!(
        "options.sandbox cannot turn off the runner's sandbox ({:?})",
        base.mode
      ))),
      (Some(base), None) => Ok(Some(base.clone())),
      (Some(base), Some(Some(call))) => {
        if !call.narrows(base) {
          return Err(ExecError::invalid(
            "options.sandbox may only narrow the runner's sandbox (mode, writable roots, /tmp, network, onUnavailable)",
          ));
        }
        Ok(Some(call))
      }
    }
  }

  /// A call's cwd under a workspace-write sandbox of the runner must lie in
  /// the runner's writable roots (EINVAL otherwise).
  fn check_call_cwd(
    &self,
    sandbox: Option<&crate::process::sandbox::SandboxPolicy>,
    call_cwd: Option<&std::path::Path>,
  ) -> Result<(), ExecError> {
    // a call's cwd is writable under workspace-write: it must lie in what
    // the runner's sandbox lets write, or the call would widen it
    if let (Some(base), Some(sb), Some(call_cwd)) = (&self.process.sandbox, sandbox, call_cwd) {
      if sb.mode == crate::process::sandbox::SandboxMode::WorkspaceWrite {
        let base_cwd = match &self.process.cwd {
          Some(c) => c.clone(),
          None => std::env::current_dir().unwrap_or_default(),
        };
        let allowed = base.writable_paths(&base_cwd)?;
        let real = call_cwd
          .canonicalize()
          .unwrap_or_else(|_| call_cwd.to_path_buf());
        if !allowed
          .iter()
          .any(|r| real.starts_with(r) || call_cwd.starts_with(r))
        {
          return Err(ExecError::invalid(format!(
            "options.cwd {} lies outside the runner's writable roots, and a call may only narrow the runner's sandbox",
            call_cwd.display()
          )));
        }
      }
    }
    Ok(())
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
pub struct CommandReport {
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
  pub sandbox: Option<crate::process::sandbox::SandboxReport>,
}

impl CommandReport {
  /// A command that never started.
  pub fn failed(error: ExecError) -> Self {
    CommandReport {
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

#[cfg(test)]
mod tests;
