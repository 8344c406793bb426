//! The engine both languages run on: the worker slot (started on demand,
//! restarted after a loss, reset, closed), starting a worker up to its ready
//! message, and following one request to its end (its output streamed, its
//! deadline escalated, a lost worker reported). The languages bring their
//! messages, their timeout escalation and their `boot` (the worker's start
//! plus its init code).

use std::future::Future;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::{Capture, Streams};
use super::channel::Event;
use super::queue::{Queue, Turn};
use super::worker::{Worker, WorkerSpec};
use super::SessionStatus;
use crate::error::{ErrorCode, ExecError};
use crate::process::spec::{check_cwd, resolve_program};
use crate::process::supervise::{decode_status, format_duration, OutputSink};

/// How a request ended.
pub(crate) enum Outcome<T> {
  /// The worker's completion message.
  Done(T),
  Died(Option<ExitStatus>),
  Killed(Option<ExitStatus>),
  Canceled,
}

/// What to do when a request's deadline passes.
pub(crate) enum Escalate {
  /// Wait again, until then (`None`: until a message or the exit).
  Until(Option<Instant>),
  /// Kill the worker (the request ends `Killed`).
  Kill,
}

/// The worker of a session and what goes with it; `S` is the language's own
/// state (the shell's cwd).
pub(crate) struct Slot<S> {
  pub worker: Option<Worker>,
  pub next_id: u64,
  /// The last worker was lost (died, killed): the next start is a restart.
  pub lost: bool,
  pub state: S,
}

impl<S> Slot<S> {
  /// The id of the next request.
  pub fn take_id(&mut self) -> u64 {
    let id = self.next_id;
    self.next_id += 1;
    id
  }
}

/// Starts a session's worker (and runs its init code) into the slot.
pub(crate) trait Boot<S> {
  fn boot(&self, slot: &mut Slot<S>) -> impl Future<Output = Result<(), ExecError>> + Send;
}

/// A worker that was lost during an execution.
pub(crate) struct Lost {
  pub status: SessionStatus,
  pub error: Option<ExecError>,
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
}

/// The language-independent part of a session.
pub(crate) struct Engine<S> {
  /// The program as it was named (in messages).
  pub shown: String,
  spec: WorkerSpec,
  owner: u64,
  startup_timeout: Duration,
  pub slot: Mutex<Slot<S>>,
  pub queue: Queue,
  pub closing: CancellationToken,
  /// Shared with a task per worker that zeroes it when the worker exits.
  pid: Arc<AtomicI32>,
}

/// How a request ended, and what the worker said of it.
pub(crate) struct Followed<T> {
  pub outcome: Outcome<T>,
  /// `interrupt()` hit the request.
  #[cfg_attr(windows, allow(dead_code))] // the shell's (POSIX only yet)
  pub interrupted: bool,
  /// The worker confirmed it started the request (its code may have run).
  pub started: bool,
  /// The request did not end within the grace after its interrupt and the
  /// worker was killed.
  pub interrupt_killed: bool,
}

/// The slot, held, with a worker in it, and how the execution got it.
pub(crate) type Entered<'a, S> = (MutexGuard<'a, Slot<S>>, Entry);

/// How an execution got its worker.
#[derive(Default, Clone, Copy)]
pub(crate) struct Entry {
  /// A new worker was started because the last one was lost.
  pub restarted: bool,
  /// The last worker died between executions (or before it could start this
  /// one): the state the execution expected is gone.
  pub lost_idle: bool,
}

impl<S: Send> Engine<S> {
  /// Check the options; `spec.program` is the program as named, looked up
  /// here in the PATH of `spec.process.env`.
  pub fn new(
    mut spec: WorkerSpec,
    owner: u64,
    startup_timeout: Duration,
    state: S,
  ) -> Result<Engine<S>, ExecError> {
    check_cwd(spec.process.cwd())?;
    spec.process.env.validate()?;
    let shown = spec.program.to_string_lossy().into_owned();
    spec.program = resolve_program(
      &shown,
      spec.process.env.path_var().as_ref(),
      spec.process.cwd(),
    )?;
    Ok(Engine {
      shown,
      spec,
      owner,
      startup_timeout,
      slot: Mutex::new(Slot {
        worker: None,
        next_id: 1,
        lost: false,
        state,
      }),
      queue: Queue::default(),
      closing: CancellationToken::new(),
      pid: Arc::new(AtomicI32::new(0)),
    })
  }

