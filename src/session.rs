//! `PythonSession`, `NodeSession` and `ShellSession`: persistent interpreters
//! as JavaScript classes. Conversion only; the work is in `exec_core::session`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use exec_core::session::{self as core, Bundle, CellLanguage, CellOptions, SessionStatus};
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::call;
use crate::host;
use crate::options::nullable;
use crate::read::{self, ArgResult, At, FromJs, JsFn, Ms, Size, Timeout};
use crate::stream::CallbackSink;
use crate::subprocess::output_callback;
use exec_core::{ProcessOptions, RunFields, RunOptions};

const CALLBACK_INTERVAL: Duration = crate::subprocess::DEFAULT_INTERVAL;

js_options! {
  /// Options of `PythonSession.start`. `dieWithParent` kills only the
  /// interpreter itself; `limits`, `sandbox` hold for every cell (CPU time
  /// counts across cells, per process) and again after a restart.
  pub struct PythonSessionOptions {
    ..process,
    /// The interpreter: a name looked up in PATH, or a path. @default 'python3' ('python' on Windows)
    pub python: Option<String>,
    /// Code run in the namespace after every start of an interpreter (the first,
    /// restarts after `died`/`timeout`, `reset()`). If it raises, `start` rejects (EINVAL).
    pub init_code: Option<String>,
    /// Milliseconds a cell has to stop after the interrupt of its timeout (SIGINT;
    /// on Windows a control message to the driver) before the interpreter is
    /// killed. @default 2000
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// Milliseconds allowed for starting the interpreter and running `initCode`. @default 30000
    #[napi(ts_type = "number")]
    pub startup_timeout: Option<Ms>,
    /// Cells `history()` keeps: past this the oldest are dropped, and
    /// `exportNotebook` says how many. @default 1000
    #[napi(ts_type = "number")]
    pub max_history: Option<Size>,
  }
}

js_options! {
  /// Options of `NodeSession.start`. `dieWithParent` kills only `node`
  /// itself; `limits`, `sandbox` hold for every cell and again after a restart.
  pub struct NodeSessionOptions {
    ..process,
    /// `node`: a name looked up in PATH, or a path. @default 'node'
    pub node_path: Option<String>,
    /// Node options put before the driver, e.g. `['--max-old-space-size=512']`.
    pub exec_argv: Option<Vec<String>>,
    /// JavaScript run after every start of `node` (the first, restarts,
    /// `reset()`). If it throws, `start` rejects (EINVAL).
    pub init_code: Option<String>,
    /// Milliseconds a cell has to stop after the SIGINT of `interrupt()` or of
    /// its timeout before `node` is killed (`stateLost`). @default 2000
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// Milliseconds allowed for starting `node` and running `initCode`. @default 30000
    #[napi(ts_type = "number")]
    pub startup_timeout: Option<Ms>,
    /// Cells `history()` keeps: past this the oldest are dropped, and
    /// `exportNotebook` says how many. @default 1000
    #[napi(ts_type = "number")]
    pub max_history: Option<Size>,
  }
}

#[cfg(unix)]
js_options! {
  /// Options of `ShellSession.start`. `dieWithParent` kills only the shell
  /// itself; `limits`, `sandbox` hold for every command (CPU time counts
  /// across commands, per process) and again after a restart.
  pub struct ShellSessionOptions {
    ..process,
    /// bash: a name looked up in PATH, or a path. Other shells are rejected (EINVAL). @default 'bash'
    pub shell: Option<String>,
    /// Run in the shell after every start (the first, restarts). Its output is discarded.
    pub init_script: Option<String>,
    /// Milliseconds a command has to stop after the SIGINT of its timeout before
    /// its processes are killed. @default 2000
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// Milliseconds allowed for starting the shell and running `initScript`. @default 30000
    #[napi(ts_type = "number")]
    pub startup_timeout: Option<Ms>,
  }
}

