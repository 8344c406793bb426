//! Pseudo-terminals: `portable-pty` opens the pair; the child is spawned
//! through the one spawn sequence as a session leader with the slave as its
//! controlling terminal (see [`spawn`]). The master is then driven here without blocking threads: a duplicate of its fd,
//! non-blocking, registered with tokio, read until EIO (all slaves closed) so
//! that everything the child wrote before exiting is delivered.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use portable_pty::{MasterPty, PtySize};
use tokio::io::unix::AsyncFd;

use crate::error::{ErrorCode, ExecError};
use crate::platform;
use crate::process::{ChildCommand, ChildEnv, ChildSetup, Leader, Spawned};

/// A spawned PTY child: its handle (reaped by `wait`, as a pipe child is)
/// and its terminal.
pub(crate) struct PtyParts {
  pub child: tokio::process::Child,
  pub master: Box<dyn MasterPty + Send>,
  pub io: AsyncFd<OwnedFd>,
}

pub(crate) fn size(rows: u16, cols: u16) -> PtySize {
  PtySize {
    rows,
    cols,
    pixel_width: 0,
    pixel_height: 0,
  }
}

/// Start `program` (already resolved; `argv[0]` is what it sees) as a session
/// leader with a new terminal of `size` as its controlling tty. portable-pty
/// opens the pair; the child is spawned through the one spawn sequence
/// ([`ChildSetup::spawn`], [`Leader::Terminal`]): forked, so that it starts
/// with default signal dispositions (Node ignores SIGPIPE and SIGXFSZ, and
/// an ignored signal stays ignored across exec), the slave as its
/// controlling terminal, and its limits applied before exec, like a pipe
/// child; the mark, the sandbox, the ticket and the registration are those
/// of every path.
pub(crate) fn spawn(
  program: &Path,
  argv: &[String],
  mut env: Vec<(OsString, OsString)>,
  size: PtySize,
  setup: &ChildSetup,
) -> Result<Spawned<PtyParts>, ExecError> {
  let system = portable_pty::native_pty_system();
  let pair = system
    .openpty(size)
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot open a pty: {e}")))?;
  let name = pair
    .master
    .tty_name()
    .ok_or_else(|| ExecError::new(ErrorCode::EIO, "the pty has no name"))?;
  let slave = platform::open_noctty(&name).map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot open {}: {e}", name.display()),
    )
  })?;
  if !env.iter().any(|(k, _)| k == "TERM") {
    env.push(("TERM".into(), "xterm-256color".into()));
  }
  let stdio = || {
    slave
      .try_clone()
      .map(Stdio::from)
      .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot duplicate the pty: {e}")))
  };
  let args: Vec<OsString> = argv[1..].iter().map(OsString::from).collect();
  let cmd = ChildCommand {
    program,
    argv0: Some(OsStr::new(&argv[0])),
    args: &args,
    env: ChildEnv::Vars(&env),
    cwd: Some(setup.cwd),
  };
  let spawned = setup.spawn(&cmd, Leader::Terminal, [stdio()?, stdio()?, stdio()?]);
  // our copies of the slave must go, or the master never sees EOF
  drop(slave);
  drop(pair.slave);
  let spawned = spawned?;
  let raw = pair
    .master
    .as_raw_fd()
    .ok_or_else(|| ExecError::new(ErrorCode::EIO, "the pty has no file descriptor"))?;
  let fd = platform::dup_nonblocking(raw)
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  // SAFETY: an OwnedFd keeps its descriptor open and unchanged while owned
  let io = unsafe { AsyncFd::register(fd) }
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  Ok(Spawned {
    child: PtyParts {
      child: spawned.child,
      master: pair.master,
      io,
    },
    pid: spawned.pid,
    mark: spawned.mark,
    guard: spawned.guard,
    sandbox: spawned.sandbox,
  })
}

/// Write all of `data` to the master.
pub(crate) async fn write_all(fd: &AsyncFd<OwnedFd>, mut data: &[u8]) -> io::Result<()> {
  while !data.is_empty() {
    let mut guard = fd.writable().await?;
    let r = guard.try_io(|inner| platform::write_fd(inner.get_ref(), data));
    match r {
      Ok(Ok(n)) => data = &data[n..],
      Ok(Err(e)) => return Err(e),
      Err(_would_block) => continue,
    }
  }
  Ok(())
}