  /// The worker's program, resolved.
  pub fn program(&self) -> &std::path::Path {
    &self.spec.program
  }

  /// The worker's pid (0 when none runs).
  pub fn pid(&self) -> i32 {
    self.pid.load(Ordering::Relaxed)
  }

  /// The worker is ready: it serves the next requests. Its exit is noticed
  /// when it happens, also between executions (`pid` becomes 0 then; the next
  /// execution starts a new worker).
  pub fn install(&self, slot: &mut Slot<S>, w: Worker) {
    self.pid.store(w.pid, Ordering::Relaxed);
    let mut exited = w.exit_watch();
    let (pid, cell) = (w.pid, self.pid.clone());
    tokio::spawn(async move {
      let _ = exited.wait_for(|s| s.is_some()).await;
      let _ = cell.compare_exchange(pid, 0, Ordering::Relaxed, Ordering::Relaxed);
    });
    slot.worker = Some(w);
  }

  /// No worker runs.
  pub fn gone(&self) {
    self.pid.store(0, Ordering::Relaxed);
  }

  /// Spawn the worker, send it `bootstrap` (if any) and wait for its ready
  /// message: `on_message` says `None` (not yet), `Some(Ok)` (ready) or
  /// `Some(Err)` (the worker is killed, the error returned).
  pub async fn spawn_ready(
    &self,
    bootstrap: Option<&[u8]>,
    mut on_message: impl FnMut(&[u8]) -> Option<Result<(), ExecError>>,
  ) -> Result<Worker, ExecError> {
    let shown = &self.shown;
    let mut w = Worker::spawn(&self.spec, self.owner)?;
    let mut deadline = Instant::now() + self.startup_timeout;
    let mut out = crate::buffer::HeadTailBuffer::new(4096);
    let mut err = crate::buffer::HeadTailBuffer::new(4096);
    if let Some(bytes) = bootstrap {
      // a worker that died before it read the bootstrap (EPIPE) is followed
      // to its exit too, so that its stderr says why
      if w.send(bytes).await.is_err() {
        deadline = deadline.min(Instant::now() + Duration::from_secs(2));
      }
    }
    loop {
      match w
        .next_event(&mut out, &mut err, Some(deadline), &self.closing)
        .await
      {
        Event::Message(m) => match on_message(&m) {
          None => {}
          Some(Ok(())) => break,
          Some(Err(e)) => {
            w.kill().await;
            return Err(e);
          }
        },
        Event::Exited(st) => return Err(w.startup_error(shown, st, &err)),
        Event::Deadline => {
          w.kill().await;
          return Err(ExecError::new(
            ErrorCode::ESPAWN,
            format!(
              "{shown} did not start within {}",
              format_duration(self.startup_timeout)
            ),
          ));
        }
        Event::Canceled => {
          w.kill().await;
          return Err(closed_error());
        }
      }
    }
    if let Some(e) = w.over_limit_at_start(shown).await {
      return Err(e);
    }
    Ok(w)
  }

  /// Send one request line of execution `gen` (0: init). Returns the
  /// request's deadline, and whether the line was sent (a worker that is gone
  /// has 2 s to report how it ended).
  pub async fn send_request(
    &self,
    w: &mut Worker,
    gen: u64,
    line: &[u8],
    timeout: Option<Duration>,
  ) -> (Option<Instant>, bool) {
    self.queue.begin(w.interrupter(), gen);
    let deadline = timeout.map(|t| Instant::now() + t);
    if w.send(line).await.is_err() {
      return (Some(Instant::now() + Duration::from_secs(2)), false);
    }
    (deadline, true)
  }

