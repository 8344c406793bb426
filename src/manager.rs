//! `ProcessManager`: long-lived processes (pipes or a PTY) driven step by step
//! from JavaScript. Converts types only; the work is in `exec_core::manager`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use exec_core::manager::{
  self as core, EventKind, ExitInfo, ManagerConfig, ProcessIo, StartSpec, TerminateMode,
};
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::ValueType;
use napi_derive::napi;
use tokio::sync::{mpsc, oneshot};

use crate::args::{self, ArgResult};
use crate::error::{coded_error, reject_type_error, throw_coded, throw_type, type_error};
use crate::host;
use crate::options::nullable;

/// Limits of a `ProcessManager`. They hold for every process it starts, so
/// memory stays predictable whatever the callers ask.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct ProcessManagerConfig {
  /// Bytes of output kept per process: per stream buffer (head + tail) and for
  /// the interleaved log that `read` serves. @default 1048576
  pub retained_output_bytes: Option<f64>,
  /// Processes that may run at once (at least 1); `start` fails with `EBUSY`
  /// past it. @default 64
  pub max_processes: Option<f64>,
  /// Milliseconds an exited process stays readable (`snapshot`, `read`,
  /// `wait`); afterwards its id is unknown (`ESRCH`). @default 30000
  pub exited_retention_ms: Option<f64>,
}

/// What to start.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct ProcessStartSpec {
  /// The handle to use in later calls (not the OS pid). Generated when absent;
  /// a duplicate is rejected with `EEXIST`.
  pub process_id: Option<String>,
  /// Program (looked up in PATH, no shell) and its arguments.
  pub argv: Vec<String>,
  /// Working directory, checked before spawning. @default process.cwd()
  pub cwd: Option<String>,
  /// Variables set over the host environment (`undefined` removes one).
  pub env: Option<HashMap<String, String>>,
  /// Start from the host environment (`true`) or from `env` alone. @default true
  pub extend_env: Option<bool>,
  /// `argv[0]` as the program sees it (pipes only). @default argv[0]
  pub arg0: Option<String>,
  /// Pipes (stdin closed unless `stdin: 'open'`) or a pseudo-terminal of
  /// `rows` x `cols` (`TERM` defaults to `xterm-256color`). @default { type: 'pipe', stdin: 'closed' }
  #[napi(
    ts_type = "{ type: 'pipe'; stdin?: 'open' | 'closed' } | { type: 'pty'; rows: number; cols: number }"
  )]
  pub io: Option<Unknown<'static>>,
  /// Opt-in resource limits of the process's whole tree; a tree over a limit
  /// is stopped and its `exited` event and `wait`/`terminate` result carry
  /// `errorCode: 'ELIMIT'`. Set in the child before exec (pipes and PTYs).
  pub limits: Option<crate::options::ResourceLimits>,
  /// Only host variables matching one of these patterns reach the process
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill the process when the host dies by SIGKILL (Linux
  /// PR_SET_PDEATHSIG, pipes only; a PTY process gets SIGHUP from the kernel
  /// when the host's side of the terminal closes). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox of the process tree (pipes and PTY), as
  /// `ExecuteOptions.sandbox`. @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
}

/// The answer of `start`.
#[napi(object, object_from_js = false)]
pub struct ProcessStarted {
  pub process_id: String,
  /// The OS pid (also the process group id).
  pub pid: u32,
}

