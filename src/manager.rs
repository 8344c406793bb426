//! `ProcessManager`: long-lived processes (pipes or a PTY) driven step by step
//! from JavaScript. Converts types only; the work is in `exec_core::manager`.

use std::time::Duration;

use exec_core::manager::{
  self as core, EventKind, ExitInfo, ManagerConfig, ProcessIo, StartSpec, TerminateMode,
};
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;
use tokio::sync::{mpsc, oneshot};

use exec_core::manager::{DEFAULT_READ_MAX_BYTES, DEFAULT_TERMINATE_TIMEOUT_MS};

use crate::call;
use crate::error::throw_coded;
use crate::host;
use crate::options::nullable;
use crate::read::{self, ArgResult, At, FromJs, Input, Ms, Required, Size};
use exec_core::ProcessOptions;

const DEFAULT_TERMINATE_TIMEOUT: Duration = Duration::from_millis(DEFAULT_TERMINATE_TIMEOUT_MS);

js_options! {
  /// Limits of a `ProcessManager`. They hold for every process it starts, so
  /// memory stays predictable whatever the callers ask.
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
}

/// A manager's settings (`ProcessManager`, `serve`) at `at`, over the core's
/// defaults, each checked by the core's `ManagerConfig::set`.
pub fn manager_config(
  at: &At,
  retained_output_bytes: Option<f64>,
  max_processes: Option<f64>,
  exited_retention_ms: Option<f64>,
) -> ArgResult<ManagerConfig> {
  let mut c = ManagerConfig {
    owner: host::owner(),
    ..Default::default()
  };
  let given = [retained_output_bytes, max_processes, exited_retention_ms];
  for (name, n) in ManagerConfig::NAMES.iter().zip(given) {
    if let Some(n) = n {
      c.set(name, n).map_err(|e| at.key(name).error(e))?;
    }
  }
  Ok(c)
}

js_options! {
  /// What to start. `dieWithParent` holds for pipes (a PTY process gets
  /// SIGHUP from the kernel when the host's side of the terminal closes);
  /// `limits` and `sandbox` for pipes and PTYs; a tree over a limit is
  /// stopped and its `exited` event and `wait`/`terminate` result carry
  /// `errorCode: 'ELIMIT'`.
  pub struct ProcessStartSpec {
    ..process,
    /// The handle to use in later calls (not the OS pid). Generated when absent;
    /// a duplicate is rejected with `EEXIST`.
    pub process_id: Option<String>,
    /// Program (looked up in PATH, no shell) and its arguments.
    #[napi(ts_type = "string[]")]
    pub argv: Required<Vec<String>>,
    /// `argv[0]` as the program sees it (pipes only). @default argv[0]
    pub arg0: Option<String>,
    /// Pipes (stdin closed unless `stdin: 'open'`) or a pseudo-terminal of
    /// `rows` x `cols` (`TERM` defaults to `xterm-256color`). @default { type: 'pipe', stdin: 'closed' }
    #[napi(
      ts_type = "{ type: 'pipe'; stdin?: 'open' | 'closed' } | { type: 'pty'; rows: number; cols: number }"
    )]
    pub io: Option<IoOption>,
  }
}

js_options! {
  /// The fields of `ProcessStartSpec.io` (which apply depends on `type`).
  pub struct IoFields {
    #[napi(ts_type = "'pipe' | 'pty'")]
    pub r#type: Option<String>,
    #[napi(ts_type = "'open' | 'closed'")]
    pub stdin: Option<String>,
    #[napi(ts_type = "number")]
    pub rows: Option<TermSide>,
    #[napi(ts_type = "number")]
    pub cols: Option<TermSide>,
  }
}

/// A terminal's rows or columns: an integer from 1 to 65535.
#[derive(Clone, Copy, Default)]
pub struct TermSide(u16);

impl<'env> FromJs<'env> for TermSide {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let n = f64::from_js(v, at)?;
    if !(1.0..=65535.0).contains(&n) || n.fract() != 0.0 {
      return Err(at.error(format_args!("must be an integer from 1 to 65535, got {n}")));
    }
    Ok(TermSide(n as u16))
  }
}

/// `io: { type: 'pipe', stdin } | { type: 'pty', rows, cols }`.
pub struct IoOption(ProcessIo);

impl<'env> FromJs<'env> for IoOption {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let io = IoFields::from_js(v, at)?;
    let need = |side: Option<TermSide>, key: &str| {
      side
        .map(|s| s.0)
        .ok_or_else(|| at.key(key).error("is required for a pty"))
    };
    match io.r#type.as_deref().unwrap_or("pipe") {
      "pipe" => match io.stdin.as_deref().unwrap_or("closed") {
        "open" => Ok(IoOption(ProcessIo::Pipe { stdin_open: true })),
        "closed" => Ok(IoOption(ProcessIo::Pipe { stdin_open: false })),
        other => Err(
          at.key("stdin")
            .error(format_args!("must be 'open' or 'closed', got '{other}'")),
        ),
      },
      "pty" => Ok(IoOption(ProcessIo::Pty {
        rows: need(io.rows, "rows")?,
        cols: need(io.cols, "cols")?,
      })),
      other => Err(
        at.key("type")
          .error(format_args!("must be 'pipe' or 'pty', got '{other}'")),
      ),
    }
  }
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

