//! How a run ended: the exit phase (the child's exit, or the timeout, a
//! cancel or a resource limit, which kill the tree: [`kill_sequence`]), the
//! status decoded ([`decode_status`]) and explained (a limit, a timeout's
//! 124 and its message, a cancel) in the [`RunOutcome`].

#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
#[cfg(unix)]
use std::process::ExitStatus;
use std::time::Duration;

use tokio::time::Instant;
#[cfg(unix)]
use tokio_util::sync::CancellationToken;

#[cfg(unix)]
use super::{Execution, OutputSink};
#[cfg(unix)]
use crate::error::ErrorCode;
use crate::error::ExecError;
#[cfg(unix)]
use crate::process::child::Child;
#[cfg(unix)]
use crate::process::registry;
#[cfg(unix)]
use crate::process::ProcessTree;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
  pub pid: u32,
  /// The exit code; 128+N when a signal ended the child; 124 on timeout.
  pub exit_code: i32,
  /// The signal that ended the child, e.g. `SIGTERM`.
  pub signal: Option<String>,
  pub timed_out: bool,
  pub canceled: bool,
  pub duration: Duration,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// TIMEOUT or ECANCELED; other errors are added by callers.
  pub error: Option<ExecError>,
  /// A sandboxed run: how it was applied; callers that hold the output
  /// judge denials with [`RunOutcome::judge_sandbox`].
  pub sandbox: Option<crate::process::sandbox::SandboxReport>,
}

impl RunOutcome {
  /// Judge whether a sandbox denial explains the run's failure, from its
  /// output (stderr first).
  pub fn judge_sandbox(&mut self, texts: &[&str]) {
    if let Some(r) = &mut self.sandbox {
      r.judge(self.exit_code, self.signal.as_deref(), texts);
    }
  }
}

pub struct Finished<O, E> {
  pub outcome: RunOutcome,
  pub stdout: O,
  pub stderr: E,
}

#[cfg(unix)]
impl<O: OutputSink, E: OutputSink> Execution<O, E> {
  /// Wait for the child's exit, the timeout, `cancel` or a resource limit
  /// (the last three kill the group and the marked tree).
  pub(super) async fn exit_phase(&mut self, cancel: &CancellationToken) -> ExitPhase {
    let pgid = self.pid as i32;
    let mut timed_out = false;
    let mut canceled = false;
    let mut limit_hit: Option<ExecError> = None;
    let deadline = self.run.timeout.map(|t| self.started + t);
    let status = tokio::select! {
      st = self.child.wait() => st,
      e = self.guard.watch() => {
        limit_hit = Some(e);
        // no grace for a tree over its limit
        self.guard.kill_tree(pgid);
        kill_sequence(&mut self.child, pgid, &self.mark, Duration::ZERO).await
      }
      _ = sleep_until_opt(deadline) => {
        timed_out = true;
        kill_sequence(&mut self.child, pgid, &self.mark, self.run.kill_grace).await
      }
      _ = cancel.cancelled() => {
        canceled = true;
        kill_sequence(&mut self.child, pgid, &self.mark, self.run.kill_grace).await
      }
    };
    // a guard shared with a session's worker is released when both let go
    if let Some(g) = std::sync::Arc::get_mut(&mut self.guard) {
      g.release();
    }
    ExitPhase {
      status,
      timed_out,
      canceled,
      limit_hit,
    }
  }

  /// The outcome once the exit phase and the drain are over.
  pub(super) fn outcome_of(
    &mut self,
    phase: ExitPhase,
    stdout_bytes: u64,
    stderr_bytes: u64,
  ) -> RunOutcome {
    if let Some(t) = self.input_task.take() {
      t.abort();
    }
    let ExitPhase {
      status,
      timed_out,
      canceled,
      mut limit_hit,
    } = phase;
    let (mut exit_code, signal) = match status {
      Ok(st) => decode_status(st),
      Err(_) => (-1, None),
    };
    let mut error = None;
    if limit_hit.is_none() {
      limit_hit = self
        .guard
        .explain_exit(signal.as_deref(), exit_code, timed_out || canceled);
    }
    if let Some(e) = limit_hit {
      error = Some(e);
    } else if timed_out {
      exit_code = 124;
      let label = self.run.timeout.map(format_duration).unwrap_or_default();
      error = Some(ExecError::new(
        ErrorCode::TIMEOUT,
        format!("Process timeout after {label}"),
      ));
    } else if canceled {
      error = Some(ExecError::new(ErrorCode::ECANCELED, "Process canceled"));
    }
    RunOutcome {
      pid: self.pid,
      exit_code,
      signal,
      timed_out,
      canceled,
      duration: self.started.elapsed(),
      stdout_bytes,
      stderr_bytes,
      error,
      sandbox: self.sandbox.clone(),
    }
  }
}

#[cfg(unix)]
/// How the wait for the child's exit ended.
pub(super) struct ExitPhase {
  status: std::io::Result<ExitStatus>,
  timed_out: bool,
  canceled: bool,
  limit_hit: Option<ExecError>,
}

#[cfg(unix)]
impl ExitPhase {
  /// The run was killed (timeout, cancel, a limit), not ended on its own.
  pub(super) fn ended_by_us(&self) -> bool {
    self.timed_out || self.canceled || self.limit_hit.is_some()
  }

  /// The child's status, as the system gave it (`None`: it could not be had).
  pub(super) fn status(&self) -> Option<ExitStatus> {
    self.status.as_ref().ok().copied()
  }
}

pub(super) async fn sleep_until_opt(deadline: Option<Instant>) {
  match deadline {
    Some(d) => tokio::time::sleep_until(d).await,
    None => std::future::pending().await,
  }
}

#[cfg(unix)]
/// SIGTERM the tree (the child itself, its marked descendants, the group:
/// [`ProcessTree`]'s order); SIGKILL after `grace` ([`ProcessTree::stop`]).
pub async fn kill_sequence(
  child: &mut Child,
  pgid: i32,
  mark: &str,
  grace: Duration,
) -> std::io::Result<ExitStatus> {
  // the child is ours and not reaped until `wait` returns: its pid is its
  // own, and the tree's SIGKILL reaches it first
  let tree = ProcessTree::new(pgid, mark);
  tree.stop(grace, true, child.wait()).await.0
}

#[cfg(unix)]
/// (exit code, signal name): a signal death is 128+N.
pub fn decode_status(st: ExitStatus) -> (i32, Option<String>) {
  if let Some(code) = st.code() {
    (code, None)
  } else if let Some(sig) = st.signal() {
    (128 + sig, Some(registry::signal_name(sig)))
  } else {
    (-1, None)
  }
}

/// `1000ms` -> `1s`, `1500ms` -> `1.5s`.
pub fn format_duration(d: Duration) -> String {
  let ms = d.as_millis();
  if ms.is_multiple_of(1000) {
    format!("{}s", ms / 1000)
  } else {
    let s = format!("{:.3}", ms as f64 / 1000.0);
    format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
  }
}
