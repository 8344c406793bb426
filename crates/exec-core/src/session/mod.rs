//! Persistent sessions: one long-lived interpreter (Python) or shell (bash)
//! whose state survives from one execution to the next.
//!
//! The parts, bottom to top:
//! - `worker`: the interpreter or shell process (spawn, limits, kill);
//! - `channel`: its control socket and output pipes (message framing,
//!   output pumping, the bounded drain after its exit);
//! - `queue`: one execution at a time in call order, and which execution
//!   `interrupt()` reaches;
//! - `engine`: the worker slot (start, restart, reset, close) and one
//!   request followed to its end; `capture`: an execution's output;
//! - `python` and `shell`: the languages (their protocol, timeout
//!   escalation and results).
//!
//! The control channel is a socketpair given to the worker as its stdin. The
//! worker moves it off the way of the code it runs (the Python driver dups it
//! to a private close-on-exec fd and puts /dev/null on fd 0; bash keeps reading
//! commands from it but runs each one with `</dev/null`). Requests and
//! completion messages travel on it, never in stdout/stderr, so nothing a
//! program prints can fake or hide a completion. Why a socketpair on fd 0:
//! `std::process::Command` places it with `posix_spawn` file actions (no
//! `pre_exec`, no fork), it is created close-on-exec so no concurrent spawn in
//! another thread can inherit it, it needs no path in the filesystem, and one
//! descriptor carries both directions.
//!
//! Invariants:
//! - Completion is a message on that channel; output read from the pipes
//!   before the message (and everything already in the pipes when it
//!   arrives, drained without blocking) belongs to the execution that ends.
//! - One execution runs at a time, in call order; an interrupt reaches only
//!   the execution its caller sees running, never the next one.
//! - A worker that is lost (died, killed by a timeout or a limit) takes its
//!   whole tree with it, and the next execution starts a new one, reported
//!   as `restarted` and `state_lost`.

mod capture;
mod channel;
mod engine;
mod python;
mod queue;
mod shell;
mod worker;

use std::time::Duration;

pub use python::{CellResult, PythonException, PythonOptions, PythonSession};
pub use queue::Ticket;
pub use shell::{CommandResult, ShellOptions, ShellSession};

/// How an execution in a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
  /// Python: the cell raised nothing. Shell: the command exited 0.
  Ok,
  /// Python: the cell raised. Shell: the command exited non-zero.
  Error,
  /// `interrupt()` stopped it; the session's state is kept.
  Interrupted,
  /// The timeout ran out (see `state_lost`).
  Timeout,
  /// The interpreter or shell itself ended (the next execution starts a new one).
  Died,
}

impl SessionStatus {
  pub fn as_str(&self) -> &'static str {
    match self {
      SessionStatus::Ok => "ok",
      SessionStatus::Error => "error",
      SessionStatus::Interrupted => "interrupted",
      SessionStatus::Timeout => "timeout",
      SessionStatus::Died => "died",
    }
  }
}

/// Per-execution settings.
#[derive(Debug, Clone)]
pub struct ExecuteOptions {
  /// Interrupt after this long (`None`: never).
  pub timeout: Option<Duration>,
  /// Bytes kept per stream (head + tail).
  pub max_output: usize,
}

impl Default for ExecuteOptions {
  fn default() -> Self {
    ExecuteOptions {
      timeout: Some(Duration::from_secs(30)),
      max_output: 1024 * 1024,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn status_names() {
    assert_eq!(SessionStatus::Interrupted.as_str(), "interrupted");
    assert_eq!(SessionStatus::Died.as_str(), "died");
  }
}

#[cfg(test)]
mod tests_sessions;