js_options! {
  /// Options of `terminate`.
  pub struct TerminateOptions {
    /// `'graceful'`: SIGTERM the process group, SIGKILL it after `timeoutMs`.
    /// `'force'`: SIGKILL at once. @default 'graceful'
    #[napi(ts_type = "'graceful' | 'force'")]
    pub mode: Option<String>,
    /// @default 2000
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Ms>,
  }
}

js_options! {
  /// Options of `wait`.
  pub struct WaitOptions {
    /// Give up after this many ms and resolve with `running: true`; absent: wait
    /// for the exit.
    #[napi(ts_type = "number")]
    pub timeout_ms: Option<Ms>,
  }
}

js_options! {
  /// Options of `read`.
  pub struct ReadOptions {
    /// Return chunks with a greater `seq` (pass the previous `lastSeq`). @default 0
    #[napi(ts_type = "number")]
    pub after_seq: Option<Size>,
    /// Stop adding chunks past this many bytes (the first chunk is always
    /// whole). @default 1048576
    #[napi(ts_type = "number")]
    pub max_bytes: Option<Size>,
    /// Long poll: wait up to this many ms for output (or the exit). @default 0
    #[napi(ts_type = "number")]
    pub wait_ms: Option<Ms>,
  }
}

js_options! {
  /// The size of `resize`.
  pub struct TerminalSize {
    /// 1 to 65535.
    #[napi(ts_type = "number")]
    pub rows: Required<TermSide>,
    /// 1 to 65535.
    #[napi(ts_type = "number")]
    pub cols: Required<TermSide>,
  }
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
type EventCallback = call::JsCallback<ProcessEvent, false>;

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
      let x = *x;
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

/// Deliver events to JavaScript one at a time: the next call waits for the
/// previous one to return, so a slow callback slows the process (its pipe
/// fills) instead of queueing unbounded output.
/// `gone`: the callback's environment was torn down (its calls queued then
/// never complete): the forwarding stops, the receiver is dropped, and the
/// process's pumps read on to EOF instead of waiting for a free slot.
fn forward_events(
  cb: EventCallback,
  gone: exec_core::CancellationToken,
) -> mpsc::Sender<core::ProcessEvent> {
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
      tokio::select! {
        _ = done_rx => {}
        _ = gone.cancelled() => break,
      }
      if last {
        break;
      }
    }
  });
  tx
}

/// `spec` of `start`, into the core's.
fn read_spec(spec: Unknown) -> ArgResult<StartSpec> {
  let at = At::arg("spec");
  let mut o: ProcessStartSpec = read::required(spec, &at)?;
  let argv = std::mem::take(&mut o.argv.0);
  if argv.is_empty() {
    return Err(at.key("argv").error("must not be empty"));
  }
  let process = ProcessOptions::try_from(o.process())?;
  Ok(StartSpec {
    process_id: o.process_id,
    argv,
    arg0: o.arg0,
    io: o
      .io
      .map_or(ProcessIo::Pipe { stdin_open: false }, |io| io.0),
    process,
    // no run options in `ProcessStartSpec`: a managed process's defaults
    run: exec_core::RunOptions::managed(),
  })
}

fn process_id(v: Unknown) -> ArgResult<String> {
  read::required(v, &At::arg("processId"))
}

