//! A persistent Python interpreter: cells run in one namespace, the last
//! expression's `repr` is the result, SIGINT interrupts a cell, a timeout
//! interrupts then kills, a dead interpreter is restarted on the next cell.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::Deserialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
  closed_error, exit_info, rendered_text, Capture, Control, Event, ExecuteOptions, SessionStatus,
  Turn, Worker, WorkerSpec,
};
use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::group;
use crate::run::{format_duration, OutputSink};
use crate::spawn::{check_cwd, resolve_program, EnvSpec};

/// The driver that runs inside the interpreter (also shipped as `python/driver.py`).
pub const DRIVER: &str = include_str!("../../../../python/driver.py");

/// How the session's interpreter is started.
#[derive(Debug, Clone)]
pub struct PythonOptions {
  /// The interpreter: a name looked up in PATH or a path. Default `python3`.
  pub python: String,
  pub cwd: PathBuf,
  pub env: EnvSpec,
  /// Run after every start of an interpreter (first start, restarts, reset).
  pub init_code: Option<String>,
  /// The host environment that owns the processes.
  pub owner: u64,
  /// After the SIGINT of a timeout, how long the cell may take to stop before
  /// the interpreter is killed.
  pub kill_grace: Duration,
  /// Bound on starting the interpreter and running `init_code`.
  pub startup_timeout: Duration,
  /// Opt-in resource limits of the interpreter's whole tree (memory and
  /// processes watched; CPU time counts across cells, per process).
  pub limits: crate::limits::Limits,
  /// PR_SET_PDEATHSIG for the interpreter.
  pub die_with_parent: bool,
}

impl Default for PythonOptions {
  fn default() -> Self {
    PythonOptions {
      python: "python3".into(),
      cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
      env: EnvSpec::inherit(),
      init_code: None,
      owner: 0,
      kill_grace: Duration::from_millis(2000),
      startup_timeout: Duration::from_secs(30),
      limits: crate::limits::Limits::default(),
      die_with_parent: false,
    }
  }
}

/// An exception raised by a cell.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PythonException {
  /// The class name, e.g. `ZeroDivisionError`.
  #[serde(rename = "type")]
  pub kind: String,
  /// `str(exception)`.
  pub message: String,
  /// The formatted traceback, starting at the cell (`File "<cell 3>", line 2`).
  pub traceback: String,
}

/// The result of one cell.
#[derive(Debug, Clone)]
pub struct CellResult {
  pub status: SessionStatus,
  pub stdout: String,
  pub stderr: String,
  /// Whether either stream was cut (head + tail kept).
  pub truncated: bool,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// `repr` of the cell's last expression (not for `None`, not for statements).
  pub result_value: Option<String>,
  pub exception: Option<PythonException>,
  /// The cell's number in its interpreter (1, 2, ...; `<cell N>` in tracebacks).
  pub execution_count: u32,
  pub execution_time: Duration,
  /// With `Died` (and a killing timeout): how the interpreter ended.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// The interpreter is gone and its namespace with it.
  pub state_lost: bool,
  /// This cell ran in a new interpreter because the previous one was lost.
  pub restarted: bool,
  /// TIMEOUT, or ECANCELED when the session was closed under the cell.
  pub error: Option<ExecError>,
}

#[derive(Deserialize)]
struct Message {
  ev: String,
  #[serde(default)]
  id: Option<u64>,
  #[serde(default)]
  count: Option<u32>,
  #[serde(default)]
  status: Option<String>,
  #[serde(default)]
  value: Option<String>,
  #[serde(default)]
  exception: Option<PythonException>,
}

enum Outcome {
  Done(Message),
  Died(Option<std::process::ExitStatus>),
  Killed(Option<std::process::ExitStatus>),
  Canceled,
}

struct Slot {
  worker: Option<Worker>,
  next_id: u64,
  /// The last interpreter was lost (died, killed): the next start is a restart.
  lost: bool,
}

/// A long-lived Python interpreter. Executions are queued (FIFO) and run one
/// at a time; `interrupt` does not wait for the queue.
pub struct PythonSession {
  opts: PythonOptions,
  program: PathBuf,
  slot: tokio::sync::Mutex<Slot>,
  control: Control,
  closing: CancellationToken,
  pid: AtomicI32,
}