/// An event of a process. `seq` grows by one per event of that process and is
/// shared by all its events: `started`, `output`..., `exited`, `closed`; or
/// `failed` alone when it could not be started.
#[napi(object, object_from_js = false)]
pub struct ProcessEvent {
  #[napi(
    js_name = "type",
    ts_type = "'started' | 'output' | 'exited' | 'closed' | 'failed'"
  )]
  pub kind: String,
  pub process_id: String,
  pub seq: f64,
  /// `started`: the OS pid.
  pub pid: Option<u32>,
  /// `output`: which stream.
  #[napi(ts_type = "'stdout' | 'stderr' | 'pty'")]
  pub stream: Option<String>,
  /// `output`: the bytes (a chunk may end inside a UTF-8 character).
  pub data: Option<Buffer>,
  /// `exited`: the exit code; 128+N when signal N ended it.
  pub exit_code: Option<i32>,
  /// `exited`: the signal that ended it (`'SIGKILL'`), or null.
  #[napi(ts_type = "string | null")]
  pub signal: Option<Either<String, Null>>,
  /// `failed`: `exec: <what> (<CODE>)`; `exited`: why a resource limit
  /// stopped it (`exec: memory limit of 256 MiB exceeded (ELIMIT)`).
  pub error: Option<String>,
  /// `failed`: ENOENT, EACCES, ENOTDIR, ESPAWN, EIO...; `exited`: ELIMIT.
  pub error_code: Option<String>,
  /// `exited`, a sandboxed process: how the sandbox was applied and what it
  /// likely denied (judged from the retained output).
  pub sandbox: Option<crate::options::SandboxResult>,
}

/// The state of a process after `wait` or `terminate`.
#[napi(object, object_from_js = false)]
pub struct ProcessExit {
  /// Still running (the wait timed out).
  pub running: bool,
  /// The exit code (128+N for signal N), or null while running.
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  /// The signal that ended it, or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// Why a resource limit stopped it: `exec: ... (ELIMIT)`.
  pub error: Option<String>,
  /// `'ELIMIT'` when a resource limit stopped it.
  pub error_code: Option<String>,
  /// A sandboxed process that exited: how the sandbox was applied and what
  /// it likely denied (judged from the retained output).
  pub sandbox: Option<crate::options::SandboxResult>,
}

/// Options of `terminate`.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct TerminateOptions {
  /// `'graceful'`: SIGTERM the process group, SIGKILL it after `timeoutMs`.
  /// `'force'`: SIGKILL at once. @default 'graceful'
  #[napi(ts_type = "'graceful' | 'force'")]
  pub mode: Option<String>,
  /// @default 2000
  pub timeout_ms: Option<f64>,
}

/// Options of `wait`.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct WaitOptions {
  /// Give up after this many ms and resolve with `running: true`; absent: wait
  /// for the exit.
  pub timeout_ms: Option<f64>,
}

/// Options of `read`.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct ReadOptions {
  /// Return chunks with a greater `seq` (pass the previous `lastSeq`). @default 0
  pub after_seq: Option<f64>,
  /// Stop adding chunks past this many bytes (the first chunk is always
  /// whole). @default 1048576
  pub max_bytes: Option<f64>,
  /// Long poll: wait up to this many ms for output (or the exit). @default 0
  pub wait_ms: Option<f64>,
}

/// One chunk of the interleaved output log.
#[napi(object, object_from_js = false)]
pub struct ProcessOutputChunk {
  pub seq: f64,
  #[napi(ts_type = "'stdout' | 'stderr' | 'pty'")]
  pub stream: String,
  pub data: Buffer,
}

/// The answer of `read`.
#[napi(object, object_from_js = false)]
pub struct ProcessReadResult {
  /// Output after `afterSeq`, in order, each chunk once.
  pub chunks: Vec<ProcessOutputChunk>,
  /// Pass as `afterSeq` next time.
  pub last_seq: f64,
  /// Output after `afterSeq` was dropped (over `retainedOutputBytes`) before
  /// this read: a late reader got the retained tail only.
  pub truncated: bool,
  pub running: bool,
  /// No more output will come.
  pub closed: bool,
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
}

/// Retained output and status.
#[napi(object, object_from_js = false)]
pub struct ProcessSnapshot {
  /// Pipes: head + `[Output truncated] N bytes omitted` + tail when over the cap.
  pub stdout: Buffer,
  pub stderr: Buffer,
  /// PTY: the terminal stream, same shape.
  pub terminal: Buffer,
  pub truncated: bool,
  /// Bytes not in the buffers above.
  pub omitted_bytes: f64,
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  pub running: bool,
  /// The `seq` the next event will get.
  pub next_seq: f64,
}

