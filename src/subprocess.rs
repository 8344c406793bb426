//! `spawn`: a process handle returned synchronously, as Node's `spawn` and
//! `Bun.spawn` return theirs. The child is started on the calling thread
//! (posix_spawn: well under a millisecond; a real fork when limits or
//! `dieWithParent` ask for one), its output is pumped and its end awaited on
//! the runtime, and `exited` settles once every byte was delivered to the
//! callbacks. `spawnCall` and `executeStreaming` run on the same machinery
//! ([`start`] and [`settle`]).

#[cfg(unix)]
use exec_core::process::child::StdinPipe;
/// Windows: the run's stdin is tokio's pipe to the child.
#[cfg(windows)]
type StdinPipe = tokio::process::ChildStdin;
use exec_core::process::spec::{explain_spawn_failure, program_for_spawn};
use exec_core::process::supervise::{
  canceled_before_start, Execution, ProcessSpec, RunPolicy, StdinMode,
};
#[cfg(unix)]
use exec_core::process::ProcessTree;
use exec_core::{process::registry, CancellationToken, ErrorCode, ExecError};
use exec_core::{ProcessOptions, RunOptions};
use napi::bindgen_prelude::*;
use napi::JsError;
use napi_derive::napi;
#[cfg(unix)]
use nix::sys::signal::Signal;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::abort::{self, AbortBinding};
use crate::call;
use crate::error::{coded_error, reject_type_error, throw_type, type_error};
use crate::host;
use crate::options::{SpawnResult, StreamRun};
use crate::read::{self, ArgResult, At, Encoding, FromJs, Input, JsFn, JsSignal, Ms, Timeout};
use crate::stream::{Callback, CallbackSink};
use std::time::Duration;

/// How often a partial chunk may go to a callback, unless the options say.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);

js_options! {
  /// Options of `spawn`.
  pub struct SubprocessOptions<'env> {
    ..process,
    /// Milliseconds before the whole tree is killed (SIGTERM, then SIGKILL);
    /// 0 or Infinity: none, as with Node's `spawn`. @default 0
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// Milliseconds between SIGTERM and SIGKILL (timeout, `kill()`, abort). @default 500
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// `'ignore'`: stdin is `/dev/null` (a read gets EOF); `'pipe'`:
    /// `subprocess.stdin` writes to it. With `input`, that input is written and
    /// stdin closed. @default 'ignore'
    #[napi(ts_type = "'pipe' | 'ignore'")]
    pub stdin: Option<StdinOption>,
    /// Written to stdin, then EOF.
    #[napi(ts_type = "string | Buffer | Uint8Array")]
    pub input: Option<Input>,
    /// Receives stdout, in order, coalesced (see `callbackIntervalMs`).
    #[napi(ts_type = "(data: any) => void")]
    pub on_stdout: Option<JsFn<'env>>,
    /// Receives stderr, in order, coalesced.
    #[napi(ts_type = "(data: any) => void")]
    pub on_stderr: Option<JsFn<'env>>,
    /// Called once, asynchronously, when the process could not be started
    /// (`err.code`: `ENOENT`, `ENOTDIR`, `EACCES`, `ESPAWN`, `ELIMIT`...);
    /// `exited` then resolves with the same `errorCode`. Nothing is thrown.
    #[napi(ts_type = "(err: Error & { code: string }) => void")]
    pub on_error: Option<JsFn<'env>>,
    /// `'utf8'`: the callbacks receive strings decoded on UTF-8 boundaries;
    /// `'buffer'`: raw Buffers. @default 'utf8'
    #[napi(ts_type = "'utf8' | 'buffer'")]
    pub encoding: Option<Encoding>,
    /// Output is cut into chunks of at most 64 KiB (whole characters; a
    /// Buffer chunk is 64 KiB of bytes) and handed over in batches of at most
    /// 4 calls per turn of the event loop, the next batch once JavaScript
    /// returned from the previous one. A full chunk goes in the next batch; a
    /// partial one waits until this many milliseconds have passed since the
    /// last batch (the first goes at once), so a trickle of output gets at most
    /// one call per interval and a flood gets full chunks. @default 10
    #[napi(ts_type = "number")]
    pub callback_interval_ms: Option<Ms>,
    /// Kills the tree like `kill()`; the result has `canceled: true`.
    /// Already aborted: nothing is spawned, `pid` is undefined, `onError` gets
    /// an `ECANCELED` error and `exited` resolves with `errorCode: 'ECANCELED'`.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<JsSignal<'env>>,
  }
}