js_options! {
  /// Options of `execute` (both sessions).
  pub struct SessionExecuteOptions<'env> {
    /// Milliseconds before the execution is interrupted (then killed, see
    /// `forceKillAfterDelay`); 0 or Infinity: none. @default 30000
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// Bytes kept per stream (head + tail); more is cut from the middle. @default 1048576
    #[napi(ts_type = "number")]
    pub max_output_bytes: Option<Size>,
    /// Called with stdout text as it is printed (decoded on UTF-8 boundaries, coalesced).
    #[napi(ts_type = "(data: string) => void")]
    pub on_stdout: Option<JsFn<'env>>,
    /// Called with stderr text as it is printed.
    #[napi(ts_type = "(data: string) => void")]
    pub on_stderr: Option<JsFn<'env>>,
    /// Python and Node: called with each MIME bundle (`display()`, the last
    /// value's bundle comes in the result) as it is shown.
    #[napi(ts_type = "(bundle: Record<string, any>) => void")]
    pub on_display: Option<JsFn<'env>>,
    /// NodeSession: the cell's language; TypeScript has its types stripped
    /// (enums and namespaces transformed) first. @default 'javascript'
    #[napi(ts_type = "'javascript' | 'typescript'")]
    pub language: Option<Language>,
    /// Bytes a MIME bundle may take; larger entries are dropped and named in
    /// its `text/plain`. @default 8388608
    #[napi(ts_type = "number")]
    pub max_display_bytes: Option<Size>,
  }
}

/// `language: 'javascript' | 'typescript'`.
pub struct Language(pub CellLanguage);

impl<'env> FromJs<'env> for Language {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::parsed(v, at, CellLanguage::parse).map(Language)
  }
}

/// An error thrown by a JavaScript cell.
#[napi(object, object_from_js = false)]
pub struct NodeCellError {
  /// `error.name`, e.g. `'TypeError'`; `'SyntaxError'` for a cell that does
  /// not compile (TypeScript too); `'Interrupted'` for an interrupt.
  pub name: String,
  pub message: String,
  /// The stack with the cell's own positions (`at <cell 3>:2:5`), the
  /// driver's frames cut.
  pub stack: String,
}

/// The result of `NodeSession.execute`. It resolves for every outcome of the
/// cell; it rejects only when the session is closed (ECANCELED) or a lost
/// `node` cannot be restarted.
#[napi(object, object_from_js = false)]
pub struct NodeExecuteResult {
  /// `ok`; `error` (the cell threw, or did not compile); `interrupted`
  /// (`interrupt()`: synchronous code stopped or a pending `await` abandoned,
  /// state kept; or killed after `forceKillAfterDelay`, `stateLost`);
  /// `timeout`; `died` (`node` ended: `process.exit()`, an uncaught exception
  /// in a timer; the next cell starts a new one).
  #[napi(ts_type = "'ok' | 'error' | 'interrupted' | 'timeout' | 'died'")]
  pub status: String,
  /// The last expression, `util.inspect`ed; null for `undefined` and statements.
  #[napi(ts_type = "string | null")]
  pub value: Either<String, Null>,
  /// The last expression's MIME bundle (`Symbol.for('Jupyter.display')`, a
  /// PNG/JPEG Buffer), or null.
  #[napi(ts_type = "Record<string, any> | null")]
  pub value_data: Either<serde_json::Value, Null>,
  /// The bundles of `display()` calls, in order.
  #[napi(ts_type = "Array<Record<string, any>>")]
  pub displays: Vec<serde_json::Value>,
  pub stdout: String,
  /// Captured stderr (a thrown error's stack is printed there too).
  pub stderr: String,
  pub truncated: bool,
  /// What the cell threw (with `error`, `interrupted`, a timeout the
  /// interrupt stopped), as issue 27 and Deno name it. The same error is in
  /// `exception`.
  #[napi(ts_type = "NodeCellError | null")]
  pub error: Either<NodeCellError, Null>,
  /// What the cell threw, in the shape every session result and
  /// `history()` share: `{ type, message, traceback }` (`error.name`,
  /// `error.message`, `error.stack`). Code that handles both sessions reads
  /// this one.
  #[napi(ts_type = "SessionException | null")]
  pub exception: Either<SessionException, Null>,
  /// The cell's number in its `node` (`<cell N>`); 1 again after a restart.
  pub execution_count: u32,
  /// Milliseconds.
  pub execution_time: f64,
  /// With `died` or a kill: `node`'s exit code (128+N for signal N).
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// `node` is gone and the cells' state with it.
  pub state_lost: bool,
  /// This cell ran in a new `node` because the previous one was lost.
  pub restarted: bool,
  /// `exec: <what> (<CODE>)` for a timeout (TIMEOUT), a kill after an
  /// interrupt or a close (ECANCELED), a resource limit (ELIMIT): exec's own
  /// condition, named `errorMessage` in every session result. (`error` is
  /// the cell's own error here.)
  pub error_message: Option<String>,
  pub error_code: Option<String>,
}

