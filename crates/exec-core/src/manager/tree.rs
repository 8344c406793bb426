//! The tree of a managed process, and the two ways of asking it to end: the
//! graceful one (`terminate`'s first step) and the kill. Written once per OS,
//! so that the manager's code says only "ask" and "kill".
//!
//! - POSIX: the marked processes, the group, the leader ([`ProcessTree`]):
//!   SIGTERM, then SIGKILL.
//! - Windows: the process's Job Object (every descendant is in it from its
//!   first instruction): `CTRL_BREAK_EVENT` to its process group (a
//!   terminal child: its console closed), then `TerminateJobObject`, as the
//!   run path ends a timed-out run.

#[cfg(unix)]
use crate::process::ProcessTree;
#[cfg(unix)]
use nix::sys::signal::Signal;

#[cfg(windows)]
use std::sync::Arc;

#[cfg(windows)]
use crate::platform::{self, Job};
#[cfg(windows)]
use crate::process::registry::TERMINATED_EXIT;
#[cfg(windows)]
use crate::process::supervise::ask_to_end;

/// What a managed process's tree is reached by.
pub(super) struct Tree {
  pid: u32,
  #[cfg(unix)]
  mark: String,
  #[cfg(windows)]
  job: Arc<Job>,
  /// The pseudo console of a terminal child.
  #[cfg(windows)]
  console: Option<Arc<platform::PseudoConsole>>,
}

#[cfg(unix)]
impl Tree {
  /// The tree led by `pid` whose processes carry `mark` (`EXEC_NATIVE_RUN_ID`).
  pub fn new(pid: u32, mark: String) -> Tree {
    Tree { pid, mark }
  }

  /// SIGTERM to the tree, the leader included.
  pub fn ask(&self) {
    ProcessTree::new(self.pid as i32, &self.mark).signal(Signal::SIGTERM, true);
  }

  /// SIGKILL to the tree, the leader included.
  pub fn kill(&self) {
    ProcessTree::new(self.pid as i32, &self.mark).signal(Signal::SIGKILL, true);
  }

  /// SIGKILL to what the leader left behind (the leader itself may be gone,
  /// and its pid reused).
  pub fn kill_leftovers(&self) {
    ProcessTree::new(0, &self.mark).kill(false);
  }
}

#[cfg(windows)]
impl Tree {
  /// The tree led by `pid`, all of it in `job`; `console`: the pseudo
  /// console a terminal child runs on.
  pub fn new(pid: u32, job: Arc<Job>, console: Option<Arc<platform::PseudoConsole>>) -> Tree {
    Tree { pid, job, console }
  }

  /// The graceful stop ([`ask_to_end`]: a terminal child's console closed,
  /// else `CTRL_BREAK_EVENT` to the leader's group); when there is none (the
  /// host has no console, or not the child's: Wine's case), the job is ended
  /// at once.
  pub fn ask(&self) {
    if !ask_to_end(self.pid, self.console.as_ref()) {
      self.kill();
    }
  }

  /// The pseudo console of a terminal child (what resizes it).
  pub fn console(&self) -> Option<&Arc<platform::PseudoConsole>> {
    self.console.as_ref()
  }

  /// `TerminateJobObject`: every process of the tree, at once.
  pub fn kill(&self) {
    self.job.terminate(TERMINATED_EXIT);
  }

  /// What is left in the job (the leader may be gone).
  pub fn kill_leftovers(&self) {
    self.kill();
  }
}