/// `stdin: 'pipe' | 'ignore'`.
#[derive(Clone, Copy)]
pub struct StdinOption {
  pub piped: bool,
}

impl<'env> FromJs<'env> for StdinOption {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::parsed(v, at, |s| match s {
      "ignore" => Ok(StdinOption { piped: false }),
      "pipe" => Ok(StdinOption { piped: true }),
      other => Err(format!("must be 'pipe' or 'ignore', got '{other}'")),
    })
  }
}

/// An output callback (strings or Buffers) of a function argument or option.
pub fn output_callback(f: Option<JsFn>, at: &At, raw: bool) -> ArgResult<Option<Callback>> {
  let Some(f) = f else { return Ok(None) };
  Ok(Some(if raw {
    Callback::Bytes(call::callback(f, at)?)
  } else {
    Callback::Text(call::callback(f, at)?)
  }))
}

/// Everything a streaming run needs, read from the arguments.
pub struct Streaming {
  /// Its cwd resolved (the host's when absent).
  pub process: ProcessOptions,
  pub run: RunOptions,
  /// The environment that owns the run (read on the JS thread).
  pub owner: u64,
  pub out: CallbackSink,
  pub err: CallbackSink,
  pub cancel: CancellationToken,
}

/// The callbacks and the signal of a streaming run, bound (`options` is
/// where its options were found, for errors).
pub fn streaming(
  env: &Env,
  r: StreamRun,
  options: &At,
) -> ArgResult<(Streaming, Option<AbortBinding>)> {
  let out = output_callback(r.on_stdout.0, &r.on_stdout.1, r.raw)?;
  let err = output_callback(r.on_stderr.0, &r.on_stderr.1, r.raw)?;
  let cancel = CancellationToken::new();
  let binding = abort::bind(env, r.signal, &options.key("signal"), &cancel)?;
  let st = Streaming {
    process: r.process,
    run: r.run,
    owner: host::owner(),
    out: CallbackSink::new(out, r.interval),
    err: CallbackSink::new(err, r.interval),
    cancel,
  };
  Ok((st, binding))
}

/// A run that never started (`canceled` when an aborted signal stopped it).
pub fn failed(e: ExecError) -> SpawnResult {
  SpawnResult {
    exit_code: -1,
    signal: Either::B(Null),
    timed_out: false,
    canceled: e.code == ErrorCode::ECANCELED,
    execution_time: 0.0,
    pid: 0,
    stdout_bytes: 0.0,
    stderr_bytes: 0.0,
    error: Some(e.message()),
    error_code: Some(e.code.as_str().to_owned()),
    sandbox: None,
  }
}

/// Wait for a started run and describe its end.
pub async fn settle(
  exec: Execution<CallbackSink, CallbackSink>,
  policy: RunPolicy,
  cancel: CancellationToken,
) -> SpawnResult {
  let f = exec.wait(&policy, &cancel).await;
  let mut o = f.outcome;
  // the output went to the callbacks: only the exit can be judged
  o.judge_sandbox(&[]);
  let (error, error_code) = (call::error_message(&o.error), call::error_code(&o.error));
  SpawnResult {
    exit_code: o.exit_code,
    signal: crate::options::nullable(o.signal),
    timed_out: o.timed_out,
    canceled: o.canceled,
    execution_time: o.duration.as_secs_f64() * 1000.0,
    pid: o.pid,
    stdout_bytes: o.stdout_bytes as f64,
    stderr_bytes: o.stderr_bytes as f64,
    error,
    error_code,
    sandbox: o.sandbox.map(Into::into),
  }
}

/// Start `spec` with the run's options now, on this thread (in the
/// runtime's context). Its pumps are polled by [`settle`], which the caller
/// starts at once (`Execution::spawn_waited`). `stdin_piped` without an
/// input: a pipe the caller writes to.
pub fn start(
  mut spec: ProcessSpec,
  (process, run, owner): (ProcessOptions, RunOptions, u64),
  stdin_piped: bool,
  out: CallbackSink,
  err: CallbackSink,
) -> std::result::Result<(Execution<CallbackSink, CallbackSink>, RunPolicy), ExecError> {
  spec.process = process;
  spec.run = run;
  if stdin_piped && spec.run.input.is_none() {
    spec.stdin = StdinMode::Piped;
  }
  let policy = RunPolicy {
    owner,
    ..RunPolicy::default()
  };
  let exec = within_runtime_if_available(|| Execution::spawn_waited(&spec, owner, out, err))?;
  Ok((exec, policy))
}

