//! Persistent sessions: one long-lived interpreter (Python, Node) or shell
//! (bash) whose state survives from one execution to the next.
//!
//! The parts, bottom to top:
//! - `worker`: the interpreter or shell process (spawn, limits, kill);
//! - `channel`: its control socket and its output (message framing, the
//!   catch-up before a message); `output`: the worker's stdout and stderr,
//!   pumped by its `Execution` (the run pump, the exit phase with the limit
//!   watchdog, the bounded drain after its exit) into relays that the
//!   request that runs takes from;
//! - `queue`: one execution at a time in call order, and which execution
//!   `interrupt()` reaches;
//! - `engine`: the worker slot (start, restart, reset, close) and one
//!   request followed to its end; `capture`: an execution's output;
//! - `driver`: the JSON-line driver protocol Python and Node share (one
//!   `DriverSession`: results, MIME bundles, history, timeout escalation);
//!   `python` and `node`: their start options (and Node's cell rewrite);
//!   `display`: MIME bundles and their cap; `notebook`: history -> nbformat;
//! - `shell`: bash (its own protocol, timeout escalation and results).
//!
//! On Windows (`worker_windows.rs`) the channel is a loopback connection the
//! worker makes, and an interrupt is a control message: see there. Its
//! output goes the same way (the Windows `Execution`, whose pumps then read
//! what the pipe holds by polling, to answer the same catch-up barrier). Only
//! Python runs there yet (bash and Node read their channel from fd 0).
//!
//! The control channel is a socketpair given to the worker as its stdin. The
//! worker moves it off the way of the code it runs (the Python driver dups it
//! to a private close-on-exec fd and puts /dev/null on fd 0; Node cannot dup,
//! so its driver reads fd 0 itself and gives /dev/null to `process.stdin` and
//! to every child process that would inherit fd 0; bash keeps reading
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
mod cell;
mod channel;
pub mod display;
mod driver;
mod engine;
mod lifecycle;
mod node;
pub mod notebook;
mod output;
mod python;
mod queue;
#[cfg(unix)]
mod shell;
#[cfg(unix)]
mod worker;
// Windows: the worker in a Job Object, its channel a loopback connection,
// its interrupt a control message (issue 25)
#[cfg(windows)]
#[path = "worker_windows.rs"]
mod worker;

use crate::error::ExecError;
use crate::process::{RunFields, RunOptions};

pub use capture::OutputPiece;
pub use cell::{CellException, CellResult, DriverKind, DriverSpec};
pub use display::{Bundle, DisplaySink, NoDisplay};
pub use driver::{Driver, DriverSession};
pub use lifecycle::{Kind, Session};
pub use node::{prepare_cell, NodeOptions};
pub use python::PythonOptions;
pub use queue::Ticket;

/// A persistent Python interpreter (`session/python_driver.py`).
pub type PythonSession = DriverSession;
/// A persistent Node.js interpreter (`session/node_driver.mjs`).
pub type NodeSession = DriverSession;
/// An exception raised by a Python cell.
pub type PythonException = CellException;
#[cfg(unix)]
pub use shell::{ansi_c_quote, Shell, ShellOptions, ShellResult, ShellSession};

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

/// The language of a NodeSession cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CellLanguage {
  #[default]
  JavaScript,
  /// Types stripped (enums and namespaces transformed) before it runs.
  TypeScript,
}

impl CellLanguage {
  /// `'javascript'` / `'typescript'` (also `js`, `ts`), or what the message
  /// says instead (the caller names the option).
  pub fn parse(s: &str) -> Result<Self, String> {
    match s {
      "javascript" | "js" => Ok(CellLanguage::JavaScript),
      "typescript" | "ts" => Ok(CellLanguage::TypeScript),
      other => Err(format!(
        "must be 'javascript' or 'typescript', got '{other}'"
      )),
    }
  }

  pub fn as_str(&self) -> &'static str {
    match self {
      CellLanguage::JavaScript => "javascript",
      CellLanguage::TypeScript => "typescript",
    }
  }
}

/// Per-execution settings.
#[derive(Debug, Clone)]
pub struct CellOptions {
  /// This execution's timeout (`Some(None)`: none), kill grace and bytes
  /// kept per stream (head + tail), over the session's `run` (the defaults
  /// of each request: 30 s, 2 s, 1 MiB). An execution has no stdin: an
  /// `input` is `EINVAL`.
  pub run: RunFields,
  /// NodeSession: the cell's language (default JavaScript); others ignore it.
  pub language: Option<CellLanguage>,
  /// Bytes a display bundle may take (see [`display::cap_bundle`]).
  pub max_display_bytes: usize,
}

impl Default for CellOptions {
  /// The session's run options, JavaScript, 8 MiB per bundle.
  fn default() -> Self {
    CellOptions {
      run: RunFields::default(),
      language: None,
      max_display_bytes: display::DEFAULT_MAX_DISPLAY_BYTES,
    }
  }
}

impl CellOptions {
  /// This execution's run options: what it gave over the session's
  /// (`session`). `EINVAL` for an input: nothing would read it.
  pub(crate) fn run_over(&self, session: &RunOptions) -> Result<RunOptions, ExecError> {
    let run = self.run.clone().over(session);
    run.refuse_input("a session's execution")?;
    Ok(run)
  }
}

#[cfg(test)]
mod tests;
