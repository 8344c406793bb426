//! A persistent Python interpreter: cells run in one namespace, the last
//! expression's `repr` is the result, SIGINT interrupts a cell, a timeout
//! interrupts then kills, a dead interpreter is restarted on the next cell.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::Deserialize;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

use super::capture::{cap_text, rendered_text, Capture, Streams};
use super::engine::{
  closed_error, init_ended, init_timeout, Boot, Engine, Entered, Entry, Escalate, Followed,
  Outcome, Slot,
};
use super::queue::{Ticket, Turn};
use super::worker::{Worker, WorkerSpec};
use super::{ExecuteOptions, SessionStatus};
use crate::error::{ErrorCode, ExecError};
use crate::process::spec::EnvSpec;
use crate::process::supervise::{format_duration, Discard, OutputSink};

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
  /// Opt-in OS sandbox of the interpreter and every cell.
  pub sandbox: Option<crate::sandbox::SandboxPolicy>,
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
      sandbox: None,
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
  /// The interpreter is gone and its namespace with it; also set (with
  /// `restarted`) when the last one died between cells.
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

/// A cell's request as it ended, with the interpreter that ran it.
struct Ran {
  w: Worker,
  outcome: Outcome<Message>,
  /// The timeout fired (the cell got its SIGINT).
  timed_out: bool,
  /// The cell's number, from the driver's start message.
  count: u32,
}

impl CellResult {
  /// A cell that went well so far: `settle` says how it ended.
  fn blank(entry: Entry, count: u32, execution_time: Duration) -> CellResult {
    CellResult {
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
      state_lost: entry.lost_idle,
      restarted: entry.restarted,
      error: None,
    }
  }

  fn with_streams(self, s: Streams) -> CellResult {
    CellResult {
      stdout: s.stdout,
      stderr: s.stderr,
      truncated: s.truncated,
      stdout_bytes: s.stdout_bytes,
      stderr_bytes: s.stderr_bytes,
      ..self
    }
  }
}

/// A long-lived Python interpreter. Executions are queued (FIFO) and run one
/// at a time; `interrupt` does not wait for the queue.
pub struct PythonSession {
  opts: PythonOptions,
  engine: Engine<()>,
}

impl PythonSession {
  /// Start the interpreter and run `init_code`. Must be called within a tokio
  /// runtime.
  pub async fn start(opts: PythonOptions) -> Result<PythonSession, ExecError> {
    let spec = WorkerSpec {
      program: PathBuf::from(&opts.python),
      args: vec!["-u".into(), "-c".into(), DRIVER.into()],
      cwd: opts.cwd.clone(),
      env: opts.env.clone(),
      separator: b'\n',
      limits: opts.limits.clone(),
      die_with_parent: opts.die_with_parent,
      sandbox: opts.sandbox.clone(),
    };
    let engine = Engine::new(spec, opts.owner, opts.startup_timeout, ())?;
    let session = PythonSession { opts, engine };
    {
      let mut slot = session.engine.slot.lock().await;
      session.boot(&mut slot).await?;
    }
    Ok(session)
  }

  /// The interpreter's pid (0 when none runs: before a restart, after close).
  pub fn pid(&self) -> i32 {
    self.engine.pid()
  }