/// What a cell raised or threw, the same shape for Python and Node (and in
/// `history()`).
#[napi(object, object_from_js = false)]
pub struct SessionException {
  /// The class: `'ZeroDivisionError'`, `'TypeError'`.
  #[napi(js_name = "type")]
  pub kind: String,
  pub message: String,
  /// The traceback / stack from the cell on (`<cell 3>`).
  pub traceback: String,
}

/// One cell of `history()`.
#[napi(object, object_from_js = false)]
pub struct HistoryEntry {
  pub code: String,
  /// `'python'`, `'javascript'` or `'typescript'`.
  pub language: String,
  #[napi(ts_type = "'ok' | 'error' | 'interrupted' | 'timeout' | 'died'")]
  pub status: String,
  pub execution_count: u32,
  pub stdout: String,
  pub stderr: String,
  #[napi(ts_type = "string | null")]
  pub value: Either<String, Null>,
  #[napi(ts_type = "Record<string, any> | null")]
  pub value_data: Either<serde_json::Value, Null>,
  #[napi(ts_type = "Array<Record<string, any>>")]
  pub displays: Vec<serde_json::Value>,
  /// The exception / error, as `{ type, message, traceback }`.
  #[napi(ts_type = "{ type: string, message: string, traceback: string } | null")]
  pub exception: Either<serde_json::Value, Null>,
  /// stdout, stderr and the `display()` bundles in the order they came
  /// (what `exportNotebook` writes as the cell's outputs).
  #[napi(
    ts_type = "Array<{ type: 'stream', name: 'stdout' | 'stderr', text: string } | { type: 'display', data: Record<string, any> }>"
  )]
  pub outputs: Vec<serde_json::Value>,
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
  /// The last expression's MIME bundle by IPython's protocol
  /// (`_repr_mimebundle_`, `_repr_html_`, `_repr_png_`, ...; a matplotlib
  /// figure as `image/png`, a pandas DataFrame as `text/html`), or null when
  /// it has only text.
  #[napi(ts_type = "Record<string, any> | null")]
  pub result_data: Either<serde_json::Value, Null>,
  /// The bundles of `display()` calls (and of matplotlib figures left open
  /// at the end of the cell), in order.
  #[napi(ts_type = "Array<Record<string, any>>")]
  pub displays: Vec<serde_json::Value>,
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
  /// The same as `error`, under the name every session result has
  /// (`NodeExecuteResult.error` is the cell's error).
  pub error_message: Option<String>,
  pub error_code: Option<String>,
}

/// The result of `ShellSession.execute`. Rejects only when the session is
/// closed (ECANCELED), the command holds a NUL byte (EINVAL), or a lost shell
/// cannot be restarted.
#[cfg(unix)]
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
  /// The same as `error`, under the name every session result has.
  pub error_message: Option<String>,
  pub error_code: Option<String>,
}

/// What every kind of session takes, checked, with the core's defaults.
struct Common {
  process: ProcessOptions,
  /// The defaults of each execution: `forceKillAfterDelay` over the
  /// core's (`RunOptions::session`: 30 s, 2 s, 1 MiB).
  run: RunOptions,
  startup: Duration,
}

