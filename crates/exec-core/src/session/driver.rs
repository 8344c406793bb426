//! A session run by a driver program inside the interpreter (Python's
//! `session/python_driver.py`, Node's `session/node_driver.mjs`), both speaking the same
//! JSON-line protocol on the control channel: cells run in one namespace, the
//! last expression's value is the result (with a MIME bundle when it has
//! one), `display()` bundles come as they happen, SIGINT interrupts a cell, a
//! timeout interrupts then kills, a dead interpreter is restarted on the next
//! cell. What differs by language is in [`DriverKind`] (`python.rs`,
//! `node.rs`: the start options, how a cell's code is prepared).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

use super::capture::{cap_text, rendered_text, Capture, Order, Streams};
use super::cell::{CellException, CellResult, DriverKind, DriverSpec};
use super::display::{cap_bundle, Bundle, DisplaySink, NoDisplay};
use super::engine::{
  closed_error, init_ended, init_timeout, Boot, Engine, Entered, Entry, Escalate, Followed,
  Outcome, Slot,
};
use super::lifecycle::{Kind, Session};
use super::notebook::HistoryCell;
use super::queue::{Ticket, Turn};
use super::worker::{Worker, WorkerSpec};
use super::{CellLanguage, CellOptions, SessionStatus};
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::{format_duration, Discard, OutputSink};
use crate::process::RunOptions;

impl DriverKind {
  /// The name in messages (`Python cell timeout after 1s`).
  pub fn label(&self) -> &'static str {
    match self {
      DriverKind::Python => "Python",
      DriverKind::Node => "JavaScript",
    }
  }

  /// The code sent to the driver, or the compile error the cell fails with.
  fn prepare(&self, code: &str, language: Option<CellLanguage>) -> Result<String, CellException> {
    match self {
      DriverKind::Python => Ok(code.to_owned()),
      DriverKind::Node => super::node::prepare_cell(code, language.unwrap_or_default()),
    }
  }

  /// How long a cell has to end after `interrupt()` reached it before the
  /// interpreter is killed (`None`: never). Node's synchronous code after an
  /// `await` cannot be interrupted in-process; Python's cells always can.
  fn interrupt_grace(&self, grace: Duration) -> Option<Duration> {
    match self {
      DriverKind::Python => None,
      DriverKind::Node => Some(grace),
    }
  }
}

/// The cells kept for `history()`, and how many older ones were dropped.
#[derive(Default)]
struct History {
  cells: std::collections::VecDeque<HistoryCell>,
  dropped: u64,
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
  data: Option<Bundle>,
  #[serde(default)]
  exception: Option<CellException>,
  /// `display`: the bytes of stdout and stderr the driver had written in
  /// the cell when the bundle was made.
  #[serde(default)]
  at: Option<[u64; 2]>,
  /// `done`: the bytes of stdout and stderr the driver wrote in the cell.
  #[serde(default)]
  wrote: Option<[u64; 2]>,
  /// `done`: the runs of those writes, `[stream, up to byte]` (null when
  /// there were too many to send).
  #[serde(default)]
  runs: Option<Vec<(usize, u64)>>,
  /// `ready` / `unsupported`: the interpreter's version.
  #[serde(default)]
  version: Option<String>,
}

/// A cell's request as it ended, with the interpreter that ran it.
struct Ran {
  w: Worker,
  outcome: Outcome<Message>,
  /// The timeout fired (the cell got its SIGINT).
  timed_out: bool,
  /// The cell ignored `interrupt()` for the grace and the interpreter was killed.
  interrupt_killed: bool,
  /// The cell's number, from the driver's start message.
  count: u32,
}

/// One request to the driver.
struct Request<'a> {
  id: u64,
  code: &'a str,
  init: bool,
  /// A compile error the cell fails with (nothing runs).
  error: Option<&'a CellException>,
  timeout: Option<Duration>,
  /// After the SIGINT of the timeout (Node: of an interrupt too), how long
  /// the cell may take to stop before the interpreter is killed.
  kill_grace: Duration,
}

/// Where a request's output and bundles go.
struct Io<'a, O, E> {
  out: &'a mut O,
  err: &'a mut E,
  shown: &'a mut dyn Shows,
}

/// The bundles of one execution: each one capped, handed to the sink, kept
/// and placed in the order of the cell's outputs.
struct Shown<D> {
  sink: D,
  kept: Vec<Bundle>,
  cap: usize,
  order: Order,
}

trait Shows: Send {
  /// A bundle, made when the driver had written `at` bytes of stdout and stderr.
  fn push(&mut self, b: Bundle, at: Option<[u64; 2]>);
  /// What the driver wrote in the cell, and in which runs, from its `done`.
  fn wrote(&mut self, _wrote: Option<[u64; 2]>, _runs: Option<Vec<(usize, u64)>>) {}
}

