//! `PythonSession` and `ShellSession`: persistent interpreters as JavaScript
//! classes. Conversion only; the work is in `exec_core::session`.
#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use exec_core::session::{self as core, ExecuteOptions, SessionStatus};
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{self, ArgResult};
use crate::error::{coded_error, reject_type_error};
use crate::host;
use crate::options::nullable;
use crate::stream::{Callback, CallbackSink};
use crate::subprocess::output_callback;

const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_GRACE_MS: u64 = 2_000;
const DEFAULT_STARTUP_MS: u64 = 30_000;
const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;
const CALLBACK_INTERVAL: Duration = Duration::from_millis(10);

/// Options of `PythonSession.start`.
#[napi(object, object_to_js = false)]
pub struct PythonSessionOptions {
  /// Working directory of the interpreter, checked before starting. @default process.cwd()
  pub cwd: Option<String>,
  /// Variables set over the host environment (`undefined` removes one).
  pub env: Option<std::collections::HashMap<String, String>>,
  /// Start from the host environment (`true`) or from `env` alone. @default true
  pub extend_env: Option<bool>,
  /// The interpreter: a name looked up in PATH, or a path. @default 'python3'
  pub python: Option<String>,
  /// Code run in the namespace after every start of an interpreter (the first,
  /// restarts after `died`/`timeout`, `reset()`). If it raises, `start` rejects (EINVAL).
  pub init_code: Option<String>,
  /// Milliseconds a cell has to stop after the SIGINT of its timeout before the
  /// interpreter is killed. @default 2000
  pub force_kill_after_delay: Option<f64>,
  /// Milliseconds allowed for starting the interpreter and running `initCode`. @default 30000
  pub startup_timeout: Option<f64>,
  /// Opt-in resource limits of the interpreter's whole process tree; a tree over
  /// a limit is stopped and the running `execute` resolves with `status:
  /// 'died'`, `errorCode: 'ELIMIT'` (CPU time counts across cells, per process).
  pub limits: Option<crate::options::ResourceLimits>,
  /// Only host variables matching one of these patterns reach the interpreter
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill the interpreter when the host dies by SIGKILL (Linux
  /// PR_SET_PDEATHSIG; only the interpreter itself). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox of the interpreter and every cell it runs (as
  /// `ExecuteOptions.sandbox`; restarts apply it again). @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
}

/// Options of `ShellSession.start`.
#[napi(object, object_to_js = false)]
pub struct ShellSessionOptions {
  /// Initial working directory of the shell. @default process.cwd()
  pub cwd: Option<String>,
  /// Variables set over the host environment (`undefined` removes one).
  pub env: Option<std::collections::HashMap<String, String>>,
  /// @default true
  pub extend_env: Option<bool>,
  /// bash: a name looked up in PATH, or a path. Other shells are rejected (EINVAL). @default 'bash'
  pub shell: Option<String>,
  /// Run in the shell after every start (the first, restarts). Its output is discarded.
  pub init_script: Option<String>,
  /// Milliseconds a command has to stop after the SIGINT of its timeout before
  /// its processes are killed. @default 2000
  pub force_kill_after_delay: Option<f64>,
  /// Milliseconds allowed for starting the shell and running `initScript`. @default 30000
  pub startup_timeout: Option<f64>,
  /// Opt-in resource limits of the shell's whole process tree; a tree over
  /// a limit is stopped and the running `execute` resolves with `status:
  /// 'died'`, `errorCode: 'ELIMIT'` (CPU time counts across commands, per process).
  pub limits: Option<crate::options::ResourceLimits>,
  /// Only host variables matching one of these patterns reach the shell
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill the shell when the host dies by SIGKILL (Linux
  /// PR_SET_PDEATHSIG; only the shell itself). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox of the interpreter and every cell it runs (as
  /// `ExecuteOptions.sandbox`; restarts apply it again). @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
}

/// Options of `execute` (both sessions).
#[napi(object, object_to_js = false)]
pub struct SessionExecuteOptions {
  /// Milliseconds before the execution is interrupted (then killed, see
  /// `forceKillAfterDelay`); 0 or Infinity: none. @default 30000
  pub timeout: Option<f64>,
  /// Bytes kept per stream (head + tail); more is cut from the middle. @default 1048576
  pub max_output_bytes: Option<f64>,
  /// Called with stdout text as it is printed (decoded on UTF-8 boundaries, coalesced).
  #[napi(ts_type = "(data: string) => void")]
  pub on_stdout: Option<Unknown<'static>>,
  /// Called with stderr text as it is printed.
  #[napi(ts_type = "(data: string) => void")]
  pub on_stderr: Option<Unknown<'static>>,
}

/// An exception raised by a Python cell.
#[napi(object, object_from_js = false)]
pub struct PythonException {
  /// The exception's class name, e.g. `'ZeroDivisionError'`, `'KeyboardInterrupt'`.
  #[napi(js_name = "type")]
  pub kind: String,
  /// `str(exception)`.
  pub message: String,
  /// The formatted traceback, starting at the cell: `File "<cell 3>", line 2, in <module>`.
  pub traceback: String,
}

/// The result of `PythonSession.execute`. It resolves for every outcome of the
/// cell; it rejects only when the session is closed (ECANCELED) or a lost
/// interpreter cannot be restarted (ENOENT, ESPAWN, ELIMIT, EINVAL for `initCode`).
#[napi(object, object_from_js = false)]
pub struct PythonExecuteResult {
  /// `ok`; `error` (the cell raised); `interrupted` (`interrupt()`, a
  /// KeyboardInterrupt; the namespace is kept); `timeout`; `died` (the
  /// interpreter ended: `os._exit`, a crash; the next cell starts a new one).
  #[napi(ts_type = "'ok' | 'error' | 'interrupted' | 'timeout' | 'died'")]
  pub status: String,
  /// Captured stdout: head + `[Output truncated] N bytes omitted` + tail when over the cap.
  pub stdout: String,
  /// Captured stderr (a traceback is printed there too, as the REPL does).
  pub stderr: String,
  /// Whether either stream was cut.
  pub truncated: bool,
  /// `repr()` of the cell's last expression, as Jupyter shows it; null for
  /// statements and for `None`.
  #[napi(ts_type = "string | null")]
  pub result_value: Either<String, Null>,
  /// The exception with `error` and `interrupted` (and a timeout the interrupt stopped).
  #[napi(ts_type = "PythonException | null")]
  pub exception: Either<PythonException, Null>,
  /// The cell's number in its interpreter (`<cell N>`); starts at 1 again after a restart.
  pub execution_count: u32,
  /// Milliseconds.
  pub execution_time: f64,
  /// With `died` or a killing `timeout`: the interpreter's exit code (128+N for signal N).
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  /// With `died`: the signal that ended the interpreter (`'SIGSEGV'`), or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// The interpreter is gone and its namespace with it (`died`, or a `timeout`
  /// the interrupt did not stop); also true, with `restarted`, on a cell that
  /// ran in a new interpreter because the last one died between cells.
  pub state_lost: bool,
  /// This cell ran in a new interpreter because the previous one was lost.
  pub restarted: bool,
  /// `exec: <what> (<CODE>)` for `timeout` (TIMEOUT), a close under the cell
  /// (ECANCELED), and `died` because a resource limit stopped the
  /// interpreter's tree (ELIMIT: `exec: memory limit of 256 MiB exceeded (ELIMIT)`).
  pub error: Option<String>,
  pub error_code: Option<String>,
}

/// The result of `ShellSession.execute`. Rejects only when the session is
/// closed (ECANCELED), the command holds a NUL byte (EINVAL), or a lost shell
/// cannot be restarted.
#[napi(object, object_from_js = false)]
pub struct ShellExecuteResult {
  /// `ok` (exit 0); `error` (non-zero exit); `interrupted` (`interrupt()`; the
  /// shell, its cwd and variables are kept); `timeout`; `died` (the shell
  /// ended, e.g. `exit`; the next command starts a new one).
  #[napi(ts_type = "'ok' | 'error' | 'interrupted' | 'timeout' | 'died'")]
  pub status: String,
  pub stdout: String,
  pub stderr: String,
  pub truncated: bool,
  /// The command's real `$?` (130 after an interrupt); 124 on timeout; with
  /// `died`, the shell's exit code (128+N for signal N).
  pub exit_code: i32,
  /// The session's working directory after the command.
  pub cwd: String,
  /// Milliseconds.
  pub execution_time: f64,
  /// With `died`: the signal that ended the shell, or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// The shell is gone, and its cwd, variables, aliases and functions with it;
  /// also true, with `restarted`, on a command that ran in a new shell because
  /// the last one died between commands.
  pub state_lost: bool,
  /// This command ran in a new shell because the previous one was lost.
  pub restarted: bool,
  /// `exec: <what> (<CODE>)` for `timeout` (TIMEOUT), a close (ECANCELED),
  /// `died` because a resource limit stopped the shell's tree (ELIMIT), and
  /// `error` when a command was killed by SIGXCPU/SIGXFSZ under the limits (ELIMIT).
  pub error: Option<String>,
  pub error_code: Option<String>,
}

struct Common {
  cwd: PathBuf,
  env: exec_core::EnvSpec,
  grace: Duration,
  startup: Duration,
  limits: exec_core::limits::Limits,
  die_with_parent: bool,
  sandbox: Option<exec_core::sandbox::SandboxPolicy>,
}

fn common(opts: Option<&Object>) -> ArgResult<Common> {
  let cwd = match args::opt_string_in(opts, "cwd")? {
    Some(c) => PathBuf::from(c),
    None => args::host_cwd()?,
  };
  let sandbox = args::sandbox(opts)?;
  let mut env = args::env_with_lists(opts)?;
  args::sandbox_env(opts, &sandbox, &mut env)?;
  Ok(Common {
    sandbox,
    cwd,
    env,
    limits: args::limits(opts)?,
    die_with_parent: args::opt_bool_in(opts, "dieWithParent")?.unwrap_or(false),
    grace: args::opt_ms(opts, "forceKillAfterDelay", DEFAULT_GRACE_MS)?,
    startup: args::opt_ms(opts, "startupTimeout", DEFAULT_STARTUP_MS)?,
  })
}

struct ExecArgs {
  code: String,
  opts: ExecuteOptions,
  out: CallbackSink,
  err: CallbackSink,
}

fn exec_args(code: &Unknown, options: Option<Unknown>, what: &str) -> ArgResult<ExecArgs> {
  let code = args::string(code, what)?;
  let opts = args::options(options, "options")?;
  let timeout = args::opt_timeout(opts.as_ref(), "timeout", DEFAULT_TIMEOUT_MS)?;
  let max_output = args::opt_usize(opts.as_ref(), "maxOutputBytes", DEFAULT_MAX_OUTPUT)?;
  let (on_out, on_err): (Option<Callback>, Option<Callback>) = match &opts {
    Some(o) => (
      output_callback(args::prop(o, "onStdout")?, "options.onStdout", false)?,
      output_callback(args::prop(o, "onStderr")?, "options.onStderr", false)?,
    ),
    None => (None, None),
  };
  Ok(ExecArgs {
    code,
    opts: ExecuteOptions {
      timeout,
      max_output,
    },
    out: CallbackSink::new(on_out, CALLBACK_INTERVAL),
    err: CallbackSink::new(on_err, CALLBACK_INTERVAL),
  })
}

fn status(s: SessionStatus) -> String {
  s.as_str().to_owned()
}

fn ms(d: Duration) -> f64 {
  d.as_secs_f64() * 1000.0
}

/// `start` of either class: the options are read on the JS thread (a
/// TypeError rejects), `make` adds what only one kind has, the session starts
/// off it and `wrap` makes the JS object.
fn start_session<'env, O, S, F, C>(
  env: &'env Env,
  options: Option<Unknown<'env>>,
  make: impl FnOnce(Option<&Object>, Common) -> ArgResult<O>,
  start: impl FnOnce(O) -> F,
  wrap: fn(Arc<S>) -> C,
) -> Result<PromiseRaw<'env, C>>
where
  S: Send + 'static,
  F: Future<Output = std::result::Result<S, ExecError>> + Send + 'static,
  C: ToNapiValue + 'static,
{
  let parsed = (|| -> ArgResult<_> {
    let opts = args::options(options, "options")?;
    let c = common(opts.as_ref())?;
    make(opts.as_ref(), c)
  })();
  let opts = match parsed {
    Ok(o) => o,
    Err(e) => return reject_type_error(env, e),
  };
  let run = start(opts);
  let fut = async move { Ok(run.await) };
  env.spawn_future_with_callback(fut, move |env, r| match r {
    Ok(s) => Ok(wrap(Arc::new(s))),
    Err(e) => Err(coded_error(env, e)),
  })
}

/// `execute` of either class: `run` joins the session's queue now (so calls
/// run in the order they were made), `convert` makes the JS result. The
/// execution's ticket is dropped on the JavaScript thread as the promise
/// settles: until then `interrupt()` targets this execution, never the next.
fn execute_in<'env, R, F, V>(
  env: &'env Env,
  code: &Unknown<'env>,
  options: Option<Unknown<'env>>,
  what: &str,
  run: impl FnOnce(ExecArgs) -> (core::Ticket, F),
  convert: fn(R) -> V,
) -> Result<PromiseRaw<'env, V>>
where
  R: Send + 'static,
  F: Future<Output = std::result::Result<R, ExecError>> + Send + 'static,
  V: ToNapiValue + 'static,
{
  let a = match exec_args(code, options, what) {
    Ok(a) => a,
    Err(e) => return reject_type_error(env, e),
  };
  let (ticket, run) = run(a);
  let fut = async move { Ok(run.await) };
  env.spawn_future_with_callback(fut, move |env, r| {
    drop(ticket);
    match r {
      Err(e) => Err(coded_error(env, e)),
      Ok(r) => Ok(convert(r)),
    }
  })
}