  /// Send one request and follow it to its end. Returns how it ended, whether
  /// a timeout fired, and the cell's number (from the driver's start message).
  #[allow(clippy::too_many_arguments)]
  async fn run_request<O: OutputSink, E: OutputSink>(
    &self,
    w: &mut Worker,
    gen: u64,
    id: u64,
    code: &str,
    init: bool,
    out: &mut O,
    err: &mut E,
    timeout: Option<Duration>,
  ) -> (Followed<Message>, bool, u32) {
    let request = serde_json::json!({ "op": "run", "id": id, "code": code, "init": init });
    let mut line = request.to_string().into_bytes();
    line.push(b'\n');
    // a failed send: the interpreter is gone, its exit is reported
    let (deadline, _) = self.engine.send_request(w, gen, &line, timeout).await;
    let mut timed_out = false;
    let mut count = 0;
    let on_message = |m: &[u8]| {
      let m = serde_json::from_slice::<Message>(m).ok()?;
      if m.id != Some(id) {
        return None;
      }
      match m.ev.as_str() {
        "start" => {
          count = m.count.unwrap_or(0);
          self.engine.queue.started();
          None
        }
        "done" => Some(m),
        _ => None,
      }
    };
    let on_deadline = |w: &mut Worker| {
      if timed_out {
        return Escalate::Kill;
      }
      // interrupt first; the cell has `kill_grace` to stop
      timed_out = true;
      w.signal(Signal::SIGINT);
      Escalate::Until(Some(Instant::now() + self.opts.kill_grace))
    };
    let followed = self
      .engine
      .follow(w, out, err, deadline, on_message, on_deadline)
      .await;
    (followed, timed_out, count)
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
    let (ticket, run) = self.execute_ticketed(code, opts, out, err);
    async move {
      let r = run.await;
      drop(ticket);
      r
    }
  }

  /// [`Self::execute`], with the cell's [`Ticket`]: `interrupt()` targets
  /// the cell until the caller drops it (once it has taken the result).
  pub fn execute_ticketed<O: OutputSink, E: OutputSink>(
    self: &Arc<Self>,
    code: String,
    opts: ExecuteOptions,
    out: O,
    err: E,
  ) -> (
    Ticket,
    impl Future<Output = Result<CellResult, ExecError>> + Send + 'static,
  ) {
    // the place in the queue is taken now, in call order
    let (turn, ticket) = self.engine.queue.join_execution();
    let this = self.clone();
    (ticket, async move {
      this.execute_in_turn(turn, &code, &opts, out, err).await
    })
  }

  async fn execute_in_turn<O: OutputSink, E: OutputSink>(
    &self,
    mut turn: Turn,
    code: &str,
    opts: &ExecuteOptions,
    out: O,
    err: E,
  ) -> Result<CellResult, ExecError> {
    let entered = self.engine.enter(&mut turn, self).await?;
    let mut out = Capture::new(opts.max_output, out);
    let mut err = Capture::new(opts.max_output, err);
    let started = Instant::now();
    let (mut slot, entry, ran) = self
      .run_cell(entered, &turn, code, opts.timeout, &mut out, &mut err)
      .await?;
    let mut result = CellResult::blank(entry, ran.count, started.elapsed());
    self.settle(&mut slot, ran, opts, &mut result).await;
    let streams = Engine::finish(slot, turn, out, err).await;
    Ok(result.with_streams(streams))
  }