/// Where the handle's state is shared with the waiting future.
#[derive(Default)]
struct State {
  exit_code: Option<i32>,
  signal_code: Option<String>,
  /// The run has settled: its group may be gone and its pgid reused.
  done: bool,
}

/// A running (or finished) process started by `spawn`. Killing it kills its
/// whole tree: the process group and every descendant that carries its mark,
/// with the same escalation (SIGTERM, SIGKILL after `forceKillAfterDelay`)
/// and reaping as every other path.
#[napi(custom_finalize)]
pub struct Subprocess {
  pid: Option<u32>,
  mark: Option<String>,
  killed: bool,
  cancel: CancellationToken,
  state: Arc<Mutex<State>>,
  exited: Option<ObjectRef<false>>,
  stdin: Option<ObjectRef<false>>,
}

impl ObjectFinalize for Subprocess {
  fn finalize(self, env: Env) -> Result<()> {
    if let Some(r) = self.exited {
      r.unref(&env)?;
    }
    if let Some(r) = self.stdin {
      r.unref(&env)?;
    }
    Ok(())
  }
}

#[cfg(unix)]
fn signal_arg(v: Option<Either<String, i32>>) -> std::result::Result<Option<Signal>, ExecError> {
  let bad = |s: String| type_error(format!("unknown signal {s}"));
  match v {
    None => Ok(Some(Signal::SIGTERM)),
    Some(Either::B(0)) => Ok(None),
    Some(Either::B(n)) => Signal::try_from(n)
      .map(Some)
      .map_err(|_| bad(n.to_string())),
    Some(Either::A(s)) => registry::parse_signal(&s)
      .filter(|_| !s.chars().all(|c| c.is_ascii_digit()))
      .map(Some)
      .ok_or_else(|| bad(format!("'{s}'"))),
  }
}

/// Windows: what the signal does there (`registry::KillKind`); `None` is
/// the liveness check of signal 0.
#[cfg(windows)]
fn signal_arg(
  v: Option<Either<String, i32>>,
) -> std::result::Result<Option<registry::KillKind>, ExecError> {
  use registry::KillKind;
  let bad = |s: String| {
    type_error(format!(
      "unknown signal {s} (Windows: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGBREAK, SIGKILL or 0)"
    ))
  };
  let (kind, shown) = match v {
    None => (Some(KillKind::Graceful), String::new()),
    Some(Either::B(n)) => (registry::signal_number(n), n.to_string()),
    Some(Either::A(s)) => (
      registry::parse_signal(&s).filter(|_| !s.chars().all(|c| c.is_ascii_digit())),
      format!("'{s}'"),
    ),
  };
  match kind {
    Some(KillKind::Check) => Ok(None),
    Some(k) => Ok(Some(k)),
    None => Err(bad(shown)),
  }
}

#[napi]
impl Subprocess {
  /// The child's pid; `undefined` when it could not be started.
  #[napi(getter, ts_return_type = "number | undefined")]
  pub fn pid(&self) -> Either<u32, Undefined> {
    self.pid.map_or(Either::B(()), Either::A)
  }

  /// Whether `kill()` sent a signal (as Node's `subprocess.killed`).
  #[napi(getter)]
  pub fn killed(&self) -> bool {
    self.killed
  }

  /// The exit code once the run settled (128+N after signal N, 124 on
  /// timeout, -1 if it never ran); null while it runs.
  #[napi(getter)]
  pub fn exit_code(&self) -> Option<i32> {
    self
      .state
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .exit_code
  }

  /// The signal that ended the child (`'SIGTERM'`), once settled; else null.
  #[napi(getter, ts_return_type = "string | null")]
  pub fn signal_code(&self) -> Either<String, Null> {
    crate::options::nullable(
      self
        .state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .signal_code
        .clone(),
    )
  }