impl Common {
  /// `grace` / `startup` absent: the core's defaults (`d`). The cwd absent:
  /// the host's, resolved when the session starts.
  fn new(
    process: ProcessOptions,
    grace: Option<Ms>,
    startup: Option<Ms>,
    d: (&RunOptions, Duration),
  ) -> Self {
    let given = RunFields {
      kill_grace: grace.map(|m| m.0),
      ..RunFields::default()
    };
    Common {
      process,
      run: given.over(d.0),
      startup: startup.map_or(d.1, |m| m.0),
    }
  }
}

struct ExecArgs {
  code: String,
  opts: CellOptions,
  out: CallbackSink,
  err: CallbackSink,
  display: DisplayCallback,
}

/// `onDisplay`, called on the JavaScript thread with each bundle.
struct DisplayCallback(Option<call::JsCallback<serde_json::Value, true>>);

impl core::DisplaySink for DisplayCallback {
  fn display(&mut self, bundle: &Bundle) {
    if let Some(f) = &self.0 {
      let _ = f.call(
        serde_json::Value::Object(bundle.clone()),
        napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
      );
    }
  }
}

fn exec_args(code: Unknown, options: Option<Unknown>, what: &str) -> ArgResult<ExecArgs> {
  let code: String = read::required(code, &At::arg(what))?;
  let at = At::arg("options");
  let o: SessionExecuteOptions = read::optional(options, &at)?.unwrap_or_default();
  let opts = cell_options(&o);
  let on_out = output_callback(o.on_stdout, &at.key("onStdout"), false)?;
  let on_err = output_callback(o.on_stderr, &at.key("onStderr"), false)?;
  let on_display = match o.on_display {
    Some(f) => Some(call::callback(f, &at.key("onDisplay"))?),
    None => None,
  };
  Ok(ExecArgs {
    code,
    opts,
    out: CallbackSink::new(on_out, CALLBACK_INTERVAL),
    err: CallbackSink::new(on_err, CALLBACK_INTERVAL),
    display: DisplayCallback(on_display),
  })
}

fn status(s: SessionStatus) -> String {
  s.as_str().to_owned()
}

fn ms(d: Duration) -> f64 {
  d.as_secs_f64() * 1000.0
}

/// `start` of either class: the options were read on the JS thread (a
/// TypeError rejects), the session starts off it and `wrap` makes the JS object.
fn start_session<'env, O, S, F, C>(
  env: &'env Env,
  options: ArgResult<O>,
  start: impl FnOnce(O) -> F,
  wrap: fn(Arc<S>) -> C,
) -> Result<PromiseRaw<'env, C>>
where
  S: Send + 'static,
  F: Future<Output = std::result::Result<S, ExecError>> + Send + 'static,
  C: ToNapiValue + 'static,
{
  call::fallible(env, options.map(start), move |_, s| Ok(wrap(Arc::new(s))))
}

/// `execute` of either class: `run` joins the session's queue now (so calls
/// run in the order they were made), `convert` makes the JS result. The
/// execution's ticket is dropped on the JavaScript thread as the promise
/// settles: until then `interrupt()` targets this execution, never the next.
fn execute_in<'env, R, F, V>(
  env: &'env Env,
  code: Unknown<'env>,
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
  let (ticket, fut) = match exec_args(code, options, what) {
    Ok(a) => {
      let (ticket, fut) = run(a);
      (Some(ticket), Ok(fut))
    }
    Err(e) => (None, Err(e)),
  };
  call::fallible(env, fut, move |_, r| {
    drop(ticket);
    Ok(convert(r))
  })
}

