//! The agent command tool: `runCommand` and the `CommandRunner` class (a
//! session that owns background processes), plus `sanitize` and
//! `truncateTail`. Only type conversion; the work is in `exec_core::command`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, UNIX_EPOCH};

use exec_core::command::{
  self as core, BackgroundInfo, CheckResult, CommandOptions as CoreOptions,
  CommandResult as CoreResult, LogStatus, OutputLimits, RunnerConfig, StreamOutput, Truncation,
};
use exec_core::EnvSpec;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{self, ArgResult};
use crate::error::{coded_error, reject_type_error, throw_coded, throw_type, type_error};
use crate::host;
use crate::options::nullable;

// ---------------------------------------------------------------- options

/// Options of `runCommand` / `CommandRunner.run`. Unset values come from the
/// runner's options, then from the defaults below.
#[napi(object, object_to_js = false)]
#[allow(dead_code)]
pub struct CommandOptions {
  /// Working directory of this call (checked before spawning). @default the runner's cwd, else process.cwd()
  pub cwd: Option<String>,
  /// Variables set over the environment (`undefined` removes one). The
  /// non-interactive defaults `PAGER=cat`, `GIT_PAGER=cat`,
  /// `GIT_TERMINAL_PROMPT=0`, `TERM=dumb`, `NO_COLOR=1` can be overridden here.
  pub env: Option<HashMap<String, String>>,
  /// Start from the host environment (`true`) or from `env` alone. @default true
  pub extend_env: Option<bool>,
  /// Milliseconds before the command moves to the background (it is not
  /// killed); 0 or Infinity: wait for the end. @default 120000
  pub timeout: Option<f64>,
  /// Lines of each stream shown (the last ones). @default 2000
  pub max_lines: Option<f64>,
  /// Bytes of each stream shown (the last ones). @default 51200
  pub max_bytes: Option<f64>,
  /// Directory of the full-output logs (`exec-native-<hex>.log`). @default os.tmpdir()
  pub output_dir: Option<String>,
  /// Start in the background at once and return its pid. @default false
  pub background: Option<bool>,
  /// Opt-in resource limits of the command's whole process tree (also in
  /// the background); a tree over a limit is stopped and the result (or the
  /// check) has `errorCode: 'ELIMIT'` and says which limit in `text`. Replaces the runner's.
  pub limits: Option<crate::options::ResourceLimits>,
  /// Only host variables matching one of these patterns reach the command
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` and the
  /// non-interactive defaults always pass. Replaces the runner's.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` always passes. Replaces the runner's.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill `bash` when the host dies by SIGKILL (Linux PR_SET_PDEATHSIG;
  /// only `bash` itself). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox (Linux: Landlock + seccomp, applied by the thread
  /// that spawns; posix_spawn kept). `true` = `{ mode: 'workspace-write' }`.
  /// Also drops the host's secrets from the environment (`*_TOKEN`, `*_KEY`,
  /// `AWS_*`, ...) unless `envAllowlist`/`envDenylist` are given. Cannot be
  /// applied: rejected with `ESANDBOX`, nothing runs. The result's `sandbox`
  /// says how it was applied and what it likely denied. @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
  /// When `bash` exits, terminate what it left running (`cmd &`, `setsid
  /// nohup ...`) instead of adopting it as background jobs of the runner
  /// (listed in `text` and in `adopted`). @default false
  pub cleanup: Option<bool>,
}

/// Options of `CommandRunner.start` (an interactive command).
#[napi(object, object_to_js = false)]
#[allow(dead_code)]
pub struct StartCommandOptions {
  /// Milliseconds to collect output before answering; the answer comes
  /// sooner when the command ends or waits for input. @default 10000
  pub yield_ms: Option<f64>,
  /// A pseudo-terminal (`true`: the program sees a terminal, prompts and
  /// Ctrl-C work) or pipes with stdin open (`false`). @default true
  pub tty: Option<bool>,
  /// Terminal size. @default 24
  pub rows: Option<u32>,
  /// @default 200
  pub cols: Option<u32>,
  /// Working directory. @default the runner's cwd, else process.cwd()
  pub cwd: Option<String>,
  /// As in `CommandOptions`.
  pub env: Option<HashMap<String, String>>,
  /// @default true
  pub extend_env: Option<bool>,
  /// Lines shown of each answer's output (the last ones). @default the runner's (2000)
  pub max_lines: Option<f64>,
  /// Bytes shown of each answer's output (the last ones). @default the runner's (51200)
  pub max_bytes: Option<f64>,
  /// Resource limits of the command's tree. @default the runner's
  pub limits: Option<crate::options::ResourceLimits>,
  /// As in `CommandOptions`: may only narrow the runner's. @default the runner's
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
}

/// Options of `CommandRunner.write`.
#[napi(object, object_to_js = false)]
#[allow(dead_code)]
pub struct WriteCommandOptions {
  /// Milliseconds to collect output after the write; sooner when the
  /// command ends or waits for input again. @default 250
  pub yield_ms: Option<f64>,
}