/// Long-lived processes driven step by step: start (pipes or a PTY), write,
/// resize, read (long poll), wait, terminate. Output is retained within
/// `retainedOutputBytes` per process, so a caller can come back to a process
/// later. Errors carry `err.code`: `ESRCH` unknown processId, `EBUSY`
/// maxProcesses reached, `EEXIST` duplicate processId, `EPIPE` stdin closed,
/// `EINVAL` bad arguments, `ENOENT`/`EACCES`/`ENOTDIR` spawn problems.
///
/// On Windows: each process in a Job Object of its own;
/// `terminate` sends `CTRL_BREAK_EVENT` to its process group, then ends the
/// job after `timeoutMs` (`force`: at once), so its whole tree goes; `signal`
/// is null. `io: { type: 'pty' }` is a ConPTY console (Windows 10 1809 and
/// later; `ENOTSUP` before), on which `terminate`'s graceful step closes the
/// console (`CTRL_CLOSE_EVENT` to every process on it); `arg0` is `EINVAL`.
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
      let at = At::arg("config");
      let c: ProcessManagerConfig = read::optional(config, &at)?.unwrap_or_default();
      manager_config(
        &at,
        c.retained_output_bytes,
        c.max_processes,
        c.exited_retention_ms,
      )
    })();
    let config = call::sync_args(&env, parsed)?;
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
    let args = (|| -> ArgResult<_> {
      let spec = read_spec(spec)?;
      let at = At::arg("onEvent");
      let cb: Option<EventCallback> = read::optional(on_event, &at)?
        .map(|f| call::callback(f, &at))
        .transpose()?;
      Ok((spec, cb, crate::host::teardown()))
    })();
    let m = self.inner.clone();
    let fut = args
      .map(|(spec, cb, gone)| async move { m.start(spec, cb.map(|cb| forward_events(cb, gone))) });
    call::fallible(env, fut, |_, s| {
      Ok(ProcessStarted {
        process_id: s.process_id,
        pid: s.pid,
      })
    })
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
    let args = (|| -> ArgResult<_> {
      let data: Input = read::required(data, &At::arg("data"))?;
      Ok((process_id(id)?, data.0))
    })();
    let m = self.inner.clone();
    let fut = args.map(|(id, data)| async move { m.write(&id, &data).await });
    call::fallible(env, fut, |_, ()| Ok(()))
  }

  /// Close the stdin pipe: the program reads EOF. (A PTY gets `EINVAL`:
  /// write `'\x04'` instead.)
  #[napi(ts_args_type = "processId: string", ts_return_type = "Promise<void>")]
  pub fn close_stdin<'env>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
  ) -> Result<PromiseRaw<'env, ()>> {
    let m = self.inner.clone();
    let fut = process_id(id).map(|id| async move { m.close_stdin(&id).await });
    call::fallible(env, fut, |_, ()| Ok(()))
  }

  /// Resize the terminal of a PTY process (it gets SIGWINCH). A pipe process
  /// gets `EINVAL`.
  #[napi(ts_args_type = "processId: string, size: TerminalSize")]
  pub fn resize(&self, env: Env, id: Unknown, size: Unknown) -> Result<()> {
    let parsed = (|| -> ArgResult<_> {
      let id = process_id(id)?;
      let at = At::arg("size");
      let size: TerminalSize = read::required(size, &at)?;
      Ok((id, (size.rows.0).0, (size.cols.0).0))
    })();
    let (id, rows, cols) = call::sync_args(&env, parsed)?;
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
    let read = |o: TerminateOptions, at: &At| {
      let timeout = o.timeout_ms.map_or(DEFAULT_TERMINATE_TIMEOUT, |m| m.0);
      match o.mode.as_deref().unwrap_or("graceful") {
        "graceful" => Ok(TerminateMode::Graceful { timeout }),
        "force" => Ok(TerminateMode::Force),
        other => Err(
          at.key("mode")
            .error(format_args!("must be 'graceful' or 'force', got '{other}'")),
        ),
      }
    };
    let op =
      |m: core::ProcessManager, id: String, mode| async move { m.terminate(&id, mode).await };
    self.id_call(env, id, options, read, op, exit_js)
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
    let read = |o: WaitOptions, _: &At| Ok(o.timeout_ms.map(|m| m.0));
    let op = |m: core::ProcessManager, id: String, t| async move { m.wait(&id, t).await };
    self.id_call(env, id, options, read, op, exit_js)
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
    let read = |o: ReadOptions, _: &At| {
      let after = o.after_seq.map_or(0, |n| n.0 as u64);
      let max = o.max_bytes.map_or(DEFAULT_READ_MAX_BYTES, |n| n.0);
      let wait = o.wait_ms.map_or(Duration::ZERO, |m| m.0);
      Ok((after, max, wait))
    };
    let op = |m: core::ProcessManager, id: String, (after, max, wait)| async move {
      m.read(&id, after, max, wait).await
    };
    self.id_call(env, id, options, read, op, |r| {
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
    let id = call::sync_args(&env, process_id(id))?;
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
    call::promise(env, Ok(async move { m.close().await }), |_, ()| Ok(()))
  }
}

impl ProcessManager {
  /// A `(processId, options?)` method: both are read on the JS thread (a
  /// TypeError rejects), then `op` runs on the manager and `map` makes the
  /// JS result.
  fn id_call<'env, O, A, T, V, F>(
    &self,
    env: &'env Env,
    id: Unknown<'env>,
    options: Option<Unknown<'env>>,
    read: impl FnOnce(O, &At) -> ArgResult<A>,
    op: impl FnOnce(core::ProcessManager, String, A) -> F,
    map: fn(T) -> V,
  ) -> Result<PromiseRaw<'env, V>>
  where
    O: FromJs<'env> + Default,
    T: Send + 'static,
    V: ToNapiValue + 'static,
    F: std::future::Future<Output = std::result::Result<T, ExecError>> + Send + 'static,
  {
    let args = (|| -> ArgResult<_> {
      let id = process_id(id)?;
      let at = At::arg("options");
      let o: O = read::optional(options, &at)?.unwrap_or_default();
      Ok((id, read(o, &at)?))
    })();
    let m = self.inner.clone();
    call::fallible(env, args.map(|(id, a)| op(m, id, a)), move |_, t| {
      Ok(map(t))
    })
  }
}