/// The lifecycle every session class has (`interrupt`, `reset`, `close`,
/// `pid`, `closed`), written once; each class gives its own docs.
macro_rules! session_lifecycle {
  (
    $(#[$cfg:meta])*
    $class:ident,
    interrupt: [$($interrupt:literal),*],
    reset: [$($reset:literal),*],
    close: [$($close:literal),*],
    pid: [$($pid:literal),*] $(,)?
  ) => {
    $(#[$cfg])*
    #[napi]
    impl $class {
      $(#[doc = $interrupt])*
      #[napi]
      pub fn interrupt(&self) -> bool {
        self.inner.interrupt()
      }

      $(#[doc = $reset])*
      #[napi(ts_return_type = "Promise<void>")]
      pub fn reset<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        call::fallible(env, Ok(self.inner.reset()), |_, ()| Ok(()))
      }

      $(#[doc = $close])*
      #[napi(ts_return_type = "Promise<void>")]
      pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        call::promise(env, Ok(async move { inner.close().await }), |_, ()| Ok(()))
      }

      $(#[doc = $pid])*
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
  };
}

/// What the interpreter sessions (Python, Node) have beside it: the history
/// and the notebook's export and import, written once.
macro_rules! notebook_methods {
  (
    $(#[$cfg:meta])*
    $class:ident,
    result: $result:ty,
    ts_results: $ts_results:literal,
    convert: $convert:path,
    export: [$($export:literal),*],
    import: [$($import:literal),*] $(,)?
  ) => {
    $(#[$cfg])*
    #[napi]
    impl $class {
      /// The cells run so far (not `initCode`), with their outputs, in order:
      /// the last `maxHistory` of them.
      #[napi]
      pub fn history(&self) -> Vec<HistoryEntry> {
        history_of(&self.inner)
      }

      /// How many of the oldest cells `history()` has dropped (`maxHistory`).
      #[napi(getter)]
      pub fn history_dropped(&self) -> f64 {
        self.inner.history_dropped() as f64
      }

      $(#[doc = $export])*
      #[napi(ts_return_type = "Promise<void>")]
      pub fn export_notebook<'env>(
        &self,
        env: &'env Env,
        path: String,
      ) -> Result<PromiseRaw<'env, ()>> {
        export_in(env, &self.inner, path)
      }

      $(#[doc = $import])*
      #[napi(
        ts_args_type = "path: string, options?: SessionExecuteOptions",
        ts_return_type = $ts_results
      )]
      pub fn import_notebook<'env>(
        &self,
        env: &'env Env,
        path: String,
        options: Option<Unknown<'env>>,
      ) -> Result<PromiseRaw<'env, Vec<$result>>> {
        import_in(env, &self.inner, path, options, $convert)
      }
    }
  };
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
    let make = || {
      let mut o: PythonSessionOptions =
        read::optional(options, &At::arg("options"))?.unwrap_or_default();
      let d = core::PythonOptions::default();
      let c = Common::new(
        o.process().try_into()?,
        o.force_kill_after_delay,
        o.startup_timeout,
        (&d.run, d.startup_timeout),
      );
      Ok(core::PythonOptions {
        python: o.python.unwrap_or(d.python),
        process: c.process,
        init_code: o.init_code,
        owner: host::owner(),
        run: c.run,
        startup_timeout: c.startup,
        max_history: o.max_history.map_or(d.max_history, |n| n.0),
      })
    };
    start_session(env, make(), core::PythonSession::start, |inner| {
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
    let run = |a: ExecArgs| inner.execute_ticketed(a.code, a.opts, a.out, a.err, a.display);
    execute_in(env, code, options, "code", run, python_result)
  }
}

session_lifecycle! {
  PythonSession,
  interrupt: [" Interrupt the running cell (SIGINT to the interpreter's process group; on", " Windows the control message `{\"op\":\"interrupt\"}`, on which the driver", " calls `_thread.interrupt_main()`: Python code stops, a blocking call", " such as `time.sleep` only when it returns, a subprocess is not reached).", " A KeyboardInterrupt in the cell; the namespace survives: the oldest cell whose promise has not settled, held", " until it starts if it is queued; never the cell after it. Returns false", " when there is none, or it has just finished."],
  reset: [" Replace the interpreter by a fresh one (an empty namespace; `initCode`", " runs again). Waits for queued cells first."],
  close: [" End the interpreter and every process it started. A running cell", " resolves with `died`; queued and later calls reject with ECANCELED."],
  pid: [" The interpreter's pid; 0 while none runs (from the moment it died, also", " between cells, until the next cell starts a new one; after `close`)."],
}

notebook_methods! {
  PythonSession,
  result: PythonExecuteResult,
  ts_results: "Promise<PythonExecuteResult[]>",
  convert: python_result,
  export: [" Write `history()` to `path` as an nbformat 4.5 notebook (`.ipynb`).", " Rejects with EIO when it cannot be written."],
  import: [" Run the code cells of the notebook at `path` in this session, in order;", " resolves with their results. Rejects with ENOENT / EINVAL for a missing", " or malformed notebook."],
}

fn bundle(b: Option<Bundle>) -> Either<serde_json::Value, Null> {
  b.map_or(Either::B(Null), |b| Either::A(serde_json::Value::Object(b)))
}

fn bundles(v: Vec<Bundle>) -> Vec<serde_json::Value> {
  v.into_iter().map(serde_json::Value::Object).collect()
}

/// A cell's outputs in order, as `history()` gives them.
fn outputs_of(r: &core::CellResult) -> Vec<serde_json::Value> {
  core::notebook::ordered(r)
    .into_iter()
    .filter_map(|p| match p {
      core::OutputPiece::Stdout(at) if !at.is_empty() => {
        Some(serde_json::json!({ "type": "stream", "name": "stdout", "text": &r.stdout[at] }))
      }
      core::OutputPiece::Stderr(at) if !at.is_empty() => {
        Some(serde_json::json!({ "type": "stream", "name": "stderr", "text": &r.stderr[at] }))
      }
      core::OutputPiece::Display(i) => r
        .displays
        .get(i)
        .map(|d| serde_json::json!({ "type": "display", "data": d })),
      _ => None,
    })
    .collect()
}

fn history_of(s: &core::DriverSession) -> Vec<HistoryEntry> {
  s.history()
    .into_iter()
    .map(|c| HistoryEntry {
      outputs: outputs_of(&c.result),
      code: c.code,
      language: c.language,
      status: status(c.result.status),
      execution_count: c.result.execution_count,
      stdout: c.result.stdout,
      stderr: c.result.stderr,
      value: nullable(c.result.result_value),
      value_data: bundle(c.result.result_data),
      displays: bundles(c.result.displays),
      exception: c
        .result
        .exception
        .and_then(|e| serde_json::to_value(e).ok())
        .map_or(Either::B(Null), Either::A),
    })
    .collect()
}

fn export_in<'env>(
  env: &'env Env,
  s: &Arc<core::DriverSession>,
  path: String,
) -> Result<PromiseRaw<'env, ()>> {
  let s = s.clone();
  let fut = async move { s.export_notebook(std::path::Path::new(&path)) };
  call::fallible(env, Ok(fut), |_, ()| Ok(()))
}

fn import_in<'env, V: ToNapiValue + Send + 'static>(
  env: &'env Env,
  s: &Arc<core::DriverSession>,
  path: String,
  options: Option<Unknown<'env>>,
  convert: fn(core::CellResult) -> V,
) -> Result<PromiseRaw<'env, Vec<V>>> {
  let s = s.clone();
  let args = exec_args_for_import(options);
  let fut = args.map(|opts| async move {
    let cells = core::notebook::code_cells(std::path::Path::new(&path))?;
    let mut results = Vec::new();
    for (code, language) in cells {
      let mut o = opts.clone();
      if let Some(l) = language
        .as_deref()
        .and_then(|l| CellLanguage::parse(l).ok())
      {
        o.language = o.language.or(Some(l));
      }
      let out = exec_core::process::supervise::Discard;
      let err = exec_core::process::supervise::Discard;
      results.push(s.execute(code, o, out, err).await?);
    }
    Ok(results)
  });
  call::fallible(env, fut, move |_, rs: Vec<core::CellResult>| {
    Ok(rs.into_iter().map(convert).collect())
  })
}

/// The options of `importNotebook` (the callbacks are not used).
fn exec_args_for_import(options: Option<Unknown>) -> ArgResult<CellOptions> {
  let o: SessionExecuteOptions = read::optional(options, &At::arg("options"))?.unwrap_or_default();
  Ok(cell_options(&o))
}

/// The one conversion of an execution's options (`execute`,
/// `importNotebook`): its timeout and `maxOutputBytes` over the session's
/// run options (the core puts them over), the language, the bundles' cap.
fn cell_options(o: &SessionExecuteOptions) -> CellOptions {
  let d = CellOptions::default();
  CellOptions {
    run: RunFields {
      timeout: o.timeout.as_ref().map(|t| t.0),
      max_output_bytes: o.max_output_bytes.as_ref().map(|s| s.0),
      ..RunFields::default()
    },
    language: o.language.as_ref().map(|l| l.0),
    max_display_bytes: o
      .max_display_bytes
      .as_ref()
      .map_or(d.max_display_bytes, |s| s.0),
  }
}

fn python_result(r: core::CellResult) -> PythonExecuteResult {
  PythonExecuteResult {
    status: status(r.status),
    stdout: r.stdout,
    stderr: r.stderr,
    truncated: r.truncated,
    result_value: nullable(r.result_value),
    result_data: bundle(r.result_data),
    displays: bundles(r.displays),
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
    error: call::error_message(&r.error),
    error_message: call::error_message(&r.error),
    error_code: call::error_code(&r.error),
  }
}

fn node_result(r: core::CellResult) -> NodeExecuteResult {
  NodeExecuteResult {
    status: status(r.status),
    value: nullable(r.result_value),
    value_data: bundle(r.result_data),
    displays: bundles(r.displays),
    stdout: r.stdout,
    stderr: r.stderr,
    truncated: r.truncated,
    error: r.exception.clone().map_or(Either::B(Null), |e| {
      Either::A(NodeCellError {
        name: e.kind,
        message: e.message,
        stack: e.traceback,
      })
    }),
    exception: r.exception.map_or(Either::B(Null), |e| {
      Either::A(SessionException {
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
    error_message: call::error_message(&r.error),
    error_code: call::error_code(&r.error),
  }
}

/// A persistent Node.js interpreter (a real `node` process). `let`, `const`,
/// `class` and `function` declarations survive from one `execute` to the
/// next and can be declared again; top-level `await`; `import` from the
/// session's cwd; TypeScript cells. Calls are queued and run in order.
#[napi]
pub struct NodeSession {
  inner: Arc<core::NodeSession>,
}

#[napi]
impl NodeSession {
  /// Start `node` (and run `initCode`). Rejects with `err.code`: ENOENT
  /// (`node` or cwd missing), ENOTDIR, EACCES, ESPAWN, ELIMIT, EINVAL
  /// (`initCode` threw; bad options as a TypeError), TIMEOUT.
  #[napi(
    ts_args_type = "options?: NodeSessionOptions",
    ts_return_type = "Promise<NodeSession>"
  )]
  pub fn start<'env>(
    env: &'env Env,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, NodeSession>> {
    let make = || {
      let mut o: NodeSessionOptions =
        read::optional(options, &At::arg("options"))?.unwrap_or_default();
      let d = core::NodeOptions::default();
      let c = Common::new(
        o.process().try_into()?,
        o.force_kill_after_delay,
        o.startup_timeout,
        (&d.run, d.startup_timeout),
      );
      Ok(core::NodeOptions {
        node: o.node_path.unwrap_or(d.node),
        exec_argv: o.exec_argv.unwrap_or_default(),
        process: c.process,
        init_code: o.init_code,
        owner: host::owner(),
        run: c.run,
        startup_timeout: c.startup,
        max_history: o.max_history.map_or(d.max_history, |n| n.0),
      })
    };
    start_session(env, make(), core::NodeSession::start, |inner| NodeSession {
      inner,
    })
  }

  /// Run a cell (`language: 'typescript'` strips its types first). Streams
  /// output to `onStdout`/`onStderr` and bundles to `onDisplay` as they come;
  /// resolves with the result for every outcome of the cell.
  #[napi(
    ts_args_type = "code: string, options?: SessionExecuteOptions",
    ts_return_type = "Promise<NodeExecuteResult>"
  )]
  pub fn execute<'env>(
    &self,
    env: &'env Env,
    code: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, NodeExecuteResult>> {
    let inner = &self.inner;
    let run = |a: ExecArgs| inner.execute_ticketed(a.code, a.opts, a.out, a.err, a.display);
    execute_in(env, code, options, "code", run, node_result)
  }
}