impl<D: DisplaySink> Shows for Shown<D> {
  fn push(&mut self, b: Bundle, at: Option<[u64; 2]>) {
    let b = cap_bundle(b, self.cap);
    self.sink.display(&b);
    self.kept.push(b);
    self.order.display(at);
  }
  fn wrote(&mut self, wrote: Option<[u64; 2]>, runs: Option<Vec<(usize, u64)>>) {
    self.order.wrote(wrote, runs);
  }
}

impl Shows for Vec<Bundle> {
  fn push(&mut self, b: Bundle, _at: Option<[u64; 2]>) {
    Vec::push(self, b)
  }
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
      result_data: None,
      displays: Vec::new(),
      outputs: Vec::new(),
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
      outputs: s.pieces,
      ..self
    }
  }
}

/// A driver's part of a session: its options and its history.
pub struct Driver {
  opts: DriverSpec,
  history: std::sync::Mutex<History>,
}

impl Kind for Driver {
  type State = ();
  fn fresh(&self) {}
}

/// A long-lived interpreter run by a driver (`PythonSession`, `NodeSession`).
/// Executions are queued (FIFO) and run one at a time; `interrupt` does not
/// wait for the queue.
pub type DriverSession = Session<Driver>;

impl DriverSession {
  /// Start the interpreter and run `init_code`. Must be called within a tokio
  /// runtime.
  pub async fn start(opts: impl Into<DriverSpec>) -> Result<DriverSession, ExecError> {
    let mut opts: DriverSpec = opts.into();
    opts.run.refuse_input("a session")?;
    opts.process.resolve_cwd()?;
    let spec = WorkerSpec {
      program: PathBuf::from(&opts.program),
      args: opts.args.clone(),
      separator: b'\n',
      process: opts.process.clone(),
    };
    let (owner, startup_timeout) = (opts.owner, opts.startup_timeout);
    let driver = Driver {
      opts,
      history: Default::default(),
    };
    Session::boot_new(driver, spec, owner, startup_timeout).await
  }

  /// Send one request and follow it to its end. Returns how it ended, whether
  /// a timeout fired, and the cell's number (from the driver's start message).
  async fn run_request<O: OutputSink, E: OutputSink>(
    &self,
    w: &mut Worker,
    gen: u64,
    req: &Request<'_>,
    io: Io<'_, O, E>,
  ) -> (Followed<Message>, bool, u32) {
    let Io { out, err, shown } = io;
    let id = req.id;
    let request = serde_json::json!({
      "op": "run", "id": id, "code": req.code, "init": req.init, "error": req.error,
    });
    let mut line = request.to_string().into_bytes();
    line.push(b'\n');
    // a failed send: the interpreter is gone, its exit is reported
    let (deadline, _) = self.engine.send_request(w, gen, &line, req.timeout).await;
    let mut timed_out = false;
    let mut count = 0;
    let on_message = |m: &[u8]| {
      let m = serde_json::from_slice::<Message>(m).ok()?;
      // a display of an earlier cell's timer, read now, is shown with this one
      if m.ev == "display" {
        if let Some(data) = m.data {
          shown.push(data, m.at);
        }
        return None;
      }
      if m.id != Some(id) {
        return None;
      }
      match m.ev.as_str() {
        "start" => {
          count = m.count.unwrap_or(0);
          self.engine.queue.started();
          None
        }
        "done" => {
          let mut m = m;
          shown.wrote(m.wrote, m.runs.take());
          Some(m)
        }
        _ => None,
      }
    };
    let on_deadline = |w: &mut Worker| {
      if timed_out {
        return Escalate::Kill;
      }
      // interrupt first; the cell has `kill_grace` to stop
      timed_out = true;
      w.interrupt();
      Escalate::Until(Some(Instant::now() + req.kill_grace))
    };
    let grace = self.opts.kind.interrupt_grace(req.kill_grace);
    let followed = self
      .engine
      .follow(w, out, err, deadline, grace, on_message, on_deadline)
      .await;
    (followed, timed_out, count)
  }