  /// Settles once the process exited, its tree was cleaned up and every byte
  /// of output was delivered to the callbacks. Never rejects.
  #[napi(getter, ts_return_type = "Promise<SpawnResult>")]
  pub fn exited<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
    self
      .exited
      .as_ref()
      .ok_or_else(|| Error::from_reason("exited is not available"))?
      .get_value(env)
  }

  /// The child's stdin with `stdin: 'pipe'`; otherwise null.
  #[napi(getter, ts_return_type = "SubprocessStdin | null")]
  pub fn stdin<'env>(&self, env: &'env Env) -> Result<Either<Object<'env>, Null>> {
    match &self.stdin {
      Some(r) => Ok(Either::A(r.get_value(env)?)),
      None => Ok(Either::B(Null)),
    }
  }

  /// Send `signal` (a name such as `'SIGINT'` or a number; 0 only checks
  /// that the process is alive) to the whole tree. `'SIGTERM'` (the default)
  /// and `'SIGKILL'` end it as a timeout would: SIGTERM, then SIGKILL after
  /// `forceKillAfterDelay`; the result then has `canceled: true`. A stopped
  /// child (SIGSTOP) gets SIGCONT right after the SIGTERM, so that it acts
  /// on it. Returns whether a signal was sent (false once the run has
  /// settled), like Node.
  #[napi(ts_args_type = "signal?: NodeJS.Signals | number")]
  pub fn kill(&mut self, env: Env, signal: Option<Either<String, i32>>) -> Result<bool> {
    let sig = match signal_arg(signal) {
      Ok(s) => s,
      Err(e) => return Err(throw_type(&env, &e)),
    };
    let (Some(pid), Some(mark)) = (self.pid, self.mark.as_deref()) else {
      return Ok(false);
    };
    if self.state.lock().unwrap_or_else(|e| e.into_inner()).done {
      return Ok(false);
    }
    let pgid = pid as i32;
    let Some(sig) = sig else {
      return Ok(registry::group_alive(pgid));
    };
    // Windows: SIGTERM and its kin are the graceful stop of a timeout
    // (CTRL_BREAK_EVENT, the job ended after forceKillAfterDelay), SIGKILL
    // ends the job at once
    #[cfg(windows)]
    {
      let _ = mark;
      // canceled first, so that the exit the kill causes is seen as ours
      self.cancel.cancel();
      if sig == registry::KillKind::Kill {
        registry::kill_now(pgid);
      }
    }
    // the run has not settled: its leader may have exited a moment ago, but
    // it is signalled as every kill path does (ProcessTree's one order)
    #[cfg(unix)]
    let tree = ProcessTree::new(pgid, mark);
    #[cfg(unix)]
    match sig {
      Signal::SIGTERM => self.cancel.cancel(),
      Signal::SIGKILL => {
        // no grace: every process of the tree now, then the usual sweep
        tree.kill(true);
        self.cancel.cancel();
      }
      other => {
        if !tree.signal(other, true) {
          return Ok(false);
        }
      }
    }
    self.killed = true;
    Ok(true)
  }
}

/// The stdin of a `Subprocess` started with `stdin: 'pipe'`. Writes are
/// delivered in call order (one writer task takes them from a queue filled on
/// the JS thread); each promise settles when the child has taken the bytes (a
/// full pipe waits for the child to read).
#[napi]
pub struct SubprocessStdin {
  ops: mpsc::UnboundedSender<StdinOp>,
}

enum StdinOp {
  Write(Vec<u8>, oneshot::Sender<std::result::Result<(), ExecError>>),
  End(oneshot::Sender<()>),
}

fn epipe() -> ExecError {
  ExecError::new(ErrorCode::EPIPE, "stdin is closed")
}

impl SubprocessStdin {
  /// Start the writer task of `pipe` (in the runtime's context). The pipe is
  /// closed when `exited` is cancelled (the run settled: the child is gone,
  /// nobody reads), so that a handle kept alive does not keep its fd; later
  /// writes reject with `EPIPE`.
  fn new(pipe: StdinPipe, exited: CancellationToken) -> Self {
    let (ops, mut rx) = mpsc::unbounded_channel::<StdinOp>();
    napi::bindgen_prelude::spawn(async move {
      let mut pipe = Some(pipe);
      // until the handle is gone (then the pipe is dropped: EOF)
      loop {
        let op = tokio::select! {
          biased;
          _ = exited.cancelled(), if pipe.is_some() => {
            pipe = None;
            continue;
          }
          op = rx.recv() => op,
        };
        let Some(op) = op else { break };
        match op {
          StdinOp::Write(bytes, done) => {
            let r = match pipe.as_mut() {
              None => Err(epipe()),
              Some(w) => w.write_all(&bytes).await.map_err(|_| epipe()),
            };
            if r.is_err() {
              pipe = None;
            }
            let _ = done.send(r);
          }
          StdinOp::End(done) => {
            if let Some(mut w) = pipe.take() {
              let _ = w.shutdown().await;
            }
            let _ = done.send(());
          }
        }
      }
    });
    SubprocessStdin { ops }
  }
}