/// The answer of `start` and `write`: the output since the last answer.
#[napi(object, object_from_js = false)]
pub struct InteractiveResult {
  /// Present while the command runs: pass it to `write`. null once it ended.
  #[napi(ts_type = "number | null")]
  pub session_id: Either<u32, Null>,
  pub pid: u32,
  /// What it printed since the last answer (a terminal merges stdout and
  /// stderr), sanitized and tail-truncated.
  pub output: String,
  pub truncation: TruncationInfo,
  /// null while it runs.
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// Blocked reading its terminal (or stdin) and quiet for 300 ms: it wants input.
  pub awaiting_input: bool,
  /// Over 4 MiB came between two answers and the oldest was lost.
  pub dropped: bool,
  /// Formatted for the model.
  pub text: String,
  pub is_error: bool,
  /// `exec: ... (CODE)`: the command could not start, or `write` named an unknown session.
  pub error: Option<String>,
  pub error_code: Option<String>,
}

fn interactive_to_js(r: core::InteractiveResult) -> InteractiveResult {
  InteractiveResult {
    session_id: match r.session_id {
      Some(id) => Either::A(id),
      None => Either::B(Null),
    },
    pid: r.pid,
    truncation: truncation_info(&r.output.truncation, r.output.binary),
    output: r.output.text,
    exit_code: code_or_null(r.exit_code),
    signal: nullable(r.signal),
    awaiting_input: r.awaiting_input,
    dropped: r.dropped,
    text: r.text,
    is_error: r.is_error,
    error_code: r.error.as_ref().map(|e| e.code.as_str().to_owned()),
    error: r.error.map(|e| e.message()),
  }
}

