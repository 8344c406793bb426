//! The agent command tool: `runCommand` and the `CommandRunner` class (a
//! session that owns background processes), plus `sanitize` and
//! `truncateTail`. Only type conversion; the work is in `exec_core::command`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use exec_core::command::{
  self as core, BackgroundInfo, CallOptions, CheckResult, CommandDefaults, CommandReport,
  LogStatus, OutputLimits, RunnerConfig, StreamOutput, Truncation,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::call;
use crate::error::throw_coded;
use crate::host;
use crate::options::{nullable, read_command_options, read_runner_options, read_start_options};
use crate::read::{self, ArgResult, At, FromJs, Id, Ms, Positive, Timeout};

// ---------------------------------------------------------------- options

js_options! {
  /// Options of `runCommand` / `CommandRunner.run`. Unset values come from
  /// the runner's options, then from the defaults below; `env` adds to the
  /// runner's, the env lists and `limits` replace the runner's, `sandbox`
  /// may only narrow it. The non-interactive defaults `PAGER=cat`,
  /// `GIT_PAGER=cat`, `GIT_TERMINAL_PROMPT=0`, `TERM=dumb`, `NO_COLOR=1`
  /// always pass and can be overridden in `env`. `dieWithParent` kills only
  /// `bash` itself.
  pub struct CommandOptions {
    ..process,
    /// Milliseconds before the command moves to the background (it is not
    /// killed); 0 or Infinity: wait for the end. @default 120000
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// Lines of each stream shown (the last ones). @default 2000
    #[napi(ts_type = "number")]
    pub max_lines: Option<Positive>,
    /// Bytes of each stream shown (the last ones). @default 51200
    #[napi(ts_type = "number")]
    pub max_bytes: Option<Positive>,
    /// Which part of a long output is shown: `'tail'` (the last lines) or
    /// `'head_tail'` (the first lines within half the budget, the last within
    /// the rest, and between them `[... N lines (size) omitted ...]`; a
    /// compiler's first error is at the top). @default the runner's ('tail')
    #[napi(ts_type = "'tail' | 'head_tail'")]
    pub truncation: Option<String>,
    /// Directory of the full-output logs (`exec-native-<hex>.log`). @default os.tmpdir()
    pub output_dir: Option<String>,
    /// Start in the background at once and return its pid. @default false
    pub background: Option<bool>,
    /// When `bash` exits, terminate what it left running (`cmd &`, `setsid
    /// nohup ...`) instead of adopting it as background jobs of the runner
    /// (listed in `text` and in `adopted`). @default false
    pub cleanup: Option<bool>,
  }
}

js_options! {
  /// Options of `CommandRunner.start` (an interactive command); the others
  /// as in `CommandOptions`, over the runner's.
  pub struct StartCommandOptions {
    ..process,
    /// Milliseconds to collect output before answering; the answer comes
    /// sooner when the command ends or waits for input. @default 10000
    #[napi(ts_type = "number")]
    pub yield_ms: Option<Ms>,
    /// A pseudo-terminal (`true`: the program sees a terminal, prompts and
    /// Ctrl-C work) or pipes with stdin open (`false`). On Windows the
    /// default is `false` (a console's output is a rendering of its screen,
    /// lines wrapped at `cols`), and `true` runs it on a ConPTY console. @default true
    pub tty: Option<bool>,
    /// Terminal size (1 to 10000). @default 24
    #[napi(ts_type = "number")]
    pub rows: Option<TermSize>,
    /// @default 200
    #[napi(ts_type = "number")]
    pub cols: Option<TermSize>,
    /// Lines shown of each answer's output (the last ones). @default the runner's (2000)
    #[napi(ts_type = "number")]
    pub max_lines: Option<Positive>,
    /// Bytes shown of each answer's output (the last ones). @default the runner's (51200)
    #[napi(ts_type = "number")]
    pub max_bytes: Option<Positive>,
    /// Which part of a long output is shown: `'tail'` (the last lines) or
    /// `'head_tail'` (the first lines within half the budget, the last within
    /// the rest, and between them `[... N lines (size) omitted ...]`; a
    /// compiler's first error is at the top). @default the runner's ('tail')
    #[napi(ts_type = "'tail' | 'head_tail'")]
    pub truncation: Option<String>,
  }
}

