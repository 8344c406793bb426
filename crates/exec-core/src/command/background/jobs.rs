//! The background jobs of a runner: a command still running at its timeout
//! (or started in the background) handed over to a job ([`BgProc`]), and
//! `check`, `kill` and `list` ([`CheckResult`], [`BackgroundInfo`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::adopt::{adopt_left, Inherited};
use super::foreground::{joined, limit_error, Started};
use super::logs::{close_log_after, shown, take_streams};
use super::runner::guard;
use super::CommandRunner;
use crate::command::format::{
  format_backgrounded, format_check, format_left_running, ProcessState, Vocabulary,
};
use crate::command::offload::{lock, LogStatus, SharedCapture};
use crate::command::truncate::OutputLimits;
use crate::command::{BackgroundRef, CommandReport, CommandSpec, StreamOutput};
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::RunOutcome;

/// The state of a background process at a check or a kill.
#[derive(Debug, Clone)]
pub struct CheckResult {
  pub pid: u32,
  pub running: bool,
  /// `None` while running.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// Ended by a kill of the runner.
  pub killed: bool,
  /// Output since the last check (bounded by the same limits).
  pub stdout: StreamOutput,
  pub stderr: StreamOutput,
  pub log: LogStatus,
  pub text: String,
  /// Exited with a non-zero code on its own.
  pub is_error: bool,
  /// ELIMIT when a resource limit stopped it.
  pub error: Option<ExecError>,
  /// It runs and is blocked reading a terminal or a pipe (see
  /// [`crate::platform::awaiting_input`]).
  pub awaiting_input: bool,
}

/// One entry of [`CommandRunner::list`].
#[derive(Debug, Clone)]
pub struct BackgroundInfo {
  pub pid: u32,
  pub command: String,
  pub running: bool,
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  pub killed: bool,
  pub log: LogStatus,
  pub started: SystemTime,
  /// How long it ran (so far).
  pub runtime: Duration,
}

pub(super) struct BgProc {
  pub(super) pid: u32,
  pub(super) command: String,
  pub(super) started: SystemTime,
  pub(super) started_at: Instant,
  pub(super) capture: SharedCapture,
  pub(super) limits: OutputLimits,
  pub(super) cancel: CancellationToken,
  pub(super) done: watch::Receiver<Option<(RunOutcome, Instant)>>,
  /// Left running by a command and adopted: its exit code cannot be known.
  pub(super) adopted: bool,
  /// What this (background) command left running when it exited, reported
  /// once by the next check: (pid, command line).
  pub(super) left: Mutex<Vec<(u32, String)>>,
  /// Whose words its texts use.
  pub(super) vocabulary: Vocabulary,
}

impl BgProc {
  pub(super) fn outcome(&self) -> Option<(RunOutcome, Instant)> {
    self.done.borrow().clone()
  }
}

fn no_such_process(pid: u32) -> ExecError {
  ExecError::new(
    ErrorCode::ESRCH,
    format!("no background process with pid {pid} in this runner"),
  )
}

impl CommandRunner {
  /// Make the running command a background job of the runner: the
  /// supervisor keeps pumping into the window and the log; the answer says
  /// so, with the output so far.
  pub(super) fn to_background(
    &self,
    run: Started,
    command: &str,
    capture: SharedCapture,
    opts: &CommandSpec,
  ) -> CommandReport {
    let (pid, from) = (run.pid, Inherited::of(opts));
    let limits = from.limits;
    let (stdout, stderr) = take_streams(&capture, limits, true);
    let log = lock(&capture).log.status(true);
    let (tx, rx) = watch::channel(None);
    let proc = Arc::new(BgProc {
      pid,
      command: command.to_owned(),
      started: run.wall,
      started_at: run.at,
      capture: capture.clone(),
      limits,
      cancel: run.cancel.clone(),
      done: rx,
      adopted: false,
      left: Mutex::new(Vec::new()),
      vocabulary: opts.vocabulary,
    });
    guard(&self.inner.procs).insert(pid, proc.clone());
    if self.is_closed() {
      run.cancel.cancel();
    }
    let weak = Arc::downgrade(&self.inner);
    let handle = run.handle;
    let command_owned = command.to_owned();
    tokio::spawn(async move {
      let mut left = joined(handle.await, pid);
      let adopted = match weak.upgrade() {
        Some(inner) => adopt_left(&inner, &mut left, &command_owned, &capture, from).await,
        None => Vec::new(),
      };
      if adopted.is_empty() {
        lock(&capture).log.finish(true);
      } else {
        *guard(&proc.left) = adopted;
        close_log_after(&capture, left.pumps);
      }
      let _ = tx.send(Some((left.outcome, Instant::now())));
    });
    let after = if opts.background {
      None
    } else {
      opts.run.timeout
    };
    let text = format_backgrounded(
      pid,
      after,
      &shown(&stdout, &stderr),
      limits.max_bytes,
      &log,
      from.vocabulary,
    );
    CommandReport {
      pid,
      stdout,
      stderr,
      exit_code: None,
      signal: None,
      timed_out: !opts.background,
      log: log.clone(),
      background: Some(BackgroundRef { pid, log }),
      text,
      is_error: false,
      duration: run.at.elapsed(),
      error: None,
      adopted: Vec::new(),
      sandbox: None,
    }
  }

