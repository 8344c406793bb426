//! Long-lived processes driven step by step: start, write, resize, read (long
//! poll), wait, terminate. Each process keeps a bounded copy of its output
//! (head+tail per stream and an interleaved log for `read`) and reports events
//! with a per-process `seq` to an optional bounded channel.
//!
//! Pipe processes reuse [`Execution`](crate::process::supervise::Execution)
//! (posix_spawn, own process group); PTY processes get a terminal opened by
//! `portable-pty` (session leader with it as controlling terminal; limits
//! applied before exec, as for pipes).
//!
//! This file holds what the manager offers: its settings ([`ManagerConfig`]),
//! what a start asks for ([`StartSpec`]) and the answers ([`WaitResult`],
//! [`Snapshot`], [`ProcessInfo`], [`Started`]), and the [`ProcessManager`].
//! Its parts:
//! - `table`: the table of processes (ids, the limit, expiry, `list`, `close`);
//! - `start`: a start, through a pipe child or a PTY;
//! - `proc`: one process (its state, input, output sink) and the calls on it
//!   (write, resize, wait, read, terminate, snapshot);
//! - `state`: the retained output, the read log and the events of one process;
//! - `tree`: how a managed tree is asked to end and killed; `pty`: the PTY's
//!   spawn and writes.

mod proc;
#[cfg(unix)]
mod pty;
mod start;
mod state;
mod table;
mod tree;

use std::sync::Arc;
use std::time::Duration;

use table::Inner;

pub use state::{EventKind, EventSender, ExitInfo, LogChunk, ProcessEvent, ReadResult, Stream};

/// Server-side limits: they hold for every process, whatever the requests say.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
  /// Bytes retained per stream buffer and for the read log of each process.
  pub retained_output_bytes: usize,
  /// Processes that may run (not yet closed) at once.
  pub max_processes: usize,
  /// How long an exited process stays readable.
  pub exited_retention: Duration,
  /// Between SIGTERM and SIGKILL when the manager closes.
  pub close_grace: Duration,
  /// How long output is still read after the exit (a grandchild holding the
  /// pipe or terminal open must not keep the process from closing).
  pub drain: Duration,
  /// The host environment that owns the processes (see [`group::kill_all`]).
  pub owner: u64,
}

pub const DEFAULT_RETAINED_OUTPUT_BYTES: usize = 1024 * 1024;
/// `terminate`'s wait between the graceful step and the kill, when the call
/// gives none (the server's protocol and `ProcessManager` alike).
pub const DEFAULT_TERMINATE_TIMEOUT_MS: u64 = 2000;
/// `read`'s byte budget when the call gives none.
pub const DEFAULT_READ_MAX_BYTES: usize = 1024 * 1024;
pub const DEFAULT_MAX_PROCESSES: usize = 64;
pub const DEFAULT_EXITED_RETENTION: Duration = Duration::from_secs(30);

impl ManagerConfig {
  /// The options' names of the settings a host may give.
  pub const NAMES: [&'static str; 3] = ["retainedOutputBytes", "maxProcesses", "exitedRetentionMs"];

  /// Set the setting the options call `name` to `n` (a JavaScript number):
  /// bytes and milliseconds are non-negative and finite, `maxProcesses` at
  /// least 1. The message says what is wrong; the caller names the option.
  /// `ProcessManager` and `serve` both check with it.
  pub fn set(&mut self, name: &str, n: f64) -> Result<(), String> {
    let n = crate::process::limits::finite_non_negative(n)?;
    match name {
      "retainedOutputBytes" => self.retained_output_bytes = n as usize,
      "maxProcesses" if n < 1.0 => return Err(format!("must be at least 1, got {n}")),
      "maxProcesses" => self.max_processes = n as usize,
      "exitedRetentionMs" => self.exited_retention = Duration::from_micros((n * 1000.0) as u64),
      _ => {
        return Err(format!(
          "is not a setting, expected one of {}",
          Self::NAMES.join(", ")
        ))
      }
    }
    Ok(())
  }
}

impl Default for ManagerConfig {
  fn default() -> Self {
    ManagerConfig {
      retained_output_bytes: DEFAULT_RETAINED_OUTPUT_BYTES,
      max_processes: DEFAULT_MAX_PROCESSES,
      exited_retention: DEFAULT_EXITED_RETENTION,
      close_grace: crate::process::RunOptions::DEFAULT_KILL_GRACE,
      drain: Duration::from_millis(100),
      owner: 0,
    }
  }
}

/// How the process is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessIo {
  /// stdout and stderr are pipes; stdin is a pipe when `stdin_open`, else /dev/null.
  Pipe { stdin_open: bool },
  /// One pseudo-terminal for all three.
  Pty { rows: u16, cols: u16 },
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct StartSpec {
  /// The protocol handle; generated when `None`.
  pub process_id: Option<String>,
  /// Program (looked up in the child's PATH) and arguments.
  pub argv: Vec<String>,
  /// `argv[0]` as the program sees it (pipes only).
  pub arg0: Option<String>,
  pub io: ProcessIo,
  /// cwd (`None`: the host's), environment, opt-in resource limits of the
  /// process tree (see [`crate::process::limits`]), the parent-death signal
  /// (pipes: PR_SET_PDEATHSIG, SIGKILL when the host dies; a PTY child is a
  /// session leader and gets SIGHUP from the kernel when the host's master
  /// side closes, so it is ignored there) and the opt-in OS sandbox of the
  /// process tree (see [`crate::process::sandbox`]).
  pub process: crate::process::ProcessOptions,
  /// How it ends on its own ([`RunOptions::managed`](crate::process::RunOptions::managed):
  /// none of it): `timeout`, its tree killed as a run's is (exit code 124,
  /// `TIMEOUT` in its exit); `kill_grace`, between SIGTERM and SIGKILL at
  /// that timeout and the sweep after its exit (a `terminate` has its own
  /// wait, the manager's close `close_grace`); `input`, fed to a pipe child's
  /// stdin, then EOF (`EINVAL` with a PTY or an open stdin, which the caller
  /// writes); `max_output_bytes`, the bytes it retains per stream, within
  /// the manager's `retained_output_bytes`.
  pub run: crate::process::RunOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateMode {
  /// SIGTERM the group, SIGKILL it after `timeout` if it is still running.
  Graceful { timeout: Duration },
  /// SIGKILL the group.
  Force,
}

/// The state of a process as `wait`/`terminate` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitResult {
  pub running: bool,
  pub exit: Option<ExitInfo>,
}

/// Retained output and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
  pub stdout: Vec<u8>,
  pub stderr: Vec<u8>,
  pub terminal: Vec<u8>,
  pub truncated: bool,
  pub omitted_bytes: u64,
  pub exit: Option<ExitInfo>,
  pub running: bool,
  pub next_seq: u64,
}

/// A row of `list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
  pub process_id: String,
  pub pid: u32,
  pub argv: Vec<String>,
  pub pty: bool,
  pub running: bool,
  pub exit: Option<ExitInfo>,
}

/// The answer to `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
  pub process_id: String,
  pub pid: u32,
}

/// A table of long-lived processes. Cheap to clone (shared).
#[derive(Clone)]
pub struct ProcessManager {
  inner: Arc<Inner>,
}

#[cfg(test)]
mod tests;