/// Options of `new CommandRunner()`: defaults for every `run`, and the session's own settings.
#[napi(object, object_to_js = false)]
#[allow(dead_code)]
pub struct CommandRunnerOptions {
  /// @default process.cwd() at each call
  pub cwd: Option<String>,
  pub env: Option<HashMap<String, String>>,
  /// @default true
  pub extend_env: Option<bool>,
  /// @default 120000
  pub timeout: Option<f64>,
  /// @default 2000
  pub max_lines: Option<f64>,
  /// @default 51200
  pub max_bytes: Option<f64>,
  /// @default os.tmpdir()
  pub output_dir: Option<String>,
  /// Milliseconds after which `exec-native-*.log` files in the output
  /// directories are deleted (swept when the runner starts and closes); 0: never. @default 86400000
  pub retention: Option<f64>,
  /// Milliseconds between SIGTERM and SIGKILL when a process is killed. @default 500
  pub force_kill_after_delay: Option<f64>,
  /// Opt-in resource limits of the command's whole process tree (also in
  /// the background); a tree over a limit is stopped and the result (or the
  /// check) has `errorCode: 'ELIMIT'` and says which limit in `text`.
  pub limits: Option<crate::options::ResourceLimits>,
  /// Only host variables matching one of these patterns reach the command
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` and the
  /// non-interactive defaults always pass.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` always passes.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill `bash` when the host dies by SIGKILL (Linux PR_SET_PDEATHSIG;
  /// only `bash` itself). @default false
  pub die_with_parent: Option<bool>,
  /// The runner's sandbox for every `run` and tool call (see
  /// `ExecuteOptions.sandbox`); a call may only narrow it (read-only, fewer
  /// roots, no network), never widen or turn it off (EINVAL); `start()`
  /// (interactive) runs under it too. @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
}

/// Limits of `truncateTail`.
#[napi(object, object_to_js = false)]
#[allow(dead_code)]
pub struct TruncateOptions {
  /// @default 2000
  pub max_lines: Option<f64>,
  /// @default 51200
  pub max_bytes: Option<f64>,
}

// ---------------------------------------------------------------- results

/// What tail truncation kept of one stream.
#[napi(object, object_from_js = false)]
pub struct TruncationInfo {
  /// Whether anything was cut.
  pub truncated: bool,
  /// The limit that cut it, or null.
  #[napi(ts_type = "'lines' | 'bytes' | null")]
  pub truncated_by: Either<String, Null>,
  /// Lines the command wrote to the stream (since the last check for background processes).
  pub total_lines: f64,
  /// Bytes the command wrote to the stream, before sanitizing.
  pub total_bytes: f64,
  /// Lines shown.
  pub output_lines: f64,
  /// Bytes shown (UTF-8, after sanitizing).
  pub output_bytes: f64,
  /// The first shown line is only the tail of a line longer than `maxBytes`.
  pub last_line_partial: bool,
  /// The stream is binary (a NUL byte, or over 10% invalid UTF-8): `text`
  /// says `[binary output: N bytes, saved to <log>]`, the log has the bytes.
  pub binary: bool,
}

/// Truncation of both streams.
#[napi(object, object_from_js = false)]
pub struct StreamsTruncation {
  pub stdout: TruncationInfo,
  pub stderr: TruncationInfo,
}

/// A command moved to the background.
#[napi(object, object_from_js = false)]
pub struct BackgroundHandle {
  /// Its pid (= its process group id), for `checkBackground` / `killBackground`.
  pub pid: u32,
  /// The log that receives all its output, if it could be created.
  pub log_path: Option<String>,
}

/// The result of `runCommand`. Never rejects for a failure of the command:
/// one that cannot start has `exitCode: -1`, `isError: true` and `error`.
#[napi(object, object_from_js = false)]
pub struct CommandResult {
  /// Sanitized, tail-truncated stdout.
  pub stdout: String,
  /// Sanitized, tail-truncated stderr.
  pub stderr: String,
  /// The exit code (128+N when signal N ended it); null while it runs in the background; -1 if it never ran.
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  /// The signal that ended it, or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// The timeout passed: the command now runs in the background (see `background`).
  pub timed_out: bool,
  pub truncation: StreamsTruncation,
  /// The full, untruncated output of both streams (interleaved as read):
  /// present whenever something was cut, and for background commands.
  pub full_output_path: Option<String>,
  /// Why the full output could not be saved (completely).
  pub offload_error: Option<String>,
  /// Set when the command runs on in the background.
  pub background: Option<BackgroundHandle>,
  /// The result formatted for the model (`stdout:` / `stderr:` / `exit code: N`, notices).
  pub text: String,
  /// A non-zero exit, or a command that could not start.
  pub is_error: bool,
  /// Milliseconds until the result.
  pub execution_time: f64,
  /// The pid of `bash` (0 if it never ran).
  pub pid: u32,
  /// `exec: <what> (<CODE>)` when the command could not start, or when a
  /// resource limit stopped it (ELIMIT).
  pub error: Option<String>,
  /// ENOENT, ENOTDIR, EACCES, EINVAL, ESPAWN, ECANCELED (runner closed).
  pub error_code: Option<String>,
  /// What the command left running, adopted as background jobs of the
  /// runner (`checkBackground(pid)`, `killBackground(pid)`).
  pub adopted: Vec<AdoptedProcess>,
  /// A sandboxed command: how the sandbox was applied and what it likely
  /// denied (a finished command; `text` then ends with a `[sandbox: …]`
  /// line the model can act on).
  pub sandbox: Option<crate::options::SandboxResult>,
  /// `sandbox.denied`, at the top level as codex's protocol has it.
  pub sandbox_denied: Option<bool>,
}

/// A process a command left running, now a background job of the runner.
#[napi(object, object_from_js = false)]
pub struct AdoptedProcess {
  pub pid: u32,
  /// Its command line (`/proc/<pid>/cmdline`).
  pub command: String,
}

/// What the model reads back from one call of the tool.
#[napi(object, object_from_js = false)]
pub struct ToolCallResult {
  pub text: String,
  pub is_error: bool,
}

/// The state of a background process and its output since the last check.
#[napi(object, object_from_js = false)]
pub struct BackgroundCheck {
  pub pid: u32,
  pub running: bool,
  /// null while running.
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// Ended by `killBackground` or `close()`.
  pub killed: bool,
  /// New stdout since the last check (bounded by the same limits).
  pub stdout: String,
  pub stderr: String,
  pub truncation: StreamsTruncation,
  pub log_path: Option<String>,
  pub offload_error: Option<String>,
  /// Formatted for the model.
  pub text: String,
  /// It exited on its own with a non-zero code, or a resource limit stopped it.
  pub is_error: bool,
  /// `exec: memory limit of 256 MiB exceeded (ELIMIT)` when a resource limit stopped it.
  pub error: Option<String>,
  /// `'ELIMIT'` when a resource limit stopped it.
  pub error_code: Option<String>,
  /// It runs and is blocked reading its input (a terminal or a pipe), which
  /// a background command never gets: use `start()` for interactive ones.
  pub awaiting_input: bool,
}

/// One entry of `listBackground()`.
#[napi(object, object_from_js = false)]
pub struct BackgroundProcessInfo {
  pub pid: u32,
  pub command: String,
  pub running: bool,
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  pub killed: bool,
  pub log_path: Option<String>,
  /// Epoch milliseconds.
  pub started_at: f64,
  /// Milliseconds it has run (until its exit).
  pub runtime: f64,
}

/// The result of `truncateTail`.
#[napi(object, object_from_js = false)]
pub struct TruncateResult {
  /// The kept tail.
  pub content: String,
  pub truncated: bool,
  #[napi(ts_type = "'lines' | 'bytes' | null")]
  pub truncated_by: Either<String, Null>,
  pub total_lines: f64,
  pub total_bytes: f64,
  pub output_lines: f64,
  pub output_bytes: f64,
  pub last_line_partial: bool,
}

// ---------------------------------------------------------------- conversion

fn truncation_info(t: &Truncation, binary: bool) -> TruncationInfo {
  TruncationInfo {
    binary,
    truncated: t.truncated(),
    truncated_by: nullable(t.truncated_by.map(|b| b.as_str().to_owned())),
    total_lines: t.total_lines as f64,
    total_bytes: t.total_bytes as f64,
    output_lines: t.output_lines as f64,
    output_bytes: t.output_bytes as f64,
    last_line_partial: t.last_line_partial,
  }
}

fn streams(out: &StreamOutput, err: &StreamOutput) -> StreamsTruncation {
  StreamsTruncation {
    stdout: truncation_info(&out.truncation, out.binary),
    stderr: truncation_info(&err.truncation, err.binary),
  }
}

fn path_of(log: &LogStatus) -> Option<String> {
  log.path().map(|p| p.display().to_string())
}

fn code_or_null(c: Option<i32>) -> Either<i32, Null> {
  c.map_or(Either::B(Null), Either::A)
}

fn result_to_js(r: CoreResult) -> CommandResult {
  CommandResult {
    truncation: streams(&r.stdout, &r.stderr),
    full_output_path: path_of(&r.log),
    offload_error: r.log.error().map(str::to_owned),
    background: r.background.map(|b| BackgroundHandle {
      pid: b.pid,
      log_path: path_of(&b.log),
    }),
    stdout: r.stdout.text,
    stderr: r.stderr.text,
    exit_code: code_or_null(r.exit_code),
    signal: nullable(r.signal),
    timed_out: r.timed_out,
    text: r.text,
    is_error: r.is_error,
    execution_time: r.duration.as_secs_f64() * 1000.0,
    pid: r.pid,
    error_code: r.error.as_ref().map(|e| e.code.as_str().to_owned()),
    error: r.error.map(|e| e.message()),
    adopted: r
      .adopted
      .into_iter()
      .map(|(pid, command)| AdoptedProcess { pid, command })
      .collect(),
    sandbox_denied: r.sandbox.as_ref().map(|s| s.denied),
    sandbox: r.sandbox.map(Into::into),
  }
}

fn check_to_js(c: CheckResult) -> BackgroundCheck {
  BackgroundCheck {
    pid: c.pid,
    running: c.running,
    exit_code: code_or_null(c.exit_code),
    signal: nullable(c.signal),
    killed: c.killed,
    truncation: streams(&c.stdout, &c.stderr),
    log_path: path_of(&c.log),
    offload_error: c.log.error().map(str::to_owned),
    stdout: c.stdout.text,
    stderr: c.stderr.text,
    text: c.text,
    is_error: c.is_error,
    error_code: c.error.as_ref().map(|e| e.code.as_str().to_owned()),
    error: c.error.map(|e| e.message()),
    awaiting_input: c.awaiting_input,
  }
}

fn info_to_js(i: BackgroundInfo) -> BackgroundProcessInfo {
  BackgroundProcessInfo {
    pid: i.pid,
    command: i.command,
    running: i.running,
    exit_code: code_or_null(i.exit_code),
    signal: nullable(i.signal),
    killed: i.killed,
    log_path: path_of(&i.log),
    started_at: i
      .started
      .duration_since(UNIX_EPOCH)
      .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
    runtime: i.runtime.as_secs_f64() * 1000.0,
  }
}

// ---------------------------------------------------------------- arguments

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const DEFAULT_RETENTION_MS: u64 = 24 * 3600 * 1000;
const DEFAULT_KILL_GRACE_MS: u64 = 500;

/// A limit: a positive integer.
fn opt_limit(obj: Option<&Object>, key: &str) -> ArgResult<Option<usize>> {
  let Some(o) = obj else { return Ok(None) };
  let Some(n) = args::opt_non_negative(o, key, false)? else {
    return Ok(None);
  };
  if n < 1.0 || n.fract() != 0.0 {
    return Err(type_error(format!(
      "options.{key} must be a positive integer, got {n}"
    )));
  }
  Ok(Some(n as usize))
}

fn has_env(obj: Option<&Object>) -> ArgResult<bool> {
  let Some(o) = obj else { return Ok(false) };
  Ok(args::prop(o, "env")?.is_some() || args::prop(o, "extendEnv")?.is_some())
}

/// Settings of a runner that each run starts from.
#[derive(Clone)]
struct Defaults {
  cwd: Option<PathBuf>,
  env: EnvSpec,
  timeout: Option<Duration>,
  limits: OutputLimits,
  resource_limits: exec_core::limits::Limits,
  die_with_parent: bool,
  sandbox: Option<exec_core::sandbox::SandboxPolicy>,
}

impl Default for Defaults {
  fn default() -> Self {
    Defaults {
      cwd: None,
      env: EnvSpec::inherit(),
      timeout: Some(Duration::from_millis(DEFAULT_TIMEOUT_MS)),
      limits: OutputLimits::default(),
      resource_limits: Default::default(),
      die_with_parent: false,
      sandbox: None,
    }
  }
}

fn read_runner_options(obj: Option<&Object>) -> ArgResult<(Defaults, RunnerConfig)> {
  let limits = OutputLimits {
    max_lines: opt_limit(obj, "maxLines")?.unwrap_or(core::truncate::DEFAULT_MAX_LINES),
    max_bytes: opt_limit(obj, "maxBytes")?.unwrap_or(core::truncate::DEFAULT_MAX_BYTES),
  };
  let sandbox = args::sandbox(obj)?;
  let mut env = args::env_with_lists(obj)?;
  args::sandbox_env(obj, &sandbox, &mut env)?;
  let defaults = Defaults {
    sandbox,
    cwd: args::opt_string_in(obj, "cwd")?.map(PathBuf::from),
    env,
    timeout: args::opt_timeout(obj, "timeout", DEFAULT_TIMEOUT_MS)?,
    limits,
    resource_limits: args::limits(obj)?,
    die_with_parent: args::opt_bool_in(obj, "dieWithParent")?.unwrap_or(false),
  };
  let retention = args::opt_timeout(obj, "retention", DEFAULT_RETENTION_MS)?;
  let config = RunnerConfig {
    owner: host::owner(),
    output_dir: args::opt_string_in(obj, "outputDir")?
      .map(PathBuf::from)
      .unwrap_or_else(std::env::temp_dir),
    retention,
    kill_grace: args::opt_ms(obj, "forceKillAfterDelay", DEFAULT_KILL_GRACE_MS)?,
  };
  Ok((defaults, config))
}

fn read_command_options(obj: Option<&Object>, d: &Defaults) -> ArgResult<CoreOptions> {
  let cwd = match args::opt_string_in(obj, "cwd")? {
    Some(c) => PathBuf::from(c),
    None => match &d.cwd {
      Some(c) => c.clone(),
      None => args::host_cwd()?,
    },
  };
  let mut env = if has_env(obj)? {
    let call = args::env_spec(obj)?;
    let mut env = d.env.clone();
    env.vars.extend(call.vars);
    env.remove.extend(call.remove);
    env.extend = env.extend && call.extend;
    env
  } else {
    d.env.clone()
  };
  // the call's lists replace the runner's
  if let Some(o) = obj {
    let mut lists = EnvSpec::inherit();
    args::env_lists(Some(o), &mut lists)?;
    if args::prop(o, "envAllowlist")?.is_some() {
      env.allow = lists.allow;
    }
    if args::prop(o, "envDenylist")?.is_some() {
      env.deny = lists.deny;
    }
  }
  let resource_limits = match obj {
    Some(o) if args::prop(o, "limits")?.is_some() => args::limits(Some(o))?,
    _ => d.resource_limits.clone(),
  };
  let die_with_parent = args::opt_bool_in(obj, "dieWithParent")?.unwrap_or(d.die_with_parent);
  let timeout = match obj {
    Some(o) if args::prop(o, "timeout")?.is_some() => args::opt_timeout(Some(o), "timeout", 0)?,
    _ => d.timeout,
  };
  let limits = OutputLimits {
    max_lines: opt_limit(obj, "maxLines")?.unwrap_or(d.limits.max_lines),
    max_bytes: opt_limit(obj, "maxBytes")?.unwrap_or(d.limits.max_bytes),
  };
  let output_dir = args::opt_string_in(obj, "outputDir")?.map(PathBuf::from);
  let background = args::opt_bool_in(obj, "background")?.unwrap_or(false);
  let cleanup = args::opt_bool_in(obj, "cleanup")?.unwrap_or(false);
  // the call's sandbox may only narrow the runner's
  let call_sandbox = args::sandbox(obj)?;
  let has_call_sandbox = match obj {
    Some(o) => args::prop(o, "sandbox")?.is_some(),
    None => false,
  };
  let sandbox = match (&d.sandbox, call_sandbox) {
    (None, call) => call,
    (Some(base), None) if has_call_sandbox => {
      return Err(type_error(format!(
        "options.sandbox cannot turn off the runner's sandbox ({:?})",
        base.mode
      )))
    }
    (Some(base), None) => Some(base.clone()),
    (Some(base), Some(call)) => {
      if !call.narrows(base) {
        return Err(type_error(
          "options.sandbox may only narrow the runner's sandbox (mode, writable roots, /tmp, network, onUnavailable)",
        ));
      }
      Some(call)
    }
  };
  if has_call_sandbox && d.sandbox.is_none() {
    args::sandbox_env(obj, &sandbox, &mut env)?;
  }
  Ok(CoreOptions {
    sandbox,
    cleanup,
    cwd,
    env,
    timeout,
    limits,
    output_dir,
    background,
    resource_limits,
    die_with_parent,
  })
}

fn read_pid(v: &Unknown) -> ArgResult<u32> {
  read_id(v, "pid")
}

/// A positive integer argument (a pid, a session id).
fn read_id(v: &Unknown, name: &str) -> ArgResult<u32> {
  let n = args::number(v, name)?;
  if !(1.0..=(i32::MAX as f64)).contains(&n) || n.fract() != 0.0 {
    return Err(type_error(format!(
      "{name} must be a positive integer, got {n}"
    )));
  }
  Ok(n as u32)
}

// ---------------------------------------------------------------- calls

fn run_with<'env>(
  env: &'env Env,
  runner: core::CommandRunner,
  defaults: &Defaults,
  command: Unknown<'env>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CommandResult>> {
  let parsed = (|| -> ArgResult<_> {
    let command = args::string(&command, "command")?;
    let opts = args::options(options, "options")?;
    let o = read_command_options(opts.as_ref(), defaults)?;
    Ok((command, o))
  })();
  let (command, opts) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  env.spawn_future_with_callback(
    async move { Ok(runner.run(&command, opts).await) },
    |_, r| Ok(result_to_js(r)),
  )
}