/// `reset` of either class.
fn settle<'env, F>(env: &'env Env, run: F) -> Result<PromiseRaw<'env, ()>>
where
  F: Future<Output = std::result::Result<(), ExecError>> + Send + 'static,
{
  let fut = async move { Ok(run.await) };
  env.spawn_future_with_callback(fut, |env, r| r.map_err(|e| coded_error(env, e)))
}

/// `close` of either class: resolves when `close` is done.
fn resolve_after<'env, F>(env: &'env Env, close: F) -> Result<PromiseRaw<'env, ()>>
where
  F: Future<Output = ()> + Send + 'static,
{
  let fut = async move {
    close.await;
    Ok(())
  };
  env.spawn_future_with_callback(fut, |_, _| Ok(()))
}

/// A persistent Python interpreter (a real `python3` process, never Python
/// inside Node). Variables, imports, functions and classes survive from one
/// `execute` to the next. Calls are queued and run in order.
#[napi]
pub struct PythonSession {
  inner: Arc<core::PythonSession>,
}

#[napi]
impl PythonSession {
  /// Start the interpreter (and run `initCode`). Rejects with `err.code`:
  /// ENOENT (interpreter or cwd missing), ENOTDIR, EACCES, ESPAWN (it did not
  /// start), ELIMIT (a `limits` entry stopped it or `initCode`:
  /// `exec: python3 could not start: memory limit of 1 MiB exceeded (ELIMIT)`),
  /// EINVAL (`initCode` raised; bad options as a TypeError), TIMEOUT (`initCode`
  /// still running at `startupTimeout`).
  #[napi(
    ts_args_type = "options?: PythonSessionOptions",
    ts_return_type = "Promise<PythonSession>"
  )]
  pub fn start<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, PythonSession>> {
    let make = |opts: Option<&Object>, c: Common| {
      Ok(core::PythonOptions {
        python: args::opt_string_in(opts, "python")?.unwrap_or_else(|| "python3".into()),
        cwd: c.cwd,
        env: c.env,
        init_code: args::opt_string_in(opts, "initCode")?,
        owner: host::owner(),
        kill_grace: c.grace,
        startup_timeout: c.startup,
        limits: c.limits,
        die_with_parent: c.die_with_parent,
        sandbox: c.sandbox.clone(),
      })
    };
    start_session(env, options, make, core::PythonSession::start, |inner| {
      PythonSession { inner }
    })
  }

  /// Run a cell. Streams output to `onStdout`/`onStderr` as it is printed;
  /// resolves with the captured result for every outcome of the cell.
  #[napi(
    ts_args_type = "code: string, options?: SessionExecuteOptions",
    ts_return_type = "Promise<PythonExecuteResult>"
  )]
  pub fn execute<'env>(
    &self,
    env: &'env Env,
    code: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, PythonExecuteResult>> {
    let inner = &self.inner;
    let run = |a: ExecArgs| inner.execute_ticketed(a.code, a.opts, a.out, a.err);
    execute_in(env, &code, options, "code", run, |r| PythonExecuteResult {
      status: status(r.status),
      stdout: r.stdout,
      stderr: r.stderr,
      truncated: r.truncated,
      result_value: nullable(r.result_value),
      exception: r.exception.map_or(Either::B(Null), |e| {
        Either::A(PythonException {
          kind: e.kind,
          message: e.message,
          traceback: e.traceback,
        })
      }),
      execution_count: r.execution_count,
      execution_time: ms(r.execution_time),
      exit_code: r.exit_code.map_or(Either::B(Null), Either::A),
      signal: nullable(r.signal),
      state_lost: r.state_lost,
      restarted: r.restarted,
      error_code: r.error.as_ref().map(|e| e.code.as_str().to_owned()),
      error: r.error.map(|e| e.message()),
    })
  }

  /// Interrupt the running cell (SIGINT: a KeyboardInterrupt in the cell; the
  /// namespace survives): the oldest cell whose promise has not settled, held
  /// until it starts if it is queued; never the cell after it. Returns false
  /// when there is none, or it has just finished.
  #[napi]
  pub fn interrupt(&self) -> bool {
    self.inner.interrupt()
  }

  /// Replace the interpreter by a fresh one (an empty namespace; `initCode`
  /// runs again). Waits for queued cells first.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn reset<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    settle(env, self.inner.reset())
  }

  /// End the interpreter and every process it started. A running cell
  /// resolves with `died`; queued and later calls reject with ECANCELED.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    resolve_after(env, async move { inner.close().await })
  }

  /// The interpreter's pid; 0 while none runs (from the moment it died, also
  /// between cells, until the next cell starts a new one; after `close`).
  #[napi(getter)]
  pub fn pid(&self) -> i32 {
    self.inner.pid()
  }

  /// Whether `close()` was called.
  #[napi(getter)]
  pub fn closed(&self) -> bool {
    self.inner.is_closed()
  }
}