/// A row of `list`.
#[napi(object, object_from_js = false)]
pub struct ProcessListEntry {
  pub process_id: String,
  pub pid: u32,
  pub argv: Vec<String>,
  pub pty: bool,
  pub running: bool,
  #[napi(ts_type = "number | null")]
  pub exit_code: Either<i32, Null>,
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
}

/// Strong on purpose: like a child_process with listeners, a process whose
/// events someone listens to keeps Node alive until its `closed` (or
/// `failed`) event; then the function is released.
type EventCallback =
  ThreadsafeFunction<ProcessEvent, Unknown<'static>, ProcessEvent, Status, false, false, 0>;

/// Run `fut` and resolve with `map(value)`, or reject with an Error whose
/// `code` is the exec-native code.
fn settle<'env, T, V, F, M>(env: &'env Env, fut: F, map: M) -> Result<PromiseRaw<'env, V>>
where
  T: Send + 'static,
  V: ToNapiValue,
  F: std::future::Future<Output = std::result::Result<T, ExecError>> + Send + 'static,
  M: FnOnce(T) -> V + 'static,
{
  env.spawn_future_with_callback(async move { Ok(fut.await) }, move |env, r| match r {
    Ok(v) => Ok(map(v)),
    Err(e) => Err(coded_error(env, e)),
  })
}

fn exit_parts(exit: Option<ExitInfo>) -> (Either<i32, Null>, Either<String, Null>) {
  match exit {
    Some(x) => (Either::A(x.exit_code), nullable(x.signal)),
    None => (Either::B(Null), Either::B(Null)),
  }
}

fn exit_js(r: core::WaitResult) -> ProcessExit {
  let error = r.exit.as_ref().and_then(|x| x.error.clone());
  let sandbox = r
    .exit
    .as_ref()
    .and_then(|x| x.sandbox.clone())
    .map(Into::into);
  let (exit_code, signal) = exit_parts(r.exit);
  ProcessExit {
    running: r.running,
    exit_code,
    signal,
    error_code: error.as_ref().map(|e| e.code.as_str().to_owned()),
    error: error.map(|e| e.message()),
    sandbox,
  }
}

fn event_js(ev: core::ProcessEvent) -> ProcessEvent {
  let mut out = ProcessEvent {
    kind: ev.kind.name().to_owned(),
    process_id: ev.process_id.to_string(),
    seq: ev.seq as f64,
    pid: None,
    stream: None,
    data: None,
    exit_code: None,
    signal: None,
    error: None,
    error_code: None,
    sandbox: None,
  };
  match ev.kind {
    EventKind::Started { pid } => out.pid = Some(pid),
    EventKind::Output { stream, data } => {
      out.stream = Some(stream.as_str().to_owned());
      out.data = Some(data.into());
    }
    EventKind::Exited(x) => {
      out.exit_code = Some(x.exit_code);
      out.signal = Some(nullable(x.signal));
      out.sandbox = x.sandbox.map(Into::into);
      if let Some(e) = x.error {
        out.error_code = Some(e.code.as_str().to_owned());
        out.error = Some(e.message());
      }
    }
    EventKind::Closed => {}
    EventKind::Failed { error } => {
      out.error = Some(error.message());
      out.error_code = Some(error.code.as_str().to_owned());
    }
  }
  out
}

fn event_callback(v: Option<Unknown>) -> ArgResult<Option<EventCallback>> {
  let Some(v) = v else { return Ok(None) };
  if args::is_nullish(&v) {
    return Ok(None);
  }
  if v.get_type().ok() != Some(ValueType::Function) {
    return Err(type_error("onEvent must be a function"));
  }
  let f: Function<ProcessEvent, Unknown> =
    unsafe { v.cast() }.map_err(|e| type_error(e.to_string()))?;
  let tsfn = f
    .build_threadsafe_function()
    .weak::<false>()
    .callee_handled::<false>()
    .build()
    .map_err(|e| type_error(e.to_string()))?;
  // SAFETY of the lifetime: the function is referenced by the threadsafe function
  let tsfn: EventCallback = unsafe { std::mem::transmute(tsfn) };
  Ok(Some(tsfn))
}