  fn get(&self, pid: u32) -> Result<Arc<BgProc>, ExecError> {
    guard(&self.inner.procs)
      .get(&pid)
      .cloned()
      .ok_or_else(|| no_such_process(pid))
  }

  /// Whether a background process is running, and its output since the last check.
  pub fn check(&self, pid: u32) -> Result<CheckResult, ExecError> {
    let p = self.get(pid)?;
    Ok(check_result(&p))
  }

  /// Terminate the whole group of a background process (SIGTERM, SIGKILL
  /// after the grace period) and return its final output. Killing a process
  /// that already exited returns its final state.
  pub async fn kill(&self, pid: u32) -> Result<CheckResult, ExecError> {
    let p = self.get(pid)?;
    kill_proc(&p).await;
    Ok(check_result(&p))
  }

  /// Every background process of this runner, oldest first.
  pub fn list(&self) -> Vec<BackgroundInfo> {
    let mut all: Vec<Arc<BgProc>> = guard(&self.inner.procs).values().cloned().collect();
    all.sort_by_key(|p| p.started_at);
    all
      .iter()
      .map(|p| {
        let outcome = p.outcome();
        let log = lock(&p.capture).log.status(false);
        let (running, exit_code, signal, killed, runtime) = match &outcome {
          None => (true, None, None, false, p.started_at.elapsed()),
          Some((o, at)) => (
            false,
            Some(o.exit_code).filter(|_| !p.adopted),
            o.signal.clone(),
            o.canceled,
            at.saturating_duration_since(p.started_at),
          ),
        };
        BackgroundInfo {
          pid: p.pid,
          command: p.command.clone(),
          running,
          exit_code,
          signal,
          killed,
          log,
          started: p.started,
          runtime,
        }
      })
      .collect()
  }
}

pub(super) async fn kill_proc(p: &BgProc) {
  if p.outcome().is_none() {
    p.cancel.cancel();
  }
  let mut rx = p.done.clone();
  let _ = rx.wait_for(|o| o.is_some()).await;
}

fn check_result(p: &BgProc) -> CheckResult {
  // the state first: once exited, the pumps are done and the take is final
  let outcome = p.outcome();
  let (stdout, stderr) = take_streams(&p.capture, p.limits, outcome.is_none());
  let log = lock(&p.capture).log.status(false);
  let state = match &outcome {
    None => ProcessState::Running,
    Some((o, _)) if p.adopted => ProcessState::Gone {
      signal: o.signal.clone(),
      killed: o.canceled,
    },
    Some((o, _)) => ProcessState::Exited {
      code: o.exit_code,
      signal: o.signal.clone(),
      killed: o.canceled,
    },
  };
  let mut text = format_check(
    p.pid,
    &state,
    &shown(&stdout, &stderr),
    p.limits.max_bytes,
    &log,
    p.vocabulary,
  );
  let (exit_code, signal, killed) = match &outcome {
    None => (None, None, false),
    Some((o, _)) => (
      Some(o.exit_code).filter(|_| !p.adopted),
      o.signal.clone(),
      o.canceled,
    ),
  };
  let error = outcome.as_ref().and_then(|(o, _)| limit_error(o)).cloned();
  if let Some(e) = &error {
    text.push_str("\n\n");
    text.push_str(&e.message());
  }
  let left = std::mem::take(&mut *guard(&p.left));
  if !left.is_empty() {
    text.push_str("\n\n");
    text.push_str(&format_left_running(&left, &log, p.vocabulary));
  }
  let awaiting_input = outcome.is_none() && crate::platform::awaiting_input(p.pid as i32);
  if awaiting_input {
    text.push_str(&format!(
      "\n\n[waiting for input: process {} is blocked reading its input, which this runner does not feed; {}]",
      p.pid,
      p.vocabulary.interactive_hint()
    ));
  }
  CheckResult {
    awaiting_input,
    pid: p.pid,
    running: outcome.is_none(),
    exit_code,
    signal,
    killed,
    is_error: error.is_some() || (!killed && exit_code.is_some_and(|c| c != 0)),
    error,
    stdout,
    stderr,
    log,
    text,
  }
}