#[napi]
impl SubprocessStdin {
  /// Write a string (as UTF-8) or bytes. Rejects with `EPIPE` once stdin was
  /// closed: by `end()`, by the child, or because the run settled (the
  /// host's end of the pipe is closed when the child exits, not when the
  /// handle is collected).
  #[napi(
    ts_args_type = "data: string | Buffer | Uint8Array",
    ts_return_type = "Promise<void>"
  )]
  pub fn write<'env>(&self, env: &'env Env, data: Unknown<'env>) -> Result<PromiseRaw<'env, ()>> {
    let bytes = match read::required::<Input>(data, &At::arg("data")) {
      Ok(b) => b.0,
      Err(e) => return reject_type_error(env, e),
    };
    let (done, rx) = oneshot::channel();
    // queued here, on the JS thread, so that the order is the call order
    let queued = self.ops.send(StdinOp::Write(bytes, done)).is_ok();
    let fut = async move {
      if !queued {
        return Ok(Err(epipe()));
      }
      Ok(rx.await.unwrap_or_else(|_| Err(epipe())))
    };
    env.spawn_future_with_callback(fut, |env, r: std::result::Result<(), ExecError>| {
      r.map_err(|e| coded_error(env, e))
    })
  }

  /// Close stdin (the child reads EOF) once the writes before it are done.
  #[napi(ts_return_type = "Promise<void>")]
  pub fn end<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
    let (done, rx) = oneshot::channel();
    let queued = self.ops.send(StdinOp::End(done)).is_ok();
    env.spawn_future(async move {
      if queued {
        let _ = rx.await;
      }
      Ok(())
    })
  }
}

/// The run of a started child to its end, recorded in `state` for the
/// handle's getters. `exited` fires once the child is gone: its stdin is
/// closed then, not when the handle is collected.
async fn settle_recorded(
  exec: Execution<CallbackSink, CallbackSink>,
  policy: RunPolicy,
  cancel: CancellationToken,
  state: Arc<Mutex<State>>,
  exited: CancellationToken,
) -> SpawnResult {
  let r = settle(exec, policy, cancel).await;
  exited.cancel();
  let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
  s.exit_code = Some(r.exit_code);
  s.signal_code = match &r.signal {
    Either::A(s) => Some(s.clone()),
    Either::B(_) => None,
  };
  s.done = true;
  r
}

/// A started child: its execution, its policy and its stdin when piped.
type Started = (
  Execution<CallbackSink, CallbackSink>,
  RunPolicy,
  Option<StdinPipe>,
);

/// The child of [`spawn`], started: its execution, its policy and its stdin
/// when piped. Nothing is spawned when `cancel` fired already.
fn start_child(
  command: &str,
  argv: Vec<String>,
  piped: bool,
  st: Streaming,
) -> std::result::Result<Started, ExecError> {
  // an already aborted signal: nothing is spawned (as Node's spawn)
  if st.cancel.is_cancelled() {
    return Err(canceled_before_start());
  }
  let path = st.process.env.path_var();
  let cwd = st.process.cwd().to_path_buf();
  let program = program_for_spawn(command, path.as_ref(), &cwd, st.process.sandbox.is_some())?;
  let mut spec = ProcessSpec::new(program);
  spec.args = argv.into_iter().map(Into::into).collect();
  let piped = piped && st.run.input.is_none();
  let run = (st.process, st.run, st.owner);
  let (mut exec, policy) = start(spec, run, piped, st.out, st.err)
    .map_err(|e| explain_spawn_failure(command, path.as_ref(), &cwd, e))?;
  let stdin = if piped { exec.take_stdin() } else { None };
  Ok((exec, policy, stdin))
}