fn check_with(env: &Env, runner: &core::CommandRunner, pid: Unknown) -> Result<BackgroundCheck> {
  let pid = read_pid(&pid).map_err(|e| throw_type(env, &e))?;
  runner
    .check(pid)
    .map(check_to_js)
    .map_err(|e| throw_coded(env, &e))
}

fn kill_with<'env>(
  env: &'env Env,
  runner: core::CommandRunner,
  pid: Unknown<'env>,
) -> Result<PromiseRaw<'env, BackgroundCheck>> {
  let pid = match read_pid(&pid) {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  env.spawn_future_with_callback(
    async move { Ok(runner.kill(pid).await) },
    |env, r| match r {
      Ok(c) => Ok(check_to_js(c)),
      Err(e) => Err(coded_error(env, e)),
    },
  )
}

/// A session of the command tool: runs commands, and owns the ones that went
/// to the background (after their timeout, or with `background: true`).
/// `close()` kills what it still runs; dropping it does too.
#[napi]
pub struct CommandRunner {
  runner: core::CommandRunner,
  defaults: Defaults,
}

#[napi]
impl CommandRunner {
  /// Throws a TypeError (code `EINVAL`) for options of the wrong type.
  #[napi(constructor, ts_args_type = "options?: CommandRunnerOptions")]
  pub fn new(env: Env, options: Option<Unknown>) -> Result<Self> {
    let parsed = (|| -> ArgResult<_> {
      let opts = args::options(options, "options")?;
      read_runner_options(opts.as_ref())
    })();
    let (defaults, config) = parsed.map_err(|e| throw_type(&env, &e))?;
    Ok(CommandRunner {
      runner: core::CommandRunner::new(config),
      defaults,
    })
  }