/// Deliver events to JavaScript one at a time: the next call waits for the
/// previous one to return, so a slow callback slows the process (its pipe
/// fills) instead of queueing unbounded output.
fn forward_events(cb: EventCallback) -> mpsc::Sender<core::ProcessEvent> {
  let (tx, mut rx) = mpsc::channel::<core::ProcessEvent>(16);
  tokio::spawn(async move {
    while let Some(ev) = rx.recv().await {
      let last = matches!(ev.kind, EventKind::Closed | EventKind::Failed { .. });
      let (done_tx, done_rx) = oneshot::channel::<()>();
      let status = cb.call_with_return_value(
        event_js(ev),
        ThreadsafeFunctionCallMode::NonBlocking,
        move |_ret, _env| {
          // a callback that threw lands here: the process goes on
          let _ = done_tx.send(());
          Ok(())
        },
      );
      if status != Status::Ok {
        // the environment is closing: nobody is listening any more
        break;
      }
      let _ = done_rx.await;
      if last {
        break;
      }
    }
  });
  tx
}

fn u16_prop(obj: &Object, key: &str) -> ArgResult<u16> {
  let v =
    args::prop(obj, key)?.ok_or_else(|| type_error(format!("io.{key} is required for a pty")))?;
  let n = args::number(&v, &format!("io.{key}"))?;
  if !(1.0..=65535.0).contains(&n) || n.fract() != 0.0 {
    return Err(type_error(format!(
      "io.{key} must be an integer from 1 to 65535, got {n}"
    )));
  }
  Ok(n as u16)
}

fn parse_io(obj: &Object) -> ArgResult<ProcessIo> {
  let Some(io) = args::options(args::prop(obj, "io")?, "io")? else {
    return Ok(ProcessIo::Pipe { stdin_open: false });
  };
  let kind = match args::prop(&io, "type")? {
    Some(v) => args::string(&v, "io.type")?,
    None => "pipe".to_owned(),
  };
  match kind.as_str() {
    "pipe" => {
      let stdin = match args::prop(&io, "stdin")? {
        Some(v) => args::string(&v, "io.stdin")?,
        None => "closed".to_owned(),
      };
      match stdin.as_str() {
        "open" => Ok(ProcessIo::Pipe { stdin_open: true }),
        "closed" => Ok(ProcessIo::Pipe { stdin_open: false }),
        other => Err(type_error(format!(
          "io.stdin must be 'open' or 'closed', got '{other}'"
        ))),
      }
    }
    "pty" => Ok(ProcessIo::Pty {
      rows: u16_prop(&io, "rows")?,
      cols: u16_prop(&io, "cols")?,
    }),
    other => Err(type_error(format!(
      "io.type must be 'pipe' or 'pty', got '{other}'"
    ))),
  }
}

fn parse_spec(spec: Unknown) -> ArgResult<StartSpec> {
  // the shared readers name the object `options`; here it is `spec`
  read_spec(spec).map_err(|e| ExecError {
    what: e.what.replace("options.", "spec."),
    ..e
  })
}

fn read_spec(spec: Unknown) -> ArgResult<StartSpec> {
  let obj = args::options(Some(spec), "spec")?.ok_or_else(|| type_error("spec is required"))?;
  let argv_v = args::prop(&obj, "argv")?.ok_or_else(|| type_error("spec.argv is required"))?;
  let argv = args::string_array(&argv_v, "spec.argv")?;
  if argv.is_empty() {
    return Err(type_error("spec.argv must not be empty"));
  }
  let sandbox = args::sandbox(Some(&obj))?;
  let mut env = args::env_with_lists(Some(&obj))?;
  args::sandbox_env(Some(&obj), &sandbox, &mut env)?;
  Ok(StartSpec {
    sandbox,
    process_id: args::opt_string(&obj, "processId")?,
    argv,
    cwd: args::opt_string(&obj, "cwd")?.map(PathBuf::from),
    env,
    arg0: args::opt_string(&obj, "arg0")?,
    io: parse_io(&obj)?,
    limits: args::limits(Some(&obj))?,
    die_with_parent: args::opt_bool(&obj, "dieWithParent")?.unwrap_or(false),
  })
}