/// What a `Subprocess` holds of JS: its `exited` promise, and its stdin
/// writer with `stdin: 'pipe'` (closed by `closer`'s token too).
fn held_objects<P: ToNapiValue>(
  env: &Env,
  promise: P,
  stdin: Option<StdinPipe>,
  closer: CancellationToken,
) -> Result<(ObjectRef<false>, Option<ObjectRef<false>>)> {
  // SAFETY: `env` is the live env of this call on the JS thread; `raw` is the promise value just
  // made in it, an object, which is what ObjectRef::from_napi_value takes.
  let exited = unsafe {
    let raw = ToNapiValue::to_napi_value(env.raw(), promise)?;
    ObjectRef::<false>::from_napi_value(env.raw(), raw)?
  };
  let stdin = match stdin {
    Some(w) => {
      let s = within_runtime_if_available(|| SubprocessStdin::new(w, closer)).into_instance(env)?;
      // SAFETY: `s` is the class instance just made in this env, an object, which is what
      // ObjectRef::from_napi_value takes.
      Some(unsafe { ObjectRef::<false>::from_napi_value(env.raw(), s.raw())? })
    }
    None => None,
  };
  Ok((exited, stdin))
}

/// Start `command` (looked up in PATH, no shell) with `args` and return its
/// handle at once. Output goes to `options.onStdout` / `options.onStderr`
/// (strings, or Buffers with `encoding: 'buffer'`), in order, every byte
/// delivered before `exited` settles. A process that cannot be started is
/// reported the Node way: `pid` is undefined, `options.onError` is called
/// with an `Error` whose `code` says why (`ENOENT`, `ENOTDIR`, `EACCES`...),
/// and `exited` resolves with that `errorCode`; nothing is thrown. Throws a
/// TypeError (code `EINVAL`) only for arguments of the wrong type.
#[napi(
  ts_args_type = "command: string, args?: string[] | null, options?: SubprocessOptions | null"
)]
pub fn spawn<'env>(
  env: &'env Env,
  command: Unknown<'env>,
  argv: Option<Unknown<'env>>,
  options: Option<Unknown<'env>>,
) -> Result<ClassInstance<'env, Subprocess>> {
  let parsed = (|| -> ArgResult<_> {
    let command: String = read::required(command, &At::arg("command"))?;
    let argv: Option<Vec<String>> = read::optional(argv, &At::arg("args"))?;
    let at = At::arg("options");
    let o: SubprocessOptions = read::optional(options, &at)?.unwrap_or_default();
    let on_error = o
      .on_error
      // SAFETY: a JsFn is made only from a value checked to be a Function (`JsFn::from_js`), the
      // type this cast names.
      .map(|f| unsafe { f.0.cast::<Function<Unknown, Unknown>>() }?.create_ref())
      .transpose()
      .map_err(|e| at.key("onError").error(e))?;
    let r = StreamRun::try_from(o)?;
    let piped = r.piped;
    let st = streaming(env, r, &at)?;
    Ok((command, argv.unwrap_or_default(), piped, on_error, st))
  })();
  let (command, argv, piped, on_error, (st, binding)) = call::sync_args(env, parsed)?;
  let cancel = st.cancel.clone();

  let started = start_child(&command, argv, piped, st);

  let state = Arc::new(Mutex::new(State::default()));
  let stdin_closer = CancellationToken::new();
  let (pid, mark, stdin, fut_result) = match started {
    Ok((exec, policy, stdin)) => {
      let pid = exec.pid();
      let mark = exec.mark().to_owned();
      let (c, exited) = (cancel.clone(), stdin_closer.clone());
      let fut = settle_recorded(exec, policy, c, state.clone(), exited);
      (Some(pid), Some(mark), stdin, Either::A(fut))
    }
    Err(e) => {
      let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
      s.exit_code = Some(-1);
      s.done = true;
      (None, None, None, Either::B(e))
    }
  };

  let promise = match fut_result {
    Either::A(fut) => call::promise(env, Ok(fut), move |env, r: SpawnResult| {
      if let Some(b) = binding {
        b.detach(env);
      }
      Ok(r)
    })?,
    Either::B(e) => {
      if let Some(b) = binding {
        b.detach(env);
      }
      // reported asynchronously, as Node emits 'error' after spawn returns
      let result = failed(e.clone());
      env.spawn_future_with_callback(async move { Ok(result) }, move |env, r: SpawnResult| {
        if let Some(f) = on_error {
          if let Ok(f) = f.borrow_back(env) {
            let value = JsError::from(Error::new(e.code.as_str(), e.message())).into_unknown(*env);
            let _ = f.call(value);
          }
        }
        Ok(r)
      })?
    }
  };

  let (exited, stdin) = held_objects(env, promise, stdin, stdin_closer)?;
  Subprocess {
    pid,
    mark,
    killed: false,
    cancel,
    state,
    exited: Some(exited),
    stdin,
  }
  .into_instance(env)
}