  /// Run a cell. Output goes to `out`/`err` as it comes (and is captured).
  /// Errors only for a session that is closed or cannot be restarted.
  pub fn execute<O: OutputSink, E: OutputSink>(
    self: &Arc<Self>,
    code: String,
    opts: CellOptions,
    out: O,
    err: E,
  ) -> impl Future<Output = Result<CellResult, ExecError>> + Send + 'static {
    let (ticket, run) = self.execute_ticketed(code, opts, out, err, NoDisplay);
    async move {
      let r = run.await;
      drop(ticket);
      r
    }
  }

  /// [`Self::execute`], with the cell's [`Ticket`]: `interrupt()` targets
  /// the cell until the caller drops it (once it has taken the result).
  /// `display` gets each MIME bundle as it comes.
  pub fn execute_ticketed<O: OutputSink, E: OutputSink, D: DisplaySink>(
    self: &Arc<Self>,
    code: String,
    opts: CellOptions,
    out: O,
    err: E,
    display: D,
  ) -> (
    Ticket,
    impl Future<Output = Result<CellResult, ExecError>> + Send + 'static,
  ) {
    // the place in the queue is taken now, in call order
    self.in_turn(move |this, turn| async move {
      let r = this
        .execute_in_turn(turn, &code, &opts, out, err, display)
        .await;
      if let Ok(r) = &r {
        let language = match this.opts.kind {
          DriverKind::Python => "python",
          DriverKind::Node => opts.language.unwrap_or_default().as_str(),
        };
        this.record(HistoryCell {
          code,
          language: language.into(),
          result: r.clone(),
        });
      }
      r
    })
  }

  async fn execute_in_turn<O: OutputSink, E: OutputSink, D: DisplaySink>(
    &self,
    mut turn: Turn,
    code: &str,
    opts: &CellOptions,
    out: O,
    err: E,
    display: D,
  ) -> Result<CellResult, ExecError> {
    let run = opts.run_over(&self.opts.run)?;
    let prepared = self.opts.kind.prepare(code, opts.language);
    let entered = self.engine.enter(&mut turn, self).await?;
    let order = Order::default();
    let mut out = Capture::new(run.max_output_bytes, out).ordered(&order, 0);
    let mut err = Capture::new(run.max_output_bytes, err).ordered(&order, 1);
    let mut shown = Shown {
      sink: display,
      kept: Vec::new(),
      cap: opts.max_display_bytes,
      order,
    };
    let started = Instant::now();
    let (code, error) = match &prepared {
      Ok(c) => (c.as_str(), None),
      Err(e) => ("", Some(e)),
    };
    let req = Request {
      id: 0,
      code,
      init: false,
      error,
      timeout: run.timeout,
      kill_grace: run.kill_grace,
    };
    let io = Io {
      out: &mut out,
      err: &mut err,
      shown: &mut shown,
    };
    let (mut slot, entry, ran) = self.run_cell(entered, &turn, req, io).await?;
    let mut result = CellResult::blank(entry, ran.count, started.elapsed());
    self.settle(&mut slot, ran, &run, &mut result).await;
    result.displays = shown.kept;
    if let Some(d) = result.result_data.take() {
      result.result_data = Some(cap_bundle(d, opts.max_display_bytes));
    }
    let streams = Engine::finish(slot, turn, out, err).await;
    Ok(result.with_streams(streams))
  }

  /// Run the cell's request in the slot's interpreter; in a new one if that
  /// one turns out to have died before it started the cell.
  async fn run_cell<'a, O: OutputSink, E: OutputSink>(
    &self,
    entered: Entered<'a, ()>,
    turn: &Turn,
    mut req: Request<'_>,
    io: Io<'_, O, E>,
  ) -> Result<(MutexGuard<'a, Slot<()>>, Entry, Ran), ExecError> {
    let Io { out, err, shown } = io;
    let (mut slot, mut entry) = entered;
    let mut retried = false;
    loop {
      req.id = slot.take_id();
      let mut w = slot.worker.take().expect("a worker was started");
      let io = Io {
        out: &mut *out,
        err: &mut *err,
        shown: &mut *shown,
      };
      let (run, timed_out, count) = self.run_request(&mut w, turn.gen(), &req, io).await;
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
        interrupt_killed: run.interrupt_killed,
        count,
      };
      return Ok((slot, entry, ran));
    }
  }

  fn record(&self, cell: HistoryCell) {
    let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
    h.cells.push_back(cell);
    while h.cells.len() > self.opts.max_history {
      h.cells.pop_front();
      h.dropped += 1;
    }
  }

  /// The cells run so far (not the init code), with their results, in
  /// order: the last `max_history` of them.
  pub fn history(&self) -> Vec<HistoryCell> {
    let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
    h.cells.iter().cloned().collect()
  }

  /// How many of the oldest cells the history has dropped.
  pub fn history_dropped(&self) -> u64 {
    self
      .history
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .dropped
  }

  /// Write the history to `path` as an nbformat 4.5 notebook.
  pub fn export_notebook(&self, path: &std::path::Path) -> Result<(), ExecError> {
    let (cells, dropped) = {
      let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
      (h.cells.iter().cloned().collect::<Vec<_>>(), h.dropped)
    };
    super::notebook::export(path, self.opts.kind, &cells, dropped)
  }

  /// Which interpreter the session runs.
  pub fn kind(&self) -> DriverKind {
    self.opts.kind
  }

  /// Fill `result` from how the cell ended (`run`: its timeout, grace and
  /// cap); the interpreter goes back into the slot, or is cleared away when
  /// it was lost.
  async fn settle(&self, slot: &mut Slot<()>, ran: Ran, run: &RunOptions, result: &mut CellResult) {
    let Ran {
      mut w,
      outcome,
      timed_out,
      interrupt_killed,
      count,
    } = ran;
    let label = self.opts.kind.label();
    let timeout_label = run.timeout.map(format_duration).unwrap_or_default();
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
        result.result_value = m.value.map(|v| cap_text(v, run.max_output_bytes));
        result.result_data = m.data;
        result.status = match m.status.as_deref() {
          Some("ok") => SessionStatus::Ok,
          Some("interrupted") => SessionStatus::Interrupted,
          _ => SessionStatus::Error,
        };
        if timed_out {
          result.status = SessionStatus::Timeout;
          result.error = Some(ExecError::new(
            ErrorCode::TIMEOUT,
            format!("{label} cell timeout after {timeout_label}; it was interrupted and the session's state is kept"),
          ));
        }
        slot.worker = Some(w);
      }
      Outcome::Died(st) | Outcome::Killed(st) => {
        let killed = matches!(outcome, Outcome::Killed(_));
        let by_interrupt = interrupt_killed && !timed_out;
        let mut lost = self
          .engine
          .lost(slot, w, st, (killed && !by_interrupt) || timed_out, || {
            ExecError::new(
              ErrorCode::TIMEOUT,
              format!("{label} cell timeout after {timeout_label}; it ignored the interrupt, so the interpreter was killed and its state lost"),
            )
          })
          .await;
        if by_interrupt && lost.error.is_none() {
          lost.status = SessionStatus::Interrupted;
          lost.error = Some(ExecError::new(
            ErrorCode::ECANCELED,
            format!(
              "the {label} cell did not stop within {} of the interrupt (code running after an await cannot be interrupted in-process), so the interpreter was killed and its state lost",
              format_duration(run.kill_grace)
            ),
          ));
        }
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
}