js_options! {
  /// Options of `CommandRunner.write`.
  pub struct WriteCommandOptions {
    /// Milliseconds to collect output after the write; sooner when the
    /// command ends or waits for input again. @default 250
    #[napi(ts_type = "number")]
    pub yield_ms: Option<Ms>,
    /// After the write, end the command's stdin: it reads EOF (on pipes,
    /// `tty: false`; a `\u0004` in `chars` does the same there). @default false
    pub close_stdin: Option<bool>,
  }
}

/// A terminal's rows or columns: 1 to 10000.
pub struct TermSize(pub u16);

impl<'env> FromJs<'env> for TermSize {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let n = f64::from_js(v, at)?;
    if !(1.0..=10000.0).contains(&n) {
      return Err(at.error(format_args!("must be from 1 to 10000, got {n}")));
    }
    Ok(TermSize(n as u16))
  }
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
    error: call::error_message(&r.error),
    error_code: call::error_code(&r.error),
  }
}

js_options! {
  /// Options of `new CommandRunner()`: defaults for every `run`, and the
  /// session's own settings. Its `sandbox` holds for every `run`, tool call
  /// and `start()`; a call may only narrow it (read-only, fewer roots, no
  /// network), never widen or turn it off (EINVAL).
  pub struct CommandRunnerOptions {
    ..process,
    /// @default 120000
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// @default 2000
    #[napi(ts_type = "number")]
    pub max_lines: Option<Positive>,
    /// @default 51200
    #[napi(ts_type = "number")]
    pub max_bytes: Option<Positive>,
    /// Which part of a long output is shown: `'tail'` (the last lines) or
    /// `'head_tail'` (the first lines within half the budget, the last within
    /// the rest, and between them `[... N lines (size) omitted ...]`; a
    /// compiler's first error is at the top). @default 'tail'
    #[napi(ts_type = "'tail' | 'head_tail'")]
    pub truncation: Option<String>,
    /// @default os.tmpdir()
    pub output_dir: Option<String>,
    /// Milliseconds after which `exec-native-*.log` files in the output
    /// directories are deleted (swept when the runner starts and closes); 0: never. @default 86400000
    #[napi(ts_type = "number")]
    pub retention: Option<Timeout>,
    /// Milliseconds between SIGTERM and SIGKILL when a process is killed. @default 500
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// The commands of `run`, `call` and `callTool('bash')` share one shell
    /// state, as in one terminal: `cd`, `export`, variables, functions,
    /// aliases and shell options carry over to the next command. Each
    /// command still runs in its own `bash -c` (timeouts background it, `&`
    /// jobs are adopted, as stateless); a command that moved to the
    /// background or was cancelled leaves the state as it was; a call's own
    /// `cwd` is a `cd` that carries over (bash only; not on Windows yet:
    /// its runs fail with `ENOTSUP`). @default false
    pub stateful: Option<bool>,
    /// The shell that runs the commands: `'bash'` (`bash -c`; on Windows
    /// Git for Windows' bash, else each run's error is `ENOENT` naming the
    /// fix), `'powershell'` (`pwsh`, else Windows PowerShell, with
    /// `-NoProfile -NonInteractive -Command`) or `'cmd'` (Windows' `cmd.exe
    /// /d /s /c`; `ENOENT` elsewhere). Not `stateful` unless `'bash'`
    /// (`EINVAL`). @default 'bash'
    #[napi(ts_type = "'bash' | 'powershell' | 'cmd'")]
    pub shell: Option<String>,
  }
}