fn bytes(v: &Unknown, name: &str) -> ArgResult<Vec<u8>> {
  match v.get_type().unwrap_or(ValueType::Unknown) {
    ValueType::String => Ok(args::string(v, name)?.into_bytes()),
    ValueType::Object if v.is_buffer().unwrap_or(false) => {
      let b = unsafe { v.cast::<BufferSlice>() }.map_err(|e| type_error(e.to_string()))?;
      Ok(b.to_vec())
    }
    ValueType::Object if v.is_typedarray().unwrap_or(false) => {
      let b = unsafe { v.cast::<Uint8Array>() }.map_err(|e| type_error(e.to_string()))?;
      Ok(b.to_vec())
    }
    _ => Err(type_error(format!("{name} must be a string or a Buffer"))),
  }
}

fn process_id(v: &Unknown) -> ArgResult<String> {
  args::string(v, "processId")
}

/// Long-lived processes driven step by step: start (pipes or a PTY), write,
/// resize, read (long poll), wait, terminate. Output is retained within
/// `retainedOutputBytes` per process, so a caller can come back to a process
/// later. Errors carry `err.code`: `ESRCH` unknown processId, `EBUSY`
/// maxProcesses reached, `EEXIST` duplicate processId, `EPIPE` stdin closed,
/// `EINVAL` bad arguments, `ENOENT`/`EACCES`/`ENOTDIR` spawn problems.
///
/// A process started with `onEvent` keeps Node alive until its `closed`
/// event; without it, await `wait()` or `read()` to stay alive. `close()` (or
/// garbage collection of the manager, or the end of a worker) kills what it
/// started.
#[napi]
pub struct ProcessManager {
  inner: core::ProcessManager,
}

#[napi]
impl ProcessManager {
  #[napi(constructor, ts_args_type = "config?: ProcessManagerConfig | null")]
  pub fn new(env: Env, config: Option<Unknown>) -> Result<Self> {
    let parsed = (|| -> ArgResult<ManagerConfig> {
      let obj = args::options(config, "config")?;
      let mut c = ManagerConfig {
        owner: host::owner(),
        ..Default::default()
      };
      if let Some(n) = args::opt_number_in(obj.as_ref(), "retainedOutputBytes")? {
        c.retained_output_bytes = n as usize;
      }
      if let Some(n) = args::opt_number_in(obj.as_ref(), "maxProcesses")? {
        if n < 1.0 {
          return Err(crate::error::type_error(format!(
            "config.maxProcesses must be at least 1, got {n}"
          )));
        }
        c.max_processes = n as usize;
      }
      if let Some(n) = args::opt_number_in(obj.as_ref(), "exitedRetentionMs")? {
        c.exited_retention = Duration::from_micros((n * 1000.0) as u64);
      }
      Ok(c)
    })();
    // a wrong argument is a TypeError with code EINVAL, as everywhere else
    let config = parsed.map_err(|e| throw_type(&env, &e))?;
    Ok(ProcessManager {
      inner: core::ProcessManager::new(config),
    })
  }

