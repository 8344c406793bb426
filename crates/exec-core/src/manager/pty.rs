//! Pseudo-terminals through `portable-pty`: it opens the pair and spawns the
//! child as a session leader with the slave as its controlling terminal. The
//! master is then driven here without blocking threads: a duplicate of its fd,
//! non-blocking, registered with tokio, read until EIO (all slaves closed) so
//! that everything the child wrote before exiting is delivered.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use portable_pty::{CommandBuilder, MasterPty, PtySize};
use tokio::io::unix::AsyncFd;

use crate::error::{ErrorCode, ExecError};

pub(crate) struct SpawnedPty {
  pub pid: u32,
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

pub(crate) fn spawn(
  argv: &[String],
  cwd: &Path,
  env: Vec<(OsString, OsString)>,
  rows: u16,
  cols: u16,
) -> Result<SpawnedPty, ExecError> {
  let system = portable_pty::native_pty_system();
  let pair = system
    .openpty(size(rows, cols))
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot open a pty: {e}")))?;
  let mut cmd = CommandBuilder::new(&argv[0]);
  cmd.args(&argv[1..]);
  cmd.cwd(cwd);
  cmd.env_clear();
  let mut has_term = false;
  for (k, v) in env {
    has_term |= k == "TERM";
    cmd.env(k, v);
  }
  if !has_term {
    cmd.env("TERM", "xterm-256color");
  }
  let child = pair.slave.spawn_command(cmd).map_err(|e| {
    let msg = e.to_string();
    match e.downcast_ref::<io::Error>() {
      Some(io) => ExecError::from_spawn(&argv[0], io),
      None => ExecError::new(
        ErrorCode::ESPAWN,
        format!(
          "failed to spawn {}: {}",
          argv[0],
          msg.lines().next().unwrap_or("")
        ),
      ),
    }
  })?;
  let pid = child.process_id().unwrap_or(0);
  // our copy of the slave must go, or the master never sees EOF
  drop(pair.slave);
  // the child is reaped with waitpid by the manager; dropping the handle
  // neither waits nor kills
  drop(child);
  let raw = pair
    .master
    .as_raw_fd()
    .ok_or_else(|| ExecError::new(ErrorCode::EIO, "the pty has no file descriptor"))?;
  let fd = dup_nonblocking(raw)
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  // SAFETY: an OwnedFd keeps its descriptor open and unchanged while owned
  let io = unsafe { AsyncFd::register(fd) }
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  Ok(SpawnedPty {
    pid,
    master: pair.master,
    io,
  })
}

fn dup_nonblocking(fd: i32) -> io::Result<OwnedFd> {
  let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
  if new < 0 {
    return Err(io::Error::last_os_error());
  }
  let owned = unsafe { OwnedFd::from_raw_fd(new) };
  let flags = unsafe { libc::fcntl(new, libc::F_GETFL) };
  if flags < 0 || unsafe { libc::fcntl(new, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(owned)
}

fn raw_read(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
  let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
  if n < 0 {
    let e = io::Error::last_os_error();
    // EIO: every slave is closed, which is the end of the stream
    if e.raw_os_error() == Some(libc::EIO) {
      return Ok(0);
    }
    return Err(e);
  }
  Ok(n as usize)
}

/// Read what the master has, waiting for it. `Ok(0)` at the end.
pub(crate) async fn read(fd: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> io::Result<usize> {
  loop {
    let mut guard = fd.readable().await?;
    match guard.try_io(|inner| raw_read(inner.get_ref(), buf)) {
      Ok(r) => return r,
      Err(_would_block) => continue,
    }
  }
}

/// Read without waiting: `None` when nothing is there now.
pub(crate) fn read_now(fd: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> Option<usize> {
  match raw_read(fd.get_ref(), buf) {
    Ok(n) if n > 0 => Some(n),
    _ => None,
  }
}

/// Write all of `data` to the master.
pub(crate) async fn write_all(fd: &AsyncFd<OwnedFd>, mut data: &[u8]) -> io::Result<()> {
  while !data.is_empty() {
    let mut guard = fd.writable().await?;
    let r = guard.try_io(|inner| {
      let n = unsafe {
        libc::write(
          inner.get_ref().as_raw_fd(),
          data.as_ptr().cast(),
          data.len(),
        )
      };
      if n < 0 {
        Err(io::Error::last_os_error())
      } else {
        Ok(n as usize)
      }
    });
    match r {
      Ok(Ok(n)) => data = &data[n..],
      Ok(Err(e)) => return Err(e),
      Err(_would_block) => continue,
    }
  }
  Ok(())
}