js_options! {
  /// Limits of `truncateTail`.
  pub struct TruncateOptions {
    /// @default 2000
    #[napi(ts_type = "number")]
    pub max_lines: Option<Positive>,
    /// @default 51200
    #[napi(ts_type = "number")]
    pub max_bytes: Option<Positive>,
  }
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
  /// `callTool('bash', ...)`: the result as data (MCP's `structuredContent`):
  /// `exit_code`, `signal`, `pid`, `running`, `backgrounded`, `truncated`,
  /// `log_path`, `adopted`.
  #[napi(ts_type = "Record<string, unknown>")]
  pub structured: Option<serde_json::Value>,
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

fn result_to_js(r: CommandReport) -> CommandResult {
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
    error: call::error_message(&r.error),
    error_code: call::error_code(&r.error),
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
    error: call::error_message(&c.error),
    error_code: call::error_code(&c.error),
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

// ---------------------------------------------------------------- calls

fn run_with<'env>(
  env: &'env Env,
  runner: core::CommandRunner,
  defaults: &CommandDefaults,
  command: Unknown<'env>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CommandResult>> {
  let args = (|| -> ArgResult<_> {
    let command: String = read::required(command, &At::arg("command"))?;
    Ok((command, read_command_options(options, defaults)?))
  })();
  let fut = args.map(|(command, opts)| async move { runner.run(&command, opts).await });
  call::promise(env, fut, |_, r| Ok(result_to_js(r)))
}

fn check_with(env: &Env, runner: &core::CommandRunner, pid: Unknown) -> Result<BackgroundCheck> {
  let pid = call::sync_args(env, read_id(pid, "pid"))?;
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
  let fut = read_id(pid, "pid").map(|pid| async move { runner.kill(pid).await });
  call::fallible(env, fut, |_, c| Ok(check_to_js(c)))
}

/// A positive integer argument (a pid, a session id).
fn read_id(v: Unknown, name: &str) -> ArgResult<u32> {
  read::required::<Id>(v, &At::arg(name)).map(|id| id.0)
}

/// A session of the command tool: runs commands, and owns the ones that went
/// to the background (after their timeout, or with `background: true`).
/// `close()` kills what it still runs; dropping it does too.
#[napi]
pub struct CommandRunner {
  runner: core::CommandRunner,
  defaults: CommandDefaults,
}

#[napi]
impl CommandRunner {
  /// Throws a TypeError (code `EINVAL`) for options of the wrong type.
  #[napi(constructor, ts_args_type = "options?: CommandRunnerOptions")]
  pub fn new(env: Env, options: Option<Unknown>) -> Result<Self> {
    let (defaults, config) = call::sync_args(&env, read_runner_options(options))?;
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
    let args = (|| -> ArgResult<_> {
      let at = At::arg("args");
      let obj: Object = read::required(args, &at)?;
      let json: serde_json::Value = env.from_js_value(obj).map_err(|e| at.error(e))?;
      let base = self.defaults.merge(
        CallOptions::default(),
        exec_core::process::options::host_cwd,
      )?;
      Ok((json, base))
    })();
    let runner = self.runner.clone();
    let fut = args.map(|(json, base)| async move { core::tool::call(&runner, &json, base).await });
    call::promise(env, fut, |_, r| {
      Ok(ToolCallResult {
        text: r.text,
        is_error: r.is_error,
        structured: None,
      })
    })
  }

  /// One call of a tool of `commandTools()` by its name (`bash`,
  /// `exec_command`, `write_stdin`). Resolves with `{ text, isError }`, and
  /// for `bash` `structured` (exit code, signal, pid, backgrounded,
  /// truncated, log path, adopted). Never rejects for the model's mistakes
  /// (unknown arguments, pids, sessions: `isError` and an `exec: ... (CODE)`
  /// text); rejects (TypeError, `EINVAL`) when `args` is not an object.
  #[napi(
    ts_args_type = "name: string, args: Record<string, unknown>",
    ts_return_type = "Promise<ToolCallResult>"
  )]
  pub fn call_tool<'env>(
    &self,
    env: &'env Env,
    name: Unknown<'env>,
    args: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, ToolCallResult>> {
    let args = (|| -> ArgResult<_> {
      let name: String = read::required(name, &At::arg("name"))?;
      let at = At::arg("args");
      let obj: Object = read::required(args, &at)?;
      let json: serde_json::Value = env.from_js_value(obj).map_err(|e| at.error(e))?;
      let base = self.defaults.merge(
        CallOptions::default(),
        exec_core::process::options::host_cwd,
      )?;
      Ok((name, json, base))
    })();
    let runner = self.runner.clone();
    let fut = args.map(|(name, json, base)| async move {
      let settings = core::tools::ToolSettings::api();
      core::tool::dispatch(&runner, &name, &json, base, &settings)
        .await
        .unwrap_or_else(|e| core::tool::ToolOutcome {
          result: core::tool::ToolResult {
            text: e.message(),
            is_error: true,
          },
          structured: None,
        })
    });
    call::promise(env, fut, |_, o| {
      Ok(ToolCallResult {
        text: o.result.text,
        is_error: o.result.is_error,
        structured: o.structured,
      })
    })
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
    let args = (|| -> ArgResult<_> {
      let command: String = read::required(command, &At::arg("command"))?;
      Ok((command, read_start_options(options, &self.defaults)?))
    })();
    let runner = self.runner.clone();
    let fut = args.map(|(command, opts)| async move { runner.start(&command, opts).await });
    call::promise(env, fut, |_, r| Ok(interactive_to_js(r)))
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
    let args = (|| -> ArgResult<_> {
      let id = read_id(session_id, "sessionId")?;
      let chars: String = read::required(chars, &At::arg("chars"))?;
      let o: WriteCommandOptions =
        read::optional(options, &At::arg("options"))?.unwrap_or_default();
      let yield_time = o
        .yield_ms
        .map_or(core::interactive::DEFAULT_WRITE_YIELD, |m| m.0);
      Ok((id, chars, yield_time, o.close_stdin.unwrap_or(false)))
    })();
    let runner = self.runner.clone();
    let fut = args.map(|(id, chars, yield_time, close)| async move {
      runner.write(id, chars.as_bytes(), yield_time, close).await
    });
    call::promise(env, fut, |_, r| Ok(interactive_to_js(r)))
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
    let runner = self.runner.clone();
    let fut =
      read_id(session_id, "sessionId").map(|id| async move { runner.kill_session(id).await });
    call::promise(env, fut, |_, r| Ok(interactive_to_js(r)))
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
    call::promise(
      env,
      Ok(async move { runner.close().await as u32 }),
      |_, n| Ok(n),
    )
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
    &CommandDefaults::default(),
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
  let text: String = call::sync_args(&env, read::required(text, &At::arg("text")))?;
  Ok(core::sanitize(&text))
}