  /// Start a process. Resolves once it is spawned; rejects (after a `failed`
  /// event) when it cannot be.
  #[napi(
    ts_args_type = "spec: ProcessStartSpec, onEvent?: ((event: ProcessEvent) => void) | null",
    ts_return_type = "Promise<ProcessStarted>"
  )]
  pub fn start<'env>(
    &self,
    env: &'env Env,
    spec: Unknown<'env>,
    on_event: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ProcessStarted>> {
    let parsed = (|| Ok((parse_spec(spec)?, event_callback(on_event)?)))();
    let (spec, cb) = match parsed {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let m = self.inner.clone();
    settle(
      env,
      async move {
        let events = cb.map(forward_events);
        m.start(spec, events)
      },
      |s| ProcessStarted {
        process_id: s.process_id,
        pid: s.pid,
      },
    )
  }

  /// Write to stdin (pipes with `stdin: 'open'`) or to the terminal (PTY;
  /// `'\x03'` is Ctrl-C). Rejects with `EPIPE` when stdin is closed.
  #[napi(
    ts_args_type = "processId: string, data: string | Buffer | Uint8Array",
    ts_return_type = "Promise<void>"
  )]
  pub fn write<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
    data: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, ()>> {
    let (id, data) = match (|| Ok((process_id(&id)?, bytes(&data, "data")?)))() {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let m = self.inner.clone();
    settle(env, async move { m.write(&id, &data).await }, |_| ())
  }

  /// Close the stdin pipe: the program reads EOF. (A PTY gets `EINVAL`:
  /// write `'\x04'` instead.)
  #[napi(ts_args_type = "processId: string", ts_return_type = "Promise<void>")]
  pub fn close_stdin<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, ()>> {
    let id = match process_id(&id) {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    let m = self.inner.clone();
    settle(env, async move { m.close_stdin(&id).await }, |_| ())
  }

  /// Resize the terminal of a PTY process (it gets SIGWINCH). A pipe process
  /// gets `EINVAL`.
  #[napi(ts_args_type = "processId: string, size: { rows: number; cols: number }")]
  pub fn resize(&self, env: Env, id: Unknown, size: Unknown) -> Result<()> {
    let (id, rows, cols) = (|| {
      let id = process_id(&id)?;
      let obj = args::options(Some(size), "size")?.ok_or_else(|| type_error("size is required"))?;
      Ok((id, u16_prop(&obj, "rows")?, u16_prop(&obj, "cols")?))
    })()
    .map_err(|e| throw_type(&env, &e))?;
    self
      .inner
      .resize(&id, rows, cols)
      .map_err(|e| throw_coded(&env, &e))
  }

  /// Terminate the whole process group and resolve with the exit.
  #[napi(
    ts_args_type = "processId: string, options?: TerminateOptions | null",
    ts_return_type = "Promise<ProcessExit>"
  )]
  pub fn terminate<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ProcessExit>> {
    let read = |obj: Option<&Object>| {
      let mode = match args::opt_string_in(obj, "mode")? {
        None => "graceful".to_owned(),
        Some(m) => m,
      };
      let timeout = args::opt_ms(obj, "timeoutMs", 2000)?;
      let mode = match mode.as_str() {
        "graceful" => TerminateMode::Graceful { timeout },
        "force" => TerminateMode::Force,
        other => {
          return Err(type_error(format!(
            "options.mode must be 'graceful' or 'force', got '{other}'"
          )))
        }
      };
      Ok(mode)
    };
    let op =
      |m: core::ProcessManager, id: String, mode| async move { m.terminate(&id, mode).await };
    self.id_call(env, &id, options, read, op, exit_js)
  }

  /// Wait for the exit; with `timeoutMs`, resolve with `running: true` when it
  /// runs out.
  #[napi(
    ts_args_type = "processId: string, options?: WaitOptions | null",
    ts_return_type = "Promise<ProcessExit>"
  )]
  pub fn wait<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ProcessExit>> {
    let read = |obj: Option<&Object>| {
      let t = args::opt_number_in(obj, "timeoutMs")?;
      Ok(t.map(|n| Duration::from_micros((n * 1000.0) as u64)))
    };
    let op = |m: core::ProcessManager, id: String, t| async move { m.wait(&id, t).await };
    self.id_call(env, &id, options, read, op, exit_js)
  }

  /// Output chunks after `afterSeq`, each exactly once and in order. With
  /// `waitMs`, a long poll: resolves as soon as there is output, the process
  /// exited, or `waitMs` passed.
  #[napi(
    ts_args_type = "processId: string, options?: ReadOptions | null",
    ts_return_type = "Promise<ProcessReadResult>"
  )]
  pub fn read<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
    options: Option<Unknown<'env>>,
  ) -> Result<PromiseRaw<'env, ProcessReadResult>> {
    let read = |obj: Option<&Object>| {
      let after = args::opt_number_in(obj, "afterSeq")?.unwrap_or(0.0) as u64;
      let max = args::opt_usize(obj, "maxBytes", 1024 * 1024)?;
      let wait = args::opt_ms(obj, "waitMs", 0)?;
      Ok((after, max, wait))
    };
    let op = |m: core::ProcessManager, id: String, (after, max, wait)| async move {
      m.read(&id, after, max, wait).await
    };
    self.id_call(env, &id, options, read, op, |r| {
      let (exit_code, signal) = exit_parts(r.exit.clone());
      ProcessReadResult {
        chunks: r
          .chunks
          .into_iter()
          .map(|c| ProcessOutputChunk {
            seq: c.seq as f64,
            stream: c.stream.as_str().to_owned(),
            data: c.data.into(),
          })
          .collect(),
        last_seq: r.last_seq as f64,
        truncated: r.truncated,
        running: r.exit.is_none(),
        closed: r.closed,
        exit_code,
        signal,
      }
    })
  }

  /// Retained output (head + marker + tail when over the cap) and status.
  #[napi(ts_args_type = "processId: string")]
  pub fn snapshot(&self, env: Env, id: Unknown) -> Result<ProcessSnapshot> {
    let id = process_id(&id).map_err(|e| throw_type(&env, &e))?;
    let s = self
      .inner
      .snapshot(&id)
      .map_err(|e| throw_coded(&env, &e))?;
    let (exit_code, signal) = exit_parts(s.exit);
    Ok(ProcessSnapshot {
      stdout: s.stdout.into(),
      stderr: s.stderr.into(),
      terminal: s.terminal.into(),
      truncated: s.truncated,
      omitted_bytes: s.omitted_bytes as f64,
      exit_code,
      signal,
      running: s.running,
      next_seq: s.next_seq as f64,
    })
  }

  /// Every process still known: running ones and exited ones within
  /// `exitedRetentionMs`.
  #[napi]
  pub fn list(&self) -> Vec<ProcessListEntry> {
    self
      .inner
      .list()
      .into_iter()
      .map(|i| {
        let (exit_code, signal) = exit_parts(i.exit);
        ProcessListEntry {
          process_id: i.process_id,
          pid: i.pid,
          argv: i.argv,
          pty: i.pty,
          running: i.running,
          exit_code,
          signal,
        }
      })
      .collect()
  }

  /// Refuse new processes, terminate every running one (SIGTERM, SIGKILL after
  /// 500 ms) and resolve when they are gone.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    let m = self.inner.clone();
    settle(
      env,
      async move {
        m.close().await;
        Ok::<(), ExecError>(())
      },
      |_| (),
    )
  }
}

impl ProcessManager {
  /// A `(processId, options?)` method: both are read on the JS thread (a
  /// TypeError rejects), then `op` runs on the manager and `map` makes the
  /// JS result.
  fn id_call<'env, A, T, V, F>(
    &self,
    env: &'env Env,
    id: &Unknown,
    options: Option<Unknown>,
    read: impl FnOnce(Option<&Object>) -> ArgResult<A>,
    op: impl FnOnce(core::ProcessManager, String, A) -> F,
    map: fn(T) -> V,
  ) -> Result<PromiseRaw<'env, V>>
  where
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: std::future::Future<Output = std::result::Result<T, ExecError>> + Send + 'static,
  {
    let parsed = (|| {
      let id = process_id(id)?;
      let obj = args::options(options, "options")?;
      Ok((id, read(obj.as_ref())?))
    })();
    let (id, a) = match parsed {
      Ok(p) => p,
      Err(e) => return reject_type_error(env, e),
    };
    settle(env, op(self.inner.clone(), id, a), map)
  }
}