/// A persistent bash: `cd`, `export`, aliases, functions and shell variables
/// survive from one `execute` to the next. Calls are queued and run in order.
#[napi]
pub struct ShellSession {
  inner: Arc<core::ShellSession>,
}

#[napi]
impl ShellSession {
  /// Start bash (and run `initScript`). Rejects with `err.code`: ENOENT,
  /// ENOTDIR, EACCES, ESPAWN, ELIMIT (a `limits` entry stopped it or
  /// `initScript`), EINVAL (not bash, or `initScript` ended the shell), TIMEOUT
  /// (`initScript` still running at `startupTimeout`).
  #[napi(
    ts_args_type = "options?: ShellSessionOptions",
    ts_return_type = "Promise<ShellSession>"
  )]
  pub fn start<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ShellSession>> {
    let make = |opts: Option<&Object>, c: Common| {
      Ok(core::ShellOptions {
        shell: args::opt_string_in(opts, "shell")?.unwrap_or_else(|| "bash".into()),
        cwd: c.cwd,
        env: c.env,
        init_script: args::opt_string_in(opts, "initScript")?,
        owner: host::owner(),
        kill_grace: c.grace,
        startup_timeout: c.startup,
        limits: c.limits,
        die_with_parent: c.die_with_parent,
        sandbox: c.sandbox.clone(),
      })
    };
    start_session(env, options, make, core::ShellSession::start, |inner| {
      ShellSession { inner }
    })
  }

  /// Run a command line in the session's shell, stdin at EOF. Streams output
  /// to `onStdout`/`onStderr`; resolves with the captured result, the real
  /// exit code and the cwd after it.
  #[napi(
    ts_args_type = "command: string, options?: SessionExecuteOptions",
    ts_return_type = "Promise<ShellExecuteResult>"
  )]
  pub fn execute<'env>(
    &self,
    env: &'env Env,
    command: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ShellExecuteResult>> {
    let inner = &self.inner;
    let run = |a: ExecArgs| inner.execute_ticketed(a.code, a.opts, a.out, a.err);
    execute_in(env, &command, options, "command", run, |r| {
      ShellExecuteResult {
        status: status(r.status),
        stdout: r.stdout,
        stderr: r.stderr,
        truncated: r.truncated,
        exit_code: r.exit_code,
        cwd: r.cwd,
        execution_time: ms(r.execution_time),
        signal: nullable(r.signal),
        state_lost: r.state_lost,
        restarted: r.restarted,
        error_code: r.error.as_ref().map(|e| e.code.as_str().to_owned()),
        error: r.error.map(|e| e.message()),
      }
    })
  }

  /// Stop the running command (SIGINT, as Ctrl+C at a prompt); the shell, its
  /// cwd and variables stay. Targets the oldest command whose promise has not
  /// settled (held until it starts if queued), never the one after it.
  /// Returns false when there is none, or it has just finished.
  #[napi]
  pub fn interrupt(&self) -> bool {
    self.inner.interrupt()
  }

  /// Replace the shell by a fresh one (initial cwd; `initScript` runs again).
  #[napi(ts_return_type = "Promise<void>")]
  pub fn reset<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    settle(env, self.inner.reset())
  }

  /// End the shell and every process of its group (background jobs included).
  #[napi(ts_return_type = "Promise<void>")]
  pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    resolve_after(env, async move { inner.close().await })
  }

  /// The shell's pid; 0 while none runs (from the moment it died until the
  /// next command starts a new one; after `close`).
  #[napi(getter)]
  pub fn pid(&self) -> i32 {
    self.inner.pid()
  }

  #[napi(getter)]
  pub fn closed(&self) -> bool {
    self.inner.is_closed()
  }
}
