//! The child's place among processes: the leader of a process group of its
//! own (pipes, the session worker: its pid is the group id, so the group is
//! signalled as one), or of a session whose controlling terminal is its
//! stdin (a PTY's slave).

use std::io;
use std::os::unix::process::CommandExt;

use crate::platform;

/// How a child leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
  /// A process group of its own (`setpgid(0, 0)`; `posix_spawn` does it
  /// without a step in the child).
  Group,
  /// A session of its own whose controlling terminal is its stdin, with
  /// default signal dispositions and no descriptor of the host's past stdio:
  /// a step in the child (a fork).
  Terminal,
}

impl Leader {
  /// What std's `Command` does for it itself.
  pub(super) fn set(self, cmd: &mut std::process::Command) {
    if self == Leader::Group {
      cmd.process_group(0);
    }
  }

  /// Whether the child has a step of this concern to run before exec.
  pub(super) fn has_step(self) -> bool {
    self == Leader::Terminal
  }

  /// In the child, between fork and exec (stdio is in place): for a
  /// terminal, what portable-pty does (default dispositions, an empty mask,
  /// `setsid`, the controlling tty, no leaked descriptors), with SIGPIPE,
  /// SIGXFSZ and SIGXCPU reset too. Async-signal-safe.
  pub(super) fn in_child(self) -> io::Result<()> {
    if self == Leader::Terminal {
      platform::child_default_signals();
      platform::child_session_with_tty()?;
      // descriptors the host left without FD_CLOEXEC do not reach the program
      platform::cloexec_from(3);
    }
    Ok(())
  }
}