impl PythonSession {
  /// Start the interpreter and run `init_code`. Must be called within a tokio
  /// runtime.
  pub async fn start(opts: PythonOptions) -> Result<PythonSession, ExecError> {
    check_cwd(&opts.cwd)?;
    opts.env.validate()?;
    let program = resolve_program(&opts.python, opts.env.path_var().as_ref(), &opts.cwd)?;
    let session = PythonSession {
      opts,
      program,
      slot: tokio::sync::Mutex::new(Slot {
        worker: None,
        next_id: 1,
        lost: false,
      }),
      control: Control::default(),
      closing: CancellationToken::new(),
      pid: AtomicI32::new(0),
    };
    {
      let mut slot = session.slot.lock().await;
      session.boot(&mut slot).await?;
    }
    Ok(session)
  }

  /// The interpreter's pid (0 when none runs: before a restart, after close).
  pub fn pid(&self) -> i32 {
    self.pid.load(Ordering::Relaxed)
  }

  fn shown(&self) -> &str {
    &self.opts.python
  }

  async fn boot(&self, slot: &mut Slot) -> Result<(), ExecError> {
    let spec = WorkerSpec {
      program: self.program.clone(),
      args: vec!["-u".into(), "-c".into(), DRIVER.into()],
      cwd: self.opts.cwd.clone(),
      env: self.opts.env.clone(),
      separator: b'\n',
      limits: self.opts.limits.clone(),
      die_with_parent: self.opts.die_with_parent,
    };
    let mut w = Worker::spawn(&spec, self.opts.owner)?;
    let deadline = Instant::now() + self.opts.startup_timeout;
    let mut out = HeadTailBuffer::new(4096);
    let mut err = HeadTailBuffer::new(4096);
    loop {
      match w
        .next_event(&mut out, &mut err, Some(deadline), &self.closing)
        .await
      {
        Event::Message(m) => {
          if serde_json::from_slice::<Message>(&m).is_ok_and(|m| m.ev == "ready") {
            break;
          }
        }
        Event::Exited(st) => return Err(w.startup_error(self.shown(), st, &err)),
        Event::Deadline => {
          w.kill().await;
          return Err(ExecError::new(
            ErrorCode::ESPAWN,
            format!(
              "{} did not start within {}",
              self.shown(),
              format_duration(self.opts.startup_timeout)
            ),
          ));
        }
        Event::Canceled => {
          w.kill().await;
          return Err(closed_error());
        }
      }
    }
    if let Some(e) = w.over_limit_at_start(self.shown()).await {
      return Err(e);
    }
    if let Some(init) = self.opts.init_code.clone() {
      let id = slot.next_id;
      slot.next_id += 1;
      let mut out = Capture::new(4096, crate::run::Discard);
      let mut err = Capture::new(4096, crate::run::Discard);
      let timeout = Some(self.opts.startup_timeout);
      match self
        .run_request(&mut w, id, &init, true, &mut out, &mut err, timeout)
        .await
      {
        (Outcome::Done(m), _, _) if m.status.as_deref() == Some("ok") => {}
        (Outcome::Done(m), _, _) => {
          w.kill().await;
          let what = m
            .exception
            .map(|e| format!("{}: {}", e.kind, e.message))
            .unwrap_or_default();
          return Err(ExecError::invalid(format!("initCode failed: {what}")));
        }
        (Outcome::Canceled, _, _) => return Err(closed_error()),
        _ => {
          let st = w.kill().await;
          if let Some(e) = w.limit_error(st) {
            return Err(ExecError::new(
              ErrorCode::ELIMIT,
              format!("initCode did not complete: {}", e.what),
            ));
          }
          let (text, _) = rendered_text(&err.buf);
          return Err(ExecError::invalid(format!(
            "initCode did not complete (the interpreter died or timed out): {}",
            text.trim()
          )));
        }
      }
    }
    self.pid.store(w.pid, Ordering::Relaxed);
    slot.worker = Some(w);
    Ok(())
  }