  /// Run `bash -c <command>` (see `runCommand`).
  #[napi(
    ts_args_type = "command: string, options?: CommandOptions",
    ts_return_type = "Promise<CommandResult>"
  )]
  pub fn run<'env>(
    &self,
    env: &'env Env,
    command: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, CommandResult>> {
    run_with(env, self.runner.clone(), &self.defaults, command, options)
  }

  /// Running or exited, and only the output written since the last check.
  /// Throws (code `ESRCH`) for a pid this runner does not know.
  #[napi(ts_args_type = "pid: number")]
  pub fn check_background(&self, env: Env, pid: Unknown) -> Result<BackgroundCheck> {
    check_with(&env, &self.runner, pid)
  }

  /// Terminate the whole process group (SIGTERM, then SIGKILL) and resolve
  /// with the final output. Rejects (code `ESRCH`) for an unknown pid.
  #[napi(
    ts_args_type = "pid: number",
    ts_return_type = "Promise<BackgroundCheck>"
  )]
  pub fn kill_background<'env>(
    &self,
    env: &'env Env,
    pid: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, BackgroundCheck>> {
    kill_with(env, self.runner.clone(), pid)
  }

  /// One call of the model's tool (`commandTool`): `{ command, timeout? }`
  /// runs it, `{ check_pid }` / `{ kill_pid }` manage a background process.
  /// Never rejects for the model's mistakes: bad arguments and unknown pids
  /// resolve with `isError: true` and an `exec: ... (CODE)` text. Rejects
  /// (TypeError, `EINVAL`) only when `args` is not an object.
  #[napi(
    ts_args_type = "args: { command?: string; timeout?: number; check_pid?: number; kill_pid?: number }",
    ts_return_type = "Promise<ToolCallResult>"
  )]
  pub fn call<'env>(
    &self,
    env: &'env Env,
    args: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, ToolCallResult>> {
    let parsed = (|| -> ArgResult<_> {
      let obj = args::options(Some(args), "args")?
        .ok_or_else(|| type_error("args must be an object, got null"))?;
      let json: serde_json::Value = env
        .from_js_value(obj)
        .map_err(|e| type_error(format!("args: {e}")))?;
      let base = read_command_options(None, &self.defaults)?;
      Ok((json, base))
    })();
    let (json, base) = match parsed {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let runner = self.runner.clone();
    env.spawn_future_with_callback(
      async move { Ok(core::tool::call(&runner, &json, base).await) },
      |_, r| {
        Ok(ToolCallResult {
          text: r.text,
          is_error: r.is_error,
        })
      },
    )
  }

  /// Start an interactive command (codex's unified exec): `bash -c
  /// <command>` on a pseudo-terminal. Resolves after `yieldMs` with the
  /// output so far and, while it still runs, a `sessionId` for `write`;
  /// sooner when it ends or waits for input (`awaitingInput`). Never rejects
  /// for the command's failures (`isError`, `error`); rejects (TypeError,
  /// `EINVAL`) for options of the wrong type.
  #[napi(
    ts_args_type = "command: string, options?: StartCommandOptions",
    ts_return_type = "Promise<InteractiveResult>"
  )]
  pub fn start<'env>(
    &self,
    env: &'env Env,
    command: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, InteractiveResult>> {
    let parsed = (|| -> ArgResult<_> {
      let command = args::string(&command, "command")?;
      let obj = args::options(options, "options")?;
      let base = read_command_options(obj.as_ref(), &self.defaults)?;
      let mut o = core::StartOptions::new(base.cwd);
      o.sandbox = base.sandbox;
      o.env = base.env;
      o.limits = base.limits;
      o.resource_limits = base.resource_limits;
      if let Some(ms) = args::opt_number_in(obj.as_ref(), "yieldMs")? {
        o.yield_time = Duration::from_micros((ms * 1000.0) as u64);
      }
      if let Some(t) = args::opt_bool_in(obj.as_ref(), "tty")? {
        o.tty = t;
      }
      for (key, slot) in [("rows", &mut o.rows), ("cols", &mut o.cols)] {
        if let Some(n) = args::opt_number_in(obj.as_ref(), key)? {
          if !(1.0..=10000.0).contains(&n) {
            return Err(type_error(format!(
              "options.{key} must be from 1 to 10000, got {n}"
            )));
          }
          *slot = n as u16;
        }
      }
      Ok((command, o))
    })();
    let (command, opts) = match parsed {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let runner = self.runner.clone();
    env.spawn_future_with_callback(
      async move { Ok(runner.start(&command, opts).await) },
      |_, r| Ok(interactive_to_js(r)),
    )
  }

  /// Send `chars` to an interactive command (keystrokes: `\r` is Enter,
  /// `\u0003` Ctrl-C, `\u0004` Ctrl-D) and resolve with the output that
  /// came back within `yieldMs`. An unknown or ended session resolves with
  /// `isError` and `errorCode: 'ESRCH'`.
  #[napi(
    ts_args_type = "sessionId: number, chars: string, options?: WriteCommandOptions",
    ts_return_type = "Promise<InteractiveResult>"
  )]
  pub fn write<'env>(
    &self,
    env: &'env Env,
    session_id: Unknown<'env>,
    chars: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, InteractiveResult>> {
    let parsed = (|| -> ArgResult<_> {
      let id = read_id(&session_id, "sessionId")?;
      let chars = args::string(&chars, "chars")?;
      let obj = args::options(options, "options")?;
      let yield_time = args::opt_number_in(obj.as_ref(), "yieldMs")?
        .map(|ms| Duration::from_micros((ms * 1000.0) as u64))
        .unwrap_or(core::interactive::DEFAULT_WRITE_YIELD);
      Ok((id, chars, yield_time))
    })();
    let (id, chars, yield_time) = match parsed {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let runner = self.runner.clone();
    env.spawn_future_with_callback(
      async move { Ok(runner.write(id, chars.as_bytes(), yield_time).await) },
      |_, r| Ok(interactive_to_js(r)),
    )
  }

  /// Terminate an interactive command's whole tree (SIGTERM, then SIGKILL)
  /// and resolve with its last output.
  #[napi(
    ts_args_type = "sessionId: number",
    ts_return_type = "Promise<InteractiveResult>"
  )]
  pub fn kill_session<'env>(
    &self,
    env: &'env Env,
    session_id: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, InteractiveResult>> {
    let id = match read_id(&session_id, "sessionId") {
      Ok(id) => id,
      Err(e) => return reject_type_error(env, e),
    };
    let runner = self.runner.clone();
    env.spawn_future_with_callback(async move { Ok(runner.kill_session(id).await) }, |_, r| {
      Ok(interactive_to_js(r))
    })
  }

  /// The ids of the interactive commands still running.
  #[napi]
  pub fn sessions(&self) -> Vec<u32> {
    self.runner.sessions()
  }

  /// Every background process of this runner with its status, oldest first.
  #[napi]
  pub fn list_background(&self) -> Vec<BackgroundProcessInfo> {
    self.runner.list().into_iter().map(info_to_js).collect()
  }

  /// Kill everything still running, sweep old logs; later runs fail with
  /// `ECANCELED`. Resolves with how many processes were still running.
  #[napi(ts_return_type = "Promise<number>")]
  pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, u32>> {
    let runner = self.runner.clone();
    env.spawn_future_with_callback(async move { Ok(runner.close().await as u32) }, |_, n| Ok(n))
  }
}