session_lifecycle! {
  NodeSession,
  interrupt: [" Interrupt the running cell (SIGINT): synchronous code stops with the", " state kept; a pending `await` is abandoned (`interrupted`, state kept);", " code that keeps running after an `await` cannot be stopped in-process", " and `node` is killed after `forceKillAfterDelay` (`interrupted`,", " `stateLost`). Targets the oldest cell whose promise has not settled.", " Windows: a control message, which abandons a pending `await` (state", " kept); synchronous code cannot read it, so `node` is killed after", " `forceKillAfterDelay` (`interrupted`, `stateLost`)."],
  reset: [" Replace `node` by a fresh one (`initCode` runs again)."],
  close: [" End `node` and every process it started."],
  pid: [" `node`'s pid; 0 while none runs."],
}

notebook_methods! {
  NodeSession,
  result: NodeExecuteResult,
  ts_results: "Promise<NodeExecuteResult[]>",
  convert: node_result,
  export: [" Write `history()` to `path` as an nbformat 4.5 notebook (`.ipynb`)."],
  import: [" Run the code cells of the notebook at `path` in this session, in order", " (each in the language it was recorded with, else `options.language`)."],
}

/// A persistent bash: `cd`, `export`, aliases, functions and shell variables
/// survive from one `execute` to the next. Calls are queued and run in order.
#[cfg(unix)]
#[napi]
pub struct ShellSession {
  inner: Arc<core::ShellSession>,
}

