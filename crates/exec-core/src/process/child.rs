//! A spawned pipe child as the supervisor holds it: on Linux the addon's
//! own spawn ([`crate::platform::raw_spawn`]: a `clone(CLONE_VM|CLONE_VFORK)`
//! child with the limits and the sandbox applied before exec, waited for
//! through its pidfd); elsewhere tokio's `Child` (posix_spawn, or fork when a
//! step runs before exec).

use std::io;
use std::process::ExitStatus;

/// The write end of a child's stdin pipe.
pub type StdinPipe = tokio::net::unix::pipe::Sender;

pub enum Child {
  /// A PTY child everywhere; a pipe child off Linux.
  Tokio(tokio::process::Child),
  #[cfg(target_os = "linux")]
  Raw(crate::platform::RawChild),
}

impl Child {
  /// Its exit status, once it ended (it is reaped then).
  pub async fn wait(&mut self) -> io::Result<ExitStatus> {
    match self {
      Child::Tokio(c) => c.wait().await,
      #[cfg(target_os = "linux")]
      Child::Raw(c) => c.wait().await,
    }
  }

  /// SIGKILL the child itself (not its group), unless it was reaped.
  pub fn start_kill(&mut self) -> io::Result<()> {
    match self {
      Child::Tokio(c) => c.start_kill(),
      #[cfg(target_os = "linux")]
      Child::Raw(c) => c.start_kill(),
    }
  }
}
