//! Running a process: spawn in its own group, pump its output on the runtime,
//! enforce the timeout and cancellation, kill the whole group, settle on the
//! child's exit plus a bounded drain (never on a pipe a grandchild holds open).
//!
//! One file per part of a run (this one: what the module exports, [`run`]):
//! - `spec`: what to run ([`ProcessSpec`], [`StdinMode`]) and how it is
//!   supervised ([`RunPolicy`]);
//! - `sink`: where a stream's bytes go ([`OutputSink`], [`Discard`]);
//! - `execution`: the [`Execution`] and its spawn; `launch`: how its child is
//!   started (the addon's own clone on Linux, `posix_spawn` elsewhere);
//! - `pump`: the loop that reads a pipe into its sink (skimming);
//!   `catchup`: its catch-up barrier, which the Windows pump of a session's
//!   worker answers too;
//! - `exit`: the exit phase (the child's exit, the timeout, a cancel, a
//!   limit), the status decoded and explained in the [`RunOutcome`];
//! - `drain`: after the exit: the tree's sweep, the bounded drain, what a run
//!   leaves running ([`LeftRunning`]);
//! - `tests`.
//!
//! Windows: `../supervise_windows.rs`, the same run with its tree in a Job
//! Object.

mod catchup;
mod drain;
#[cfg(unix)]
mod execution;
mod exit;
#[cfg(unix)]
mod launch;
#[cfg(unix)]
mod pump;
mod sink;
mod spec;

pub(crate) use catchup::Catchup;
pub use drain::LeftRunning;
#[cfg(unix)]
pub use execution::Execution;
#[cfg(unix)]
pub use exit::{decode_status, kill_sequence};
pub use exit::{format_duration, Finished, RunOutcome};
pub use sink::{Discard, OutputSink};
pub use spec::{ProcessSpec, RunPolicy, StdinMode};

#[cfg(unix)]
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, ExecError};

/// The error of a run canceled before it started (an `AbortSignal` that was
/// already aborted): nothing was spawned.
pub fn canceled_before_start() -> ExecError {
  ExecError::new(
    ErrorCode::ECANCELED,
    "canceled before it started: the signal was already aborted, nothing ran",
  )
}

// Windows: the same run, its tree in a Job Object (issue 25)
#[cfg(windows)]
#[path = "../supervise_windows.rs"]
mod windows;
#[cfg(windows)]
pub(crate) use windows::ask_to_end;
#[cfg(windows)]
pub(crate) use windows::job_limit_error;
#[cfg(windows)]
pub use windows::{decode_status, run, Execution};

#[cfg(unix)]
/// Spawn and wait; a `cancel` already cancelled spawns nothing
/// ([`canceled_before_start`]).
pub async fn run<O: OutputSink, E: OutputSink>(
  spec: &ProcessSpec,
  policy: &RunPolicy,
  stdout: O,
  stderr: E,
  cancel: &CancellationToken,
) -> Result<Finished<O, E>, ExecError> {
  if cancel.is_cancelled() {
    return Err(canceled_before_start());
  }
  let exec = Execution::spawn_waited(spec, policy.owner, stdout, stderr)?;
  Ok(exec.wait(policy, cancel).await)
}

#[cfg(unix)]
#[cfg(test)]
mod tests;