  /// Send one request and follow it to its end. Returns the outcome, whether
  /// a timeout fired, and the cell's number (from the driver's start message).
  #[allow(clippy::too_many_arguments)]
  async fn run_request<O: OutputSink, E: OutputSink>(
    &self,
    w: &mut Worker,
    id: u64,
    code: &str,
    init: bool,
    out: &mut O,
    err: &mut E,
    timeout: Option<Duration>,
  ) -> (Outcome, bool, u32) {
    let request = serde_json::json!({ "op": "run", "id": id, "code": code, "init": init });
    let mut line = request.to_string().into_bytes();
    line.push(b'\n');
    self.control.begin(w.pid);
    let mut deadline = timeout.map(|t| Instant::now() + t);
    let mut timed_out = false;
    let mut count = 0;
    if w.send(&line).await.is_err() {
      // the interpreter is gone: report how it ended
      deadline = Some(Instant::now() + Duration::from_secs(2));
    }
    let outcome = loop {
      match w.next_event(out, err, deadline, &self.closing).await {
        Event::Message(m) => {
          let Ok(m) = serde_json::from_slice::<Message>(&m) else {
            continue;
          };
          if m.id != Some(id) {
            continue;
          }
          match m.ev.as_str() {
            "start" => {
              count = m.count.unwrap_or(0);
              self.control.started();
            }
            "done" => break Outcome::Done(m),
            _ => {}
          }
        }
        Event::Exited(st) => break Outcome::Died(Some(st)),
        Event::Deadline if !timed_out => {
          // interrupt first; the cell has `kill_grace` to stop
          timed_out = true;
          w.signal(Signal::SIGINT);
          deadline = Some(Instant::now() + self.opts.kill_grace);
        }
        Event::Deadline => break Outcome::Killed(w.kill().await),
        Event::Canceled => {
          w.kill().await;
          break Outcome::Canceled;
        }
      }
    };
    self.control.end();
    (outcome, timed_out, count)
  }