/// The runner behind the module-level functions, one per Node environment.
fn default_runner() -> core::CommandRunner {
  static RUNNERS: Mutex<Option<HashMap<u64, core::CommandRunner>>> = Mutex::new(None);
  let owner = host::owner();
  RUNNERS
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .get_or_insert_with(HashMap::new)
    .entry(owner)
    .or_insert_with(|| {
      core::CommandRunner::new(RunnerConfig {
        owner,
        ..Default::default()
      })
    })
    .clone()
}

/// Run `bash -c <command>` for a model: stateless, stdin closed, a
/// non-interactive environment; output sanitized (no ANSI escapes), cut to the
/// last `maxLines` lines / `maxBytes` bytes per stream with the full output in
/// a log file; after `timeout` the command moves to the background instead of
/// being killed (see `checkBackground`, `killBackground`). Uses the module's
/// default runner; create a `CommandRunner` for a session of your own.
#[napi(
  ts_args_type = "command: string, options?: CommandOptions",
  ts_return_type = "Promise<CommandResult>"
)]
pub fn run_command<'env>(
  env: &'env Env,
  command: Unknown<'env>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CommandResult>> {
  run_with(
    env,
    default_runner(),
    &Defaults::default(),
    command,
    options,
  )
}

/// `checkBackground` of the default runner (processes started by `runCommand`).
#[napi(ts_args_type = "pid: number")]
pub fn check_background(env: Env, pid: Unknown) -> Result<BackgroundCheck> {
  check_with(&env, &default_runner(), pid)
}