  /// Run the cell's request in the slot's interpreter; in a new one if that
  /// one turns out to have died before it started the cell.
  async fn run_cell<'a, O: OutputSink, E: OutputSink>(
    &self,
    entered: Entered<'a, ()>,
    turn: &Turn,
    code: &str,
    timeout: Option<Duration>,
    out: &mut O,
    err: &mut E,
  ) -> Result<(MutexGuard<'a, Slot<()>>, Entry, Ran), ExecError> {
    let (mut slot, mut entry) = entered;
    let mut retried = false;
    loop {
      let id = slot.take_id();
      let mut w = slot.worker.take().expect("a worker was started");
      let (run, timed_out, count) = self
        .run_request(&mut w, turn.gen(), id, code, false, out, err, timeout)
        .await;
      // the interpreter died before it started the cell (between cells, and
      // the death was not seen yet): the cell runs in a new one
      if let (Outcome::Died(st), false, false) = (&run.outcome, run.started, retried) {
        let st = *st;
        (slot, entry) = self
          .engine
          .replace_dead(slot, w, st, self, |_| {}, entry)
          .await?;
        retried = true;
        continue;
      }
      let ran = Ran {
        w,
        outcome: run.outcome,
        timed_out,
        count,
      };
      return Ok((slot, entry, ran));
    }
  }

  /// Fill `result` from how the cell ended; the interpreter goes back into
  /// the slot, or is cleared away when it was lost.
  async fn settle(
    &self,
    slot: &mut Slot<()>,
    ran: Ran,
    opts: &ExecuteOptions,
    result: &mut CellResult,
  ) {
    let Ran {
      mut w,
      outcome,
      timed_out,
      count,
    } = ran;
    let timeout_label = opts.timeout.map(format_duration).unwrap_or_default();
    // a watched limit passed by the end of the cell (processes it left, a
    // fork the kernel refused) is this cell's, not the next one's
    let outcome = match outcome {
      Outcome::Done(m) if w.over_limit_now() => {
        result.exception = m.exception;
        Outcome::Died(None)
      }
      o => o,
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
        let lost = self
          .engine
          .lost(slot, w, st, killed || timed_out, || {
            ExecError::new(
              ErrorCode::TIMEOUT,
              format!("Python cell timeout after {timeout_label}; it ignored the interrupt, so the interpreter was killed and its state lost"),
            )
          })
          .await;
        result.exit_code = lost.exit_code;
        result.signal = lost.signal;
        result.state_lost = true;
        result.execution_count = count;
        result.status = lost.status;
        result.error = lost.error;
      }
      Outcome::Canceled => {
        result.status = SessionStatus::Died;
        result.state_lost = true;
        result.error = Some(closed_error());
        self.engine.gone();
        drop(w);
      }
    }
  }

  /// Interrupt the running cell (SIGINT: `KeyboardInterrupt` in the cell).
  /// False when no cell runs.
  pub fn interrupt(&self) -> bool {
    self.engine.queue.interrupt()
  }

  /// A fresh interpreter (runs `init_code` again). Waits for queued cells.
  pub fn reset(self: &Arc<Self>) -> impl Future<Output = Result<(), ExecError>> + Send + 'static {
    let turn = self.engine.queue.join();
    let this = self.clone();
    async move { this.engine.reset(turn, &*this, |_| {}).await }
  }

  /// End the interpreter and everything it started. A running cell ends with
  /// `died`; queued and later calls fail with ECANCELED.
  pub async fn close(&self) {
    self.engine.close().await
  }

  pub fn is_closed(&self) -> bool {
    self.engine.closing.is_cancelled()
  }
}

impl Boot<()> for PythonSession {
  /// Start an interpreter and run `init_code` in it.
  async fn boot(&self, slot: &mut Slot<()>) -> Result<(), ExecError> {
    let ready = |m: &[u8]| serde_json::from_slice::<Message>(m).is_ok_and(|m| m.ev == "ready");
    let mut w = self
      .engine
      .spawn_ready(None, |m| ready(m).then_some(Ok(())))
      .await?;
    if let Some(init) = self.opts.init_code.clone() {
      let id = slot.take_id();
      let mut out = Capture::new(4096, Discard);
      let mut err = Capture::new(4096, Discard);
      let timeout = Some(self.opts.startup_timeout);
      match self
        .run_request(&mut w, 0, id, &init, true, &mut out, &mut err, timeout)
        .await
      {
        (
          Followed {
            outcome: Outcome::Done(m),
            ..
          },
          false,
          _,
        ) if m.status.as_deref() == Some("ok") => {}
        (
          Followed {
            outcome: Outcome::Done(_) | Outcome::Died(_) | Outcome::Killed(_),
            ..
          },
          true,
          _,
        ) => {
          init_ended(&mut w, None, "initCode").await?;
          return Err(init_timeout("initCode", self.opts.startup_timeout));
        }
        (
          Followed {
            outcome: Outcome::Done(m),
            ..
          },
          _,
          _,
        ) => {
          w.kill().await;
          let what = m
            .exception
            .map(|e| format!("{}: {}", e.kind, e.message))
            .unwrap_or_default();
          return Err(ExecError::invalid(format!("initCode failed: {what}")));
        }
        (
          Followed {
            outcome: Outcome::Canceled,
            ..
          },
          _,
          _,
        ) => return Err(closed_error()),
        _ => {
          init_ended(&mut w, None, "initCode").await?;
          let (text, _) = rendered_text(&err.buf);
          return Err(ExecError::invalid(format!(
            "initCode did not complete (the interpreter died or timed out): {}",
            text.trim()
          )));
        }
      }
    }
    self.engine.install(slot, w);
    Ok(())
  }
}