  /// Run a cell. Output goes to `out`/`err` as it comes (and is captured).
  /// Errors only for a session that is closed or cannot be restarted.
  pub fn execute<O: OutputSink, E: OutputSink>(
    self: &Arc<Self>,
    code: String,
    opts: ExecuteOptions,
    out: O,
    err: E,
  ) -> impl Future<Output = Result<CellResult, ExecError>> + Send + 'static {
    // the place in the queue is taken now, in call order
    let turn = self.control.join();
    let this = self.clone();
    async move { this.execute_in_turn(turn, &code, &opts, out, err).await }
  }

  async fn execute_in_turn<O: OutputSink, E: OutputSink>(
    &self,
    mut turn: Turn,
    code: &str,
    opts: &ExecuteOptions,
    out: O,
    err: E,
  ) -> Result<CellResult, ExecError> {
    if !turn.ready(&self.closing).await || self.closing.is_cancelled() {
      return Err(closed_error());
    }
    let mut slot = self.slot.lock().await;
    let mut restarted = false;
    if slot.worker.is_none() {
      self.boot(&mut slot).await?;
      restarted = std::mem::take(&mut slot.lost);
    }
    let id = slot.next_id;
    slot.next_id += 1;
    let mut out = Capture::new(opts.max_output, out);
    let mut err = Capture::new(opts.max_output, err);
    let started = Instant::now();
    let mut w = slot.worker.take().expect("a worker was started");
    let (outcome, timed_out, count) = self
      .run_request(&mut w, id, code, false, &mut out, &mut err, opts.timeout)
      .await;
    let execution_time = started.elapsed();
    let timeout_label = opts.timeout.map(format_duration).unwrap_or_default();

    let mut result = CellResult {
      status: SessionStatus::Ok,
      stdout: String::new(),
      stderr: String::new(),
      truncated: false,
      stdout_bytes: 0,
      stderr_bytes: 0,
      result_value: None,
      exception: None,
      execution_count: count,
      execution_time,
      exit_code: None,
      signal: None,
      state_lost: false,
      restarted,
      error: None,
    };
    match outcome {
      Outcome::Done(m) => {
        result.execution_count = m.count.unwrap_or(0);
        result.exception = m.exception;
        result.result_value = m.value.map(|v| cap_text(v, opts.max_output));
        result.status = match m.status.as_deref() {
          Some("ok") => SessionStatus::Ok,
          Some("interrupted") => SessionStatus::Interrupted,
          _ => SessionStatus::Error,
        };
        if timed_out {
          result.status = SessionStatus::Timeout;
          result.error = Some(ExecError::new(
            ErrorCode::TIMEOUT,
            format!("Python cell timeout after {timeout_label}; it was interrupted and the session's state is kept"),
          ));
        }
        slot.worker = Some(w);
      }
      Outcome::Died(st) | Outcome::Killed(st) => {
        let killed = matches!(outcome, Outcome::Killed(_));
        // what the dead interpreter left running in its group goes too
        let st = w.kill().await.or(st);
        let limit = w.limit_error(st);
        let (code, sig) = exit_info(st);
        result.exit_code = code;
        result.signal = sig;
        result.state_lost = true;
        result.execution_count = count;
        if let Some(e) = limit {
          // a resource limit stopped the interpreter's tree
          result.status = SessionStatus::Died;
          result.error = Some(e);
        } else if killed || timed_out {
          result.status = SessionStatus::Timeout;
          result.error = Some(ExecError::new(
            ErrorCode::TIMEOUT,
            format!("Python cell timeout after {timeout_label}; it ignored the interrupt, so the interpreter was killed and its state lost"),
          ));
        } else {
          result.status = SessionStatus::Died;
        }
        self.pid.store(0, Ordering::Relaxed);
        slot.lost = true;
        drop(w);
      }
      Outcome::Canceled => {
        result.status = SessionStatus::Died;
        result.state_lost = true;
        result.error = Some(closed_error());
        self.pid.store(0, Ordering::Relaxed);
        drop(w);
      }
    }
    drop(slot);
    drop(turn);
    out.finish().await;
    err.finish().await;
    let (stdout, t1) = rendered_text(&out.buf);
    let (stderr, t2) = rendered_text(&err.buf);
    result.stdout = stdout;
    result.stderr = stderr;
    result.truncated = t1 || t2;
    result.stdout_bytes = out.buf.total();
    result.stderr_bytes = err.buf.total();
    Ok(result)
  }

  /// Interrupt the running cell (SIGINT: `KeyboardInterrupt` in the cell).
  /// False when no cell runs.
  pub fn interrupt(&self) -> bool {
    self.control.interrupt()
  }

  /// A fresh interpreter (runs `init_code` again). Waits for queued cells.
  pub fn reset(self: &Arc<Self>) -> impl Future<Output = Result<(), ExecError>> + Send + 'static {
    let turn = self.control.join();
    let this = self.clone();
    async move { this.reset_in_turn(turn).await }
  }

  async fn reset_in_turn(&self, mut turn: Turn) -> Result<(), ExecError> {
    if !turn.ready(&self.closing).await || self.closing.is_cancelled() {
      return Err(closed_error());
    }
    let mut slot = self.slot.lock().await;
    if let Some(w) = slot.worker.take() {
      w.shutdown(Duration::ZERO).await;
    }
    self.pid.store(0, Ordering::Relaxed);
    slot.lost = false;
    self.boot(&mut slot).await
  }

  /// End the interpreter and everything it started. A running cell ends with
  /// `died`; queued and later calls fail with ECANCELED.
  pub async fn close(&self) {
    self.closing.cancel();
    let mut slot = self.slot.lock().await;
    if let Some(w) = slot.worker.take() {
      w.shutdown(Duration::from_millis(500)).await;
    }
    self.pid.store(0, Ordering::Relaxed);
  }

  pub fn is_closed(&self) -> bool {
    self.closing.is_cancelled()
  }
}

impl Drop for PythonSession {
  fn drop(&mut self) {
    let pid = self.pid.load(Ordering::Relaxed);
    if pid > 0 {
      group::signal_group(pid, Signal::SIGKILL);
    }
  }
}

/// Cap a result text at `cap` bytes, head and tail.
fn cap_text(text: String, cap: usize) -> String {
  if text.len() <= cap {
    return text;
  }
  let mut b = HeadTailBuffer::new(cap);
  b.push(text.as_bytes());
  rendered_text(&b).0
}