/// `killBackground` of the default runner.
#[napi(
  ts_args_type = "pid: number",
  ts_return_type = "Promise<BackgroundCheck>"
)]
pub fn kill_background<'env>(
  env: &'env Env,
  pid: Unknown<'env>,
) -> Result<PromiseRaw<'env, BackgroundCheck>> {
  kill_with(env, default_runner(), pid)
}

/// `listBackground` of the default runner.
#[napi]
pub fn list_background() -> Vec<BackgroundProcessInfo> {
  default_runner()
    .list()
    .into_iter()
    .map(info_to_js)
    .collect()
}

/// Strip terminal escapes (CSI, OSC, DCS, ...; parsed by `vte`), drop control
/// characters other than tab, newline and carriage return, turn `\r\n` into `\n`.
#[napi(ts_args_type = "text: string")]
pub fn sanitize(env: Env, text: Unknown) -> Result<String> {
  let text = args::string(&text, "text").map_err(|e| throw_type(&env, &e))?;
  Ok(core::sanitize(&text))
}

/// Keep the last complete lines of `text` within `maxLines` and `maxBytes`
/// (whichever hits first); a single line longer than `maxBytes` keeps its
/// tail, cut on a character boundary.
#[napi(ts_args_type = "text: string, options?: TruncateOptions")]
pub fn truncate_tail(env: Env, text: Unknown, options: Option<Unknown>) -> Result<TruncateResult> {
  let parsed = (|| -> ArgResult<_> {
    let text = args::string(&text, "text")?;
    let opts = args::options(options, "options")?;
    let limits = OutputLimits {
      max_lines: opt_limit(opts.as_ref(), "maxLines")?.unwrap_or(core::truncate::DEFAULT_MAX_LINES),
      max_bytes: opt_limit(opts.as_ref(), "maxBytes")?.unwrap_or(core::truncate::DEFAULT_MAX_BYTES),
    };
    Ok((text, limits))
  })();
  let (text, limits) = parsed.map_err(|e| throw_type(&env, &e))?;
  let (content, t) = core::truncate_tail(&text, limits);
  let info = truncation_info(&t, false);
  Ok(TruncateResult {
    content: content.to_owned(),
    truncated: info.truncated,
    truncated_by: info.truncated_by,
    total_lines: info.total_lines,
    total_bytes: info.total_bytes,
    output_lines: info.output_lines,
    output_bytes: info.output_bytes,
    last_line_partial: info.last_line_partial,
  })
}

