//! Windows: the registry of live runs, each a Job Object keyed by its
//! leader's pid, so that nothing is left behind when the host goes away
//! (`kill_all`, `shutdown`), and the kill mapping of `kill(signal)`.
//!
//! The host's death needs no handler here: every job is made with
//! `KILL_ON_JOB_CLOSE`, and the system closes the host's handles when it
//! dies, however it dies.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{ErrorCode, ExecError};
use crate::platform::Job;

/// The exit code `TerminateJobObject` gives the processes it ends (Node's
/// `subprocess.kill()` on Windows ends the child with 1 too).
pub const TERMINATED_EXIT: u32 = 1;

struct Entry {
  pid: i32,
  owner: u64,
  job: Arc<Job>,
}

static LIVE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static LEAVING: AtomicBool = AtomicBool::new(false);
static RUNS: AtomicU64 = AtomicU64::new(1);

/// Before a spawn: refused with `ECANCELED` once the host is leaving.
pub fn begin_spawn(_owner: u64) -> Result<(), ExecError> {
  if LEAVING.load(Ordering::SeqCst) {
    return Err(ExecError::new(
      ErrorCode::ECANCELED,
      "the host is exiting: no new process is started",
    ));
  }
  Ok(())
}

/// The value of `EXEC_NATIVE_RUN_ID` for a new run of `owner`
/// (`<host pid>.<owner>.<run>`, as on POSIX).
pub fn new_mark(owner: u64) -> String {
  let run = RUNS.fetch_add(1, Ordering::Relaxed);
  format!("{}.{owner}.{run}", std::process::id())
}

/// Record the job of a run whose leader is `pid`.
pub(crate) fn register(pid: i32, owner: u64, job: Arc<Job>) {
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .push(Entry { pid, owner, job });
}

/// Forget the run of `pid` (its job is closed when its last handle goes).
pub fn unregister(pid: i32) {
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .retain(|e| e.pid != pid);
}

/// The job of the live run led by `pid`.
pub(crate) fn job_of(pid: i32) -> Option<Arc<Job>> {
  let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
  live.iter().find(|e| e.pid == pid).map(|e| e.job.clone())
}

pub fn is_registered(pid: i32) -> bool {
  job_of(pid).is_some()
}

/// Whether a process of the run led by `pid` still runs.
pub fn group_alive(pid: i32) -> bool {
  job_of(pid).is_some_and(|j| j.active_processes() > 0)
}

/// End the run led by `pid` now (`TerminateJobObject`, no grace). False
/// when it is not a live run of ours.
pub fn kill_now(pid: i32) -> bool {
  job_of(pid).is_some_and(|j| j.terminate(TERMINATED_EXIT))
}

/// Runs still tracked (running, or their leftovers being ended).
pub fn live_count() -> usize {
  LIVE.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// End the jobs of `owner` (every owner: `None`) at once. Returns how many.
pub fn kill_all(owner: Option<u64>) -> usize {
  let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
  let (ours, rest): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut *live)
    .into_iter()
    .partition(|e| !matches!(owner, Some(o) if o != e.owner));
  *live = rest;
  drop(live);
  for e in &ours {
    e.job.terminate(TERMINATED_EXIT);
  }
  ours.len()
}

/// The host (or one environment of it) is going away: end what it runs and,
/// for the whole host, refuse new spawns.
pub fn shutdown(owner: Option<u64>) -> usize {
  if owner.is_none() {
    LEAVING.store(true, Ordering::SeqCst);
  }
  kill_all(owner)
}

/// What `kill(signal)` does on Windows, which has no signals. The mapping
/// (README, "Windows"): `SIGTERM`/`SIGINT`/`SIGHUP`/`SIGQUIT`/`SIGBREAK` are
/// the graceful stop (`CTRL_BREAK_EVENT`, then `TerminateJobObject` after
/// `forceKillAfterDelay`), `SIGKILL` ends the job at once, `0` checks that
/// the run is alive. Others are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillKind {
  Graceful,
  Kill,
  Check,
}

/// Parse a signal name (`SIGTERM`, `TERM`, `term`) or number into what it
/// does on Windows.
pub fn parse_signal(name: &str) -> Option<KillKind> {
  if let Ok(n) = name.parse::<i32>() {
    return signal_number(n);
  }
  let upper = name.to_ascii_uppercase();
  match upper.strip_prefix("SIG").unwrap_or(&upper) {
    "TERM" | "INT" | "HUP" | "QUIT" | "BREAK" => Some(KillKind::Graceful),
    "KILL" => Some(KillKind::Kill),
    _ => None,
  }
}

/// A signal number's Windows meaning (Node's numbers: 1, 2, 3, 15, 21 are
/// graceful; 9 kills; 0 checks).
pub fn signal_number(n: i32) -> Option<KillKind> {
  match n {
    0 => Some(KillKind::Check),
    1 | 2 | 3 | 15 | 21 => Some(KillKind::Graceful),
    9 => Some(KillKind::Kill),
    _ => None,
  }
}

/// The conventional name of a signal number (`SIGTERM`), or `SIG<n>`.
pub fn signal_name(n: i32) -> String {
  match n {
    1 => "SIGHUP".into(),
    2 => "SIGINT".into(),
    3 => "SIGQUIT".into(),
    9 => "SIGKILL".into(),
    15 => "SIGTERM".into(),
    21 => "SIGBREAK".into(),
    _ => format!("SIG{n}"),
  }
}