/// Keep the last complete lines of `text` within `maxLines` and `maxBytes`
/// (whichever hits first); a single line longer than `maxBytes` keeps its
/// tail, cut on a character boundary.
#[napi(ts_args_type = "text: string, options?: TruncateOptions")]
pub fn truncate_tail(env: Env, text: Unknown, options: Option<Unknown>) -> Result<TruncateResult> {
  let parsed = (|| -> ArgResult<_> {
    let text: String = read::required(text, &At::arg("text"))?;
    let o: TruncateOptions = read::optional(options, &At::arg("options"))?.unwrap_or_default();
    let d = OutputLimits::default();
    let limits = OutputLimits {
      max_lines: o.max_lines.map_or(d.max_lines, |n| n.0),
      max_bytes: o.max_bytes.map_or(d.max_bytes, |n| n.0),
      mode: d.mode,
    };
    Ok((text, limits))
  })();
  let (text, limits) = call::sync_args(&env, parsed)?;
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

js_options! {
  /// Options of `serveMcp`: the process options of every command the server
  /// runs (`cwd`, `env`, `limits`, `sandbox`, ...); a call's `workdir`
  /// resolves from `cwd` and no call can widen the sandbox.
  pub struct McpOptions {
    ..process,
    /// `bash` calls share one shell state (`cd`, `export`, functions carry
    /// over; see `CommandRunnerOptions.stateful`). @default false
    pub stateful: Option<bool>,
    /// The shell of the `bash` and `exec_command` tools: `'bash'` (`bash
    /// -c`; on Windows Git for Windows' bash), `'powershell'` (`pwsh`, else
    /// Windows PowerShell, with `-NoProfile -NonInteractive -Command`;
    /// rejects at once with `ENOENT` when neither is on PATH) or `'cmd'`
    /// (Windows' `cmd.exe /d /s /c`; rejects with `ENOENT` elsewhere); not
    /// `stateful` unless `'bash'`. @default 'bash'
    #[napi(ts_type = "'bash' | 'powershell' | 'cmd'")]
    pub shell: Option<String>,
  }
}

/// Serve the MCP server (tools `bash`, `exec_command`, `write_stdin`,
/// `execute_code`) over stdin/stdout; resolves when stdin closes, after the
/// connection's processes were killed. Rejects at once (before serving) when
/// `cwd` is not a directory. `exec-native mcp` calls it.
#[napi(
  ts_args_type = "options?: McpOptions",
  ts_return_type = "Promise<void>"
)]
pub fn serve_mcp<'env>(
  env: &'env Env,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, ()>> {
  let config = (|| -> ArgResult<_> {
    let mut o: McpOptions = read::optional(options, &At::arg("options"))?.unwrap_or_default();
    let stateful = o.stateful.unwrap_or(false);
    let shell = match o.shell.as_deref() {
      None => core::Shell::Bash,
      Some(name) => core::Shell::parse(name).map_err(|_| {
        At::arg("options").key("shell").error(format_args!(
          "must be 'bash', 'powershell' or 'cmd', got '{name}'"
        ))
      })?,
    };
    let mut process = o.process();
    let cwd = match &process.cwd {
      Some(c) => c.clone(),
      None => exec_core::process::options::host_cwd()?,
    };
    process.cwd = Some(cwd.clone());
    let defaults = CommandDefaults::new(CallOptions {
      process,
      run: exec_core::RunFields {
        timeout: Some(Some(core::tools::MCP_DEFAULT_TIMEOUT)),
        ..Default::default()
      },
      ..Default::default()
    })?;
    let mut config = exec_core::mcp::McpConfig::new(cwd.clone());
    config.settings.sandbox = defaults
      .process
      .sandbox
      .as_ref()
      .map(|p| core::tools::sandbox_summary(p, &cwd));
    config.defaults = defaults;
    config.runner = RunnerConfig {
      owner: host::owner(),
      stateful,
      shell,
      ..Default::default()
    };
    config.settings.stateful = stateful;
    config.toolchain = host::toolchain().clone();
    Ok(config)
  })();
  let fut = config.map(exec_core::mcp::serve_stdio);
  call::fallible(env, fut, |_, ()| Ok(()))
}

