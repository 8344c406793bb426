//! A command in the foreground: spawned with its output into the capture and
//! supervised on its own task ([`Started`]), waited for until its timeout
//! (what it left running adopted), and its result.

use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::adopt::{adopt_left, kill_left_now, Inherited};
use super::logs::{close_log_after, shown, take_streams};
use super::runner::guard;
use super::CommandRunner;
use crate::command::format::{format_finished, format_left_running};
use crate::command::offload::{lock, CaptureSink, SharedCapture, Stream};
use crate::command::truncate::OutputLimits;
use crate::command::{CommandReport, CommandSpec};
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::{Execution, LeftRunning, ProcessSpec, RunOutcome, RunPolicy};

pub(super) fn joined(r: Result<LeftRunning, tokio::task::JoinError>, pid: u32) -> LeftRunning {
  r.unwrap_or_else(|e| LeftRunning::ended(failed_outcome(pid, e), String::new()))
}

fn failed_outcome(pid: u32, e: tokio::task::JoinError) -> RunOutcome {
  RunOutcome {
    pid,
    exit_code: -1,
    signal: None,
    timed_out: false,
    canceled: false,
    duration: Duration::ZERO,
    stdout_bytes: 0,
    stderr_bytes: 0,
    error: Some(ExecError::new(
      ErrorCode::EIO,
      format!("the supervisor of pid {pid} failed: {e}"),
    )),
    sandbox: None,
  }
}

/// A command started by [`CommandRunner::run`], supervised on its own task.
pub(super) struct Started {
  pub(super) pid: u32,
  pub(super) cancel: CancellationToken,
  pub(super) handle: JoinHandle<LeftRunning>,
  pub(super) at: Instant,
  pub(super) wall: SystemTime,
}

impl CommandRunner {
  /// Spawn `spec` with both streams into `capture` and supervise it on its
  /// own task (`adopt`: what it leaves running is handed back, not killed).
  pub(super) fn spawn_supervised(
    &self,
    spec: &ProcessSpec,
    capture: &SharedCapture,
    adopt: bool,
    script: Option<tempfile::TempPath>,
  ) -> Result<Started, ExecError> {
    let (at, wall) = (Instant::now(), SystemTime::now());
    let owner = self.inner.config.owner;
    let sink = |stream| CaptureSink {
      capture: capture.clone(),
      stream,
    };
    #[cfg(unix)]
    let exec = Execution::spawn(spec, owner, sink(Stream::Stdout), sink(Stream::Stderr))?;
    // Windows: pumps that answer a catch-up (they read what the pipe holds),
    // so that a shell that exits leaving processes behind (which keep the
    // pipes open) has its last output in its result
    #[cfg(windows)]
    let exec =
      Execution::spawn_with_catchup(spec, owner, sink(Stream::Stdout), sink(Stream::Stderr), &[])?;
    let pid = exec.pid();
    let cancel = CancellationToken::new();
    let policy = RunPolicy {
      drain: Duration::from_millis(100),
      cleanup_group_on_exit: true,
      owner,
    };
    let wait_cancel = cancel.clone();
    let handle: JoinHandle<LeftRunning> = tokio::spawn(async move {
      // a long command's file lives as long as its shell
      let _script = script;
      if adopt {
        exec.wait_leaving_tree(&policy, &wait_cancel).await
      } else {
        let mark = exec.mark().to_owned();
        LeftRunning::ended(exec.wait(&policy, &wait_cancel).await.outcome, mark)
      }
    });
    Ok(Started {
      pid,
      cancel,
      handle,
      at,
      wall,
    })
  }

  /// Wait for the command until its timeout; its result if it ended, with
  /// what it left running adopted.
  pub(super) async fn wait_foreground(
    &self,
    run: &mut Started,
    command: &str,
    capture: &SharedCapture,
    opts: &CommandSpec,
  ) -> Option<CommandReport> {
    let (pid, limits) = (run.pid, opts.limits());
    guard(&self.inner.foreground).insert(pid, run.cancel.clone());
    let caller = opts.cancel.clone().unwrap_or_default();
    let wait = async {
      // the timeout moves it to the background: the wait ends, the run goes on
      match opts.run.timeout {
        None => Some(joined((&mut run.handle).await, pid)),
        Some(t) => tokio::time::timeout_at(run.at + t, &mut run.handle)
          .await
          .ok()
          .map(|r| joined(r, pid)),
      }
    };
    let finished = tokio::select! {
      f = wait => f,
      _ = caller.cancelled() => {
        // the caller gave up on it: the whole tree goes, nothing is adopted
        run.cancel.cancel();
        let mut left = joined((&mut run.handle).await, pid);
        // bash may have exited just before: what it left goes too
        kill_left_now(&mut left);
        Some(left)
      }
    };
    guard(&self.inner.foreground).remove(&pid);
    let mut left = finished?;
    let adopted = adopt_left(
      &self.inner,
      &mut left,
      command,
      capture,
      Inherited::of(opts),
    )
    .await;
    let keep_log = !adopted.is_empty();
    let mut res = finish_foreground(left.outcome, capture, limits, run.at.elapsed(), keep_log);
    if keep_log {
      res.text.push_str("\n\n");
      res
        .text
        .push_str(&format_left_running(&adopted, &res.log, opts.vocabulary));
      res.adopted = adopted;
      close_log_after(capture, left.pumps);
    }
    Some(res)
  }
}

/// The error of a run stopped for a resource limit.
pub(super) fn limit_error(o: &RunOutcome) -> Option<&ExecError> {
  o.error.as_ref().filter(|e| e.code == ErrorCode::ELIMIT)
}

fn finish_foreground(
  mut outcome: RunOutcome,
  capture: &SharedCapture,
  limits: OutputLimits,
  duration: Duration,
  keep_log: bool,
) -> CommandReport {
  let (stdout, stderr) = take_streams(capture, limits, false);
  let cut = stdout.truncation.truncated()
    || stderr.truncation.truncated()
    || stdout.binary
    || stderr.binary;
  let log = if keep_log {
    // still written to by what the command left running
    lock(capture).log.status(true)
  } else {
    lock(capture).log.finish(cut)
  };
  let mut text = format_finished(
    &shown(&stdout, &stderr),
    outcome.exit_code,
    outcome.signal.as_deref(),
    limits.max_bytes,
    &log,
  );
  if let Some(e) = limit_error(&outcome) {
    text.push_str("\n\n");
    text.push_str(&e.message());
  }
  outcome.judge_sandbox(&[&stderr.text, &stdout.text]);
  if let Some(line) = outcome.sandbox.as_ref().and_then(|r| r.text_line()) {
    text.push_str("\n\n");
    text.push_str(&line);
  }
  CommandReport {
    pid: outcome.pid,
    stdout,
    stderr,
    exit_code: Some(outcome.exit_code),
    signal: outcome.signal,
    timed_out: false,
    log,
    background: None,
    text,
    is_error: outcome.exit_code != 0,
    duration,
    error: outcome.error,
    adopted: Vec::new(),
    sandbox: outcome.sandbox,
  }
}