impl DriverSession {
  /// Run `init_code` in the new interpreter `w`: `Ok` when it ran to its
  /// end; its exception, its timeout or the interpreter's death otherwise.
  async fn run_init(
    &self,
    slot: &mut Slot<()>,
    w: &mut Worker,
    init: &str,
  ) -> Result<(), ExecError> {
    let mut out = Capture::new(4096, Discard);
    let mut err = Capture::new(4096, Discard);
    let req = Request {
      id: slot.take_id(),
      code: init,
      init: true,
      error: None,
      timeout: Some(self.opts.startup_timeout),
      kill_grace: self.opts.run.kill_grace,
    };
    let io = Io {
      out: &mut out,
      err: &mut err,
      shown: &mut Vec::new(),
    };
    match self.run_request(w, 0, &req, io).await {
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
        init_ended(w, None, "initCode").await?;
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
        init_ended(w, None, "initCode").await?;
        let (text, _) = rendered_text(&err.buf);
        return Err(ExecError::invalid(format!(
          "initCode did not complete (the interpreter died or timed out): {}",
          text.trim()
        )));
      }
    }
    Ok(())
  }
}

impl Boot<()> for DriverSession {
  /// Start an interpreter and run `init_code` in it.
  async fn boot(&self, slot: &mut Slot<()>) -> Result<(), ExecError> {
    let shown = &self.engine.shown;
    let ready = |m: &[u8]| match serde_json::from_slice::<Message>(m) {
      Ok(m) if m.ev == "ready" => Some(Ok(())),
      // the Node driver found its node too old
      Ok(m) if m.ev == "unsupported" => Some(Err(super::node::unsupported(
        shown,
        m.version.as_deref().unwrap_or("older"),
      ))),
      _ => None,
    };
    let mut w = match self.engine.spawn_ready(None, ready).await {
      Ok(w) => w,
      Err(e) if e.code == ErrorCode::ESPAWN && self.opts.kind == DriverKind::Node => {
        let old = super::node::too_old(self.engine.program(), shown).await;
        return Err(old.unwrap_or(e));
      }
      Err(e) => return Err(e),
    };
    if let Some(init) = self.opts.init_code.clone() {
      self.run_init(slot, &mut w, &init).await?;
    }
    self.engine.install(slot, w);
    Ok(())
  }
}
