//! After the exit: what is left of the tree swept, the pumps drained (bounded
//! by the policy's `drain`) and their sinks handed back ([`Execution::wait`];
//! without the sweep for a session's worker, whose session ends its tree:
//! [`Execution::follow_owned`]),
//! or, for a command whose marked processes outlive it, those processes left
//! running with the pumps still reading ([`Execution::wait_leaving_tree`],
//! [`LeftRunning`]).

#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
use futures_util::future::maybe_done;
use tokio::task::JoinHandle;
#[cfg(unix)]
use tokio_util::sync::CancellationToken;

#[cfg(unix)]
use super::exit::ExitPhase;
use super::RunOutcome;
#[cfg(unix)]
use super::{Execution, Finished, OutputSink, RunPolicy};
#[cfg(unix)]
use crate::process::marks;
#[cfg(unix)]
use crate::process::registry;
#[cfg(unix)]
use crate::process::ProcessTree;

/// The value of a finished task. A panic goes on up; a task the runtime
/// cancelled (it is shutting down, and this future is dropped with it) has no
/// value to give, so this never completes instead of panicking.
pub(super) async fn joined<T>(r: Result<T, tokio::task::JoinError>) -> T {
  match r {
    Ok(v) => v,
    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
    Err(_) => std::future::pending().await,
  }
}

#[cfg(unix)]
impl<O: OutputSink, E: OutputSink> Execution<O, E> {
  /// Wait for the end: the child's exit (or the timeout, or `cancel`), then the
  /// group cleanup and the drain. The pumps are polled here too, beside the
  /// exit (an inline pump has no task of its own: [`Execution::spawn_waited`]).
  pub async fn wait(mut self, policy: &RunPolicy, cancel: &CancellationToken) -> Finished<O, E> {
    let pgid = self.pid as i32;
    let (out, err) = self.pumps.take().expect("the pumps are drained once");
    let out = maybe_done(out.join());
    let err = maybe_done(err.join());
    tokio::pin!(out, err);
    let phase = {
      let exit = self.exit_phase(cancel);
      tokio::pin!(exit);
      loop {
        tokio::select! {
          biased;
          p = &mut exit => break p,
          _ = out.as_mut(), if out.as_mut().output_mut().is_none() => {}
          _ = err.as_mut(), if err.as_mut().output_mut().is_none() => {}
        }
      }
    };
    crate::trace::at("rt.exited");
    // what is left of the tree (the group, and marked escapees) goes the same way
    if policy.cleanup_group_on_exit || phase.ended_by_us() {
      ProcessTree::new(pgid, &self.mark).terminate_later(policy.owner, self.run.kill_grace);
    } else {
      registry::unregister(pgid);
    }
    crate::trace::at("rt.swept");
    // read until EOF, but no longer than `drain` after the exit (a timer in
    // this future, not a task: no spawn per run; none at all when both pumps
    // ended with the exit, as a short run's do)
    let ended = out.as_mut().output_mut().is_some() && err.as_mut().output_mut().is_some();
    if !ended {
      let both = async {
        out.as_mut().await;
        err.as_mut().await;
      };
      tokio::pin!(both);
      tokio::select! {
        _ = &mut both => {}
        _ = tokio::time::sleep(policy.drain) => {
          self.stop.cancel();
          both.await
        }
      }
    }
    const ENDED: &str = "both pumps were awaited to their end above";
    let (stdout, stdout_bytes) = joined(out.as_mut().take_output().expect(ENDED)).await;
    let (stderr, stderr_bytes) = joined(err.as_mut().take_output().expect(ENDED)).await;
    crate::trace::at("rt.drained");
    Finished {
      outcome: self.outcome_of(phase, stdout_bytes, stderr_bytes),
      stdout,
      stderr,
    }
  }

  /// [`Execution::wait`] for a child whose tree its owner ends and
  /// unregisters itself (a session's worker: what a cell left running stays
  /// until the session clears the worker away): the exit phase (the exit,
  /// or the limit watchdog's kill), `reaped` told at once, then the drain
  /// (bounded by `drain`) and the outcome, with the status as the system
  /// gave it (`None`: it could not be had).
  pub async fn follow_owned(
    mut self,
    drain: Duration,
    cancel: &CancellationToken,
    reaped: impl FnOnce(),
  ) -> (Option<std::process::ExitStatus>, Finished<O, E>) {
    // its pumps read for its whole life, by themselves
    if let Some((out, err)) = self.pumps.take() {
      self.pumps = Some((out.detached(), err.detached()));
    }
    let phase = self.exit_phase(cancel).await;
    reaped();
    let status = phase.status();
    (status, self.settle(phase, drain).await)
  }