/// The model's tool, as the seed defines it: `{ name, description,
/// parameters }` with the JSON schema of `{ command, timeout?, check_pid?,
/// kill_pid? }`. Hand it to the model; dispatch its calls with `runner.call(args)`.
#[napi(
  ts_return_type = "{ name: 'bash'; description: string; parameters: { type: 'object'; properties: Record<'command' | 'timeout' | 'check_pid' | 'kill_pid', { type: 'string' | 'integer'; description: string }> } }"
)]
pub fn command_tool() -> serde_json::Value {
  core::tool::tool_definition()
}

/// Serve the MCP server (tools `bash` and `execute_code`) over stdin/stdout;
/// resolves when stdin closes, after the connection's processes were killed.
/// `exec-native mcp` calls it.
#[napi(
  ts_args_type = "options?: { cwd?: string }",
  ts_return_type = "Promise<void>"
)]
pub fn serve_mcp<'env>(
  env: &'env Env,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, ()>> {
  let parsed = (|| -> ArgResult<_> {
    let opts = args::options(options, "options")?;
    let cwd = match args::opt_string_in(opts.as_ref(), "cwd")? {
      Some(c) => PathBuf::from(c),
      None => args::host_cwd()?,
    };
    Ok(cwd)
  })();
  let cwd = match parsed {
    Ok(c) => c,
    Err(e) => return reject_type_error(env, e),
  };
  let config = exec_core::mcp::McpConfig {
    cwd,
    runner: RunnerConfig {
      owner: host::owner(),
      ..Default::default()
    },
    toolchain: host::toolchain().clone(),
  };
  env.spawn_future_with_callback(
    async move { Ok(exec_core::mcp::serve_stdio(config).await) },
    |env, r| match r {
      Ok(()) => Ok(()),
      Err(e) => Err(coded_error(env, e)),
    },
  )
}