  /// Follow a sent request to its end: `on_message` turns the completion
  /// message into `Some`, `on_deadline` escalates. With `interrupt_grace`,
  /// a request still running that long after `interrupt()` reached it is
  /// killed (`Followed::interrupt_killed`).
  #[allow(clippy::too_many_arguments)]
  pub async fn follow<T, O: OutputSink, E: OutputSink>(
    &self,
    w: &mut Worker,
    out: &mut O,
    err: &mut E,
    mut deadline: Option<Instant>,
    interrupt_grace: Option<Duration>,
    mut on_message: impl FnMut(&[u8]) -> Option<T>,
    mut on_deadline: impl FnMut(&mut Worker) -> Escalate,
  ) -> Followed<T> {
    // cancelled by the session's close, or by an interrupt of this request
    let mut wake = self.closing.child_token();
    if interrupt_grace.is_some() {
      self.queue.wake_on_interrupt(wake.clone());
    }
    let mut kill_at: Option<Instant> = None;
    let mut interrupt_killed = false;
    let outcome = loop {
      let until = match (deadline, kill_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
      };
      match w.next_event(out, err, until, &wake).await {
        Event::Message(m) => {
          if let Some(done) = on_message(&m) {
            break Outcome::Done(done);
          }
        }
        Event::Exited(st) => break Outcome::Died(Some(st)),
        Event::Deadline if kill_at.is_some_and(|k| Instant::now() >= k) => {
          interrupt_killed = true;
          break Outcome::Killed(w.kill().await);
        }
        Event::Deadline => match on_deadline(w) {
          Escalate::Until(at) => deadline = at,
          Escalate::Kill => break Outcome::Killed(w.kill().await),
        },
        Event::Canceled if !self.closing.is_cancelled() => {
          // the interrupt reached the request: it has the grace to end
          kill_at = interrupt_grace.map(|g| Instant::now() + g);
          wake = self.closing.child_token();
        }
        Event::Canceled => {
          w.kill().await;
          break Outcome::Canceled;
        }
      }
    };
    let (interrupted, started) = self.queue.end();
    Followed {
      outcome,
      interrupted,
      started,
      interrupt_killed,
    }
  }