  /// After the exit phase: the pumps drained (bounded by `drain`), their
  /// sinks handed back with the outcome.
  async fn settle(mut self, phase: ExitPhase, drain: Duration) -> Finished<O, E> {
    let (out, err) = self.drain(drain).await;
    let (stdout, stdout_bytes) = joined(out).await;
    let (stderr, stderr_bytes) = joined(err).await;
    crate::trace::at("rt.drained");
    Finished {
      outcome: self.outcome_of(phase, stdout_bytes, stderr_bytes),
      stdout,
      stderr,
    }
  }

  /// Like [`Execution::wait`], except that when the child exits on its own
  /// and marked processes of its tree still run, they are left running and
  /// returned (`left`): the pumps keep reading what they write until the
  /// last one closes the pipes (`pumps` ends then). A run that was killed
  /// (timeout, `cancel`, a limit) takes its whole tree down as `wait` does.
  pub async fn wait_leaving_tree(
    mut self,
    policy: &RunPolicy,
    cancel: &CancellationToken,
  ) -> LeftRunning {
    let pgid = self.pid as i32;
    // the pumps go on by themselves here (and after, for what is left)
    if let Some((out, err)) = self.pumps.take() {
      self.pumps = Some((out.detached(), err.detached()));
    }
    let phase = self.exit_phase(cancel).await;
    let left = if phase.ended_by_us() {
      Vec::new()
    } else {
      leftovers(&self.mark, pgid).await
    };
    if left.is_empty() {
      ProcessTree::new(pgid, &self.mark).terminate_later(policy.owner, self.run.kill_grace);
      let (out, err) = self.drain(policy.drain).await;
      let outcome = self.outcome_of(phase, out.map_or(0, |(_, n)| n), err.map_or(0, |(_, n)| n));
      return LeftRunning::ended(outcome, self.mark.clone());
    }
    // what the command wrote before it exited is in the pipes (which the
    // leftovers keep open: no EOF to wait for): the pumps read it before the
    // result is made, so the last lines are not missing from it
    self.catch_up(policy.drain).await;
    // the leftovers are the caller's now; the host's exit still kills them by their mark
    registry::unregister(pgid);
    let (out, err) = self.pumps.take().expect("the pumps are handed out once");
    let outcome = self.outcome_of(phase, 0, 0);
    let pumps = tokio::spawn(async move {
      let _ = out.join().await;
      let _ = err.join().await;
    });
    LeftRunning {
      outcome,
      mark: self.mark.clone(),
      left,
      pumps: Some(pumps),
    }
  }

  /// Have both pumps read what their pipes hold now (bounded by `within`).
  async fn catch_up(&self, within: Duration) {
    let Some((out, err)) = &self.pumps else {
      return;
    };
    super::Catchup::all_within([out.catchup(), err.catchup()], within).await;
  }

  /// Read until EOF, but no longer than `drain` after the exit (a timer in
  /// this future, not a task: no spawn per run).
  async fn drain(&mut self, drain: Duration) -> PumpResults<O, E> {
    let (out, err) = self.pumps.take().expect("the pumps are drained once");
    let pumps = async { (out.join().await, err.join().await) };
    tokio::pin!(pumps);
    tokio::select! {
      r = &mut pumps => r,
      _ = tokio::time::sleep(drain) => {
        self.stop.cancel();
        pumps.await
      }
    }
  }
}

#[cfg(unix)]
type PumpResults<O, E> = (
  Result<(O, u64), tokio::task::JoinError>,
  Result<(E, u64), tokio::task::JoinError>,
);

/// What [`Execution::wait_leaving_tree`] returns.
pub struct LeftRunning {
  pub outcome: RunOutcome,
  /// The run's mark (`EXEC_NATIVE_RUN_ID`), carried by what was left.
  pub mark: String,
  /// Marked processes still running after the child's exit.
  pub left: Vec<i32>,
  /// Ends when the pumps reach EOF (`None`: they already did).
  pub pumps: Option<JoinHandle<()>>,
  /// Windows: the Job Object what was left runs in. It ends them when its
  /// last handle closes, so whoever adopts them holds it.
  #[cfg(windows)]
  pub job: Option<std::sync::Arc<crate::platform::Job>>,
}

impl LeftRunning {
  /// The result of a run that left nothing running.
  pub fn ended(outcome: RunOutcome, mark: String) -> Self {
    LeftRunning {
      outcome,
      mark,
      left: Vec::new(),
      pumps: None,
      #[cfg(windows)]
      job: None,
    }
  }
}

#[cfg(unix)]
/// The marked processes a run left running. One in the middle of an exec
/// (`cmd &` just before the shell exits) has no readable mark yet: look again
/// shortly (up to 100 ms) rather than miss it.
async fn leftovers(mark: &str, first_pid: i32) -> Vec<i32> {
  for _ in 0..20 {
    let left = marks::running_marked_since(mark, first_pid);
    if !left.is_empty() || !marks::marked_or_pending_since(mark, first_pid) {
      return left;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  marks::running_marked_since(mark, first_pid)
}