js_options! {
  /// Options of `commandTools`.
  pub struct CommandToolsOptions {
    /// The harness's shape: `'openai-responses'` (`{ type: 'function', name,
    /// description, parameters, strict }`), `'openai-chat'` (`{ type:
    /// 'function', function: {...} }`), `'anthropic'` (`{ name, description,
    /// input_schema }`) or `'mcp'` (`{ name, title, description, inputSchema,
    /// outputSchema, annotations }`). @default 'mcp'
    pub format: Option<String>,
    /// OpenAI's strict mode: every property required (the optional ones
    /// nullable) and `additionalProperties: false`. @default false
    pub strict: Option<bool>,
  }
}

/// The model's tool set, ready for a harness: `bash` (with `workdir` and
/// `max_output_tokens` beyond the seed's `commandTool`), `exec_command` and
/// `write_stdin` (interactive commands). Dispatch a call with
/// `runner.callTool(name, args)`. Throws (`EINVAL`) for an unknown format.
#[napi(
  ts_args_type = "options?: CommandToolsOptions",
  ts_return_type = "Array<Record<string, any>>"
)]
pub fn command_tools(env: Env, options: Option<Unknown>) -> Result<Vec<serde_json::Value>> {
  let parsed = (|| -> ArgResult<_> {
    let o: CommandToolsOptions = read::optional(options, &At::arg("options"))?.unwrap_or_default();
    let format: core::tools::ToolFormat = o
      .format
      .as_deref()
      .unwrap_or("mcp")
      .parse()
      .map_err(|e: exec_core::error::ExecError| At::arg("options.format").error(e.what))?;
    Ok((format, o.strict.unwrap_or(false)))
  })();
  let (format, strict) = call::sync_args(&env, parsed)?;
  Ok(core::tools::definitions(
    &core::tools::ToolSettings::api(),
    format,
    strict,
  ))
}