  /// Wait for the turn and take the slot, with a worker in it (started anew
  /// when the last one was lost, also when it died since the last execution).
  pub async fn enter(
    &self,
    turn: &mut Turn,
    boot: &impl Boot<S>,
  ) -> Result<Entered<'_, S>, ExecError> {
    if !turn.ready(&self.closing).await || self.closing.is_cancelled() {
      return Err(closed_error());
    }
    let slot = self.slot.lock().await;
    self.ready_worker(slot, boot, Entry::default()).await
  }

  /// The slot with a live worker in it: a worker that died since the last
  /// execution is cleared away (with what it left in its group) and replaced.
  pub async fn ready_worker<'a>(
    &self,
    mut slot: MutexGuard<'a, Slot<S>>,
    boot: &impl Boot<S>,
    mut entry: Entry,
  ) -> Result<Entered<'a, S>, ExecError> {
    if slot.worker.as_mut().is_some_and(|w| w.has_exited()) {
      let mut w = slot.worker.take().expect("checked");
      w.kill().await;
      self.gone();
      slot.lost = true;
      entry.lost_idle = true;
    }
    if slot.worker.is_none() {
      boot.boot(&mut slot).await?;
      entry.restarted |= std::mem::take(&mut slot.lost);
    }
    Ok((slot, entry))
  }

  /// The worker died or was killed during an execution: what it left in its
  /// group goes too, and the next execution starts a new one. `timed_out`:
  /// the timeout killed it (then `timeout_error` is the error, unless a
  /// resource limit was the cause).
  pub async fn lost(
    &self,
    slot: &mut Slot<S>,
    mut w: Worker,
    st: Option<ExitStatus>,
    timed_out: bool,
    timeout_error: impl FnOnce() -> ExecError,
  ) -> Lost {
    let st = w.kill().await.or(st);
    let limit = w.limit_error(st);
    let (exit_code, signal) = exit_info(st);
    let (status, error) = if let Some(e) = limit {
      // a resource limit stopped the worker's tree
      (SessionStatus::Died, Some(e))
    } else if timed_out {
      (SessionStatus::Timeout, Some(timeout_error()))
    } else {
      (SessionStatus::Died, None)
    };
    self.gone();
    slot.lost = true;
    Lost {
      status,
      error,
      exit_code,
      signal,
    }
  }

  /// The worker died before it started the request (between executions, and
  /// the death was not seen yet): it is cleared away, `clear` resets the
  /// language's state, and a new worker takes its place; the execution runs
  /// in it and reports the state as lost.
  pub async fn replace_dead<'a>(
    &self,
    mut slot: MutexGuard<'a, Slot<S>>,
    w: Worker,
    st: Option<ExitStatus>,
    boot: &impl Boot<S>,
    clear: impl FnOnce(&mut S),
    mut entry: Entry,
  ) -> Result<Entered<'a, S>, ExecError> {
    self.lost(&mut slot, w, st, false, closed_error).await;
    clear(&mut slot.state);
    entry.lost_idle = true;
    self.ready_worker(slot, boot, entry).await
  }

  /// Hand the slot and the queue on, then finish the streams.
  pub async fn finish<O: OutputSink, E: OutputSink>(
    slot: MutexGuard<'_, Slot<S>>,
    turn: Turn,
    out: Capture<O>,
    err: Capture<E>,
  ) -> Streams {
    drop(slot);
    drop(turn);
    Streams::finish(out, err).await
  }

  /// A fresh worker after every earlier turn: `clear` resets the language's
  /// state first.
  pub async fn reset(
    &self,
    mut turn: Turn,
    boot: &impl Boot<S>,
    clear: impl FnOnce(&mut S),
  ) -> Result<(), ExecError> {
    if !turn.ready(&self.closing).await || self.closing.is_cancelled() {
      return Err(closed_error());
    }
    let mut slot = self.slot.lock().await;
    if let Some(w) = slot.worker.take() {
      w.shutdown(Duration::ZERO).await;
    }
    self.gone();
    slot.lost = false;
    clear(&mut slot.state);
    boot.boot(&mut slot).await
  }

  /// End the worker and everything it started; queued and later calls fail
  /// with ECANCELED.
  pub async fn close(&self) {
    self.closing.cancel();
    let mut slot = self.slot.lock().await;
    if let Some(w) = slot.worker.take() {
      w.shutdown(Duration::from_millis(500)).await;
    }
    self.gone();
  }
}

/// The init code ended the worker (or timed out): what is left is killed;
/// ELIMIT when a resource limit was the cause, else the exit status.
pub(crate) async fn init_ended(
  w: &mut Worker,
  st: Option<ExitStatus>,
  what: &str,
) -> Result<Option<ExitStatus>, ExecError> {
  let st = w.kill().await.or(st);
  match w.limit_error(st) {
    Some(e) => Err(ExecError::new(
      ErrorCode::ELIMIT,
      format!("{what} did not complete: {}", e.what),
    )),
    None => Ok(st),
  }
}

/// `initCode did not complete within the startupTimeout of 1s` (TIMEOUT).
pub(crate) fn init_timeout(what: &str, limit: Duration) -> ExecError {
  ExecError::new(
    ErrorCode::TIMEOUT,
    format!(
      "{what} did not complete within the startupTimeout of {}",
      format_duration(limit)
    ),
  )
}

/// The error of a call to a session that is closed (or closes under it).
pub(crate) fn closed_error() -> ExecError {
  ExecError::new(ErrorCode::ECANCELED, "the session is closed")
}

/// `exit code`, `signal` of a worker that ended.
pub(crate) fn exit_info(st: Option<ExitStatus>) -> (Option<i32>, Option<String>) {
  match st {
    Some(st) => {
      let (code, sig) = decode_status(st);
      (Some(code), sig)
    }
    None => (None, None),
  }
}

impl<S> Drop for Engine<S> {
  fn drop(&mut self) {
    let pid = self.pid.load(Ordering::Relaxed);
    if pid > 0 {
      super::worker::kill_now(pid);
    }
  }
}