#[cfg(unix)]
#[napi]
impl ShellSession {
  /// Start bash (and run `initScript`). Not on Windows yet: there it rejects
  /// with `ENOENT` naming the fix when no Git for Windows' bash is found, else
  /// `ENOTSUP`. Rejects with `err.code`: ENOENT,
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
    let make = || {
      let mut o: ShellSessionOptions =
        read::optional(options, &At::arg("options"))?.unwrap_or_default();
      let d = core::ShellOptions::default();
      let c = Common::new(
        o.process().try_into()?,
        o.force_kill_after_delay,
        o.startup_timeout,
        (&d.run, d.startup_timeout),
      );
      Ok(core::ShellOptions {
        shell: o.shell.unwrap_or(d.shell),
        process: c.process,
        init_script: o.init_script,
        owner: host::owner(),
        run: c.run,
        startup_timeout: c.startup,
      })
    };
    start_session(env, make(), core::ShellSession::start, |inner| {
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
    execute_in(env, command, options, "command", run, |r| {
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
        error: call::error_message(&r.error),
        error_message: call::error_message(&r.error),
        error_code: call::error_code(&r.error),
      }
    })
  }
}

session_lifecycle! {
  #[cfg(unix)]
  ShellSession,
  interrupt: [" Stop the running command (SIGINT, as Ctrl+C at a prompt); the shell, its", " cwd and variables stay. Targets the oldest command whose promise has not", " settled (held until it starts if queued), never the one after it.", " Returns false when there is none, or it has just finished."],
  reset: [" Replace the shell by a fresh one (initial cwd; `initScript` runs again)."],
  close: [" End the shell and every process of its group (background jobs included)."],
  pid: [" The shell's pid; 0 while none runs (from the moment it died until the", " next command starts a new one; after `close`)."],
}
