//! File descriptors and the steps a child takes between fork and exec: the
//! same POSIX calls on every supported system, each wrapped once.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The host's one `/dev/null` (read-write, close-on-exec), opened at the
/// first call and kept: a child whose stdin is `/dev/null` gets a copy of it
/// (`dup2` in the child), so a spawn does not open and close it each time
/// (issue 28). Its offset and status flags are shared by every copy, which
/// `/dev/null` ignores. (Linux: the addon's own spawn; elsewhere std's
/// `Command` opens its own.)
#[cfg(target_os = "linux")]
pub fn dev_null() -> io::Result<std::os::fd::BorrowedFd<'static>> {
  use std::os::fd::AsFd;
  static NULL: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
  if let Some(fd) = NULL.get() {
    return Ok(fd.as_fd());
  }
  let fd = open_noctty(Path::new("/dev/null"))?;
  // a race opens it twice: the loser's copy is closed
  Ok(NULL.get_or_init(|| fd).as_fd())
}

/// Open `path` read-write without making it the controlling terminal
/// (`O_NOCTTY`), close-on-exec.
pub fn open_noctty(path: &Path) -> io::Result<OwnedFd> {
  let path = CString::new(path.as_os_str().as_bytes())
    .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
  // SAFETY: `path` is a live NUL-terminated CString for the call; the descriptor returned is
  // wrapped in an OwnedFd below, its only owner.
  let fd = unsafe {
    libc::open(
      path.as_ptr(),
      libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
    )
  };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: a descriptor just opened, owned by nothing else
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A close-on-exec, non-blocking duplicate of `fd`.
pub fn dup_nonblocking(fd: i32) -> io::Result<OwnedFd> {
  // SAFETY: fcntl(F_DUPFD_CLOEXEC) reads no memory; on a descriptor that is not open it fails with
  // EBADF. The new descriptor is owned by the OwnedFd made next.
  let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
  if new < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: a descriptor just made, owned by nothing else
  let owned = unsafe { OwnedFd::from_raw_fd(new) };
  set_nonblocking(new)?;
  Ok(owned)
}

/// Put `fd` in non-blocking mode (`O_NONBLOCK`), keeping its other flags.
pub fn set_nonblocking(fd: i32) -> io::Result<()> {
  // SAFETY: fcntl(F_GETFL) reads no memory; a bad `fd` fails with EBADF.
  let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
  // SAFETY: fcntl(F_SETFL) reads no memory; it changes only the flags of the caller's `fd`.
  if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(())
}

/// How many bytes pipe `fd` holds (`FIONREAD`).
pub fn pipe_pending(fd: i32) -> io::Result<usize> {
  let mut n: libc::c_int = 0;
  // SAFETY: `n` is a live c_int, where FIONREAD writes the count.
  if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) } < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(n.max(0) as usize)
}

/// One `read(2)` of `fd` into the spare capacity of `buf` (the bytes are
/// appended, nothing is zeroed first). `Ok(0)` is end of file; an empty
/// non-blocking pipe is `WouldBlock`.
pub fn read_into(fd: i32, buf: &mut Vec<u8>) -> io::Result<usize> {
  let n = read_uninit(fd, buf.spare_capacity_mut())?;
  // SAFETY: read() initialised the first n bytes of the spare capacity
  unsafe { buf.set_len(buf.len() + n) };
  Ok(n)
}

/// One `read(2)` of `fd` into memory that need not be initialised; returns
/// how many of its first bytes it filled. `Ok(0)` is end of file (or an
/// empty `room`).
pub fn read_uninit(fd: i32, room: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
  // SAFETY: `room` is a live mutable slice of MaybeUninit<u8>: read(2) writes at most `room.len()`
  // bytes into it and reading uninitialised memory is not asked of it.
  let n = unsafe { libc::read(fd, room.as_mut_ptr().cast(), room.len()) };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(n as usize)
}

/// One `write(2)` of `data`.
pub fn write_fd(fd: &impl AsRawFd, data: &[u8]) -> io::Result<usize> {
  // SAFETY: `data` is a live slice: pointer and length bound what write(2) reads; `fd` is borrowed
  // for the call.
  let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(n as usize)
}

/// In a child between fork and exec: default dispositions for the signals a
/// host (Node) may ignore or handle, and an empty signal mask. An ignored
/// signal stays ignored across exec. Async-signal-safe.
pub fn child_default_signals() {
  // SAFETY: signal(SIG_DFL), a zeroed sigset_t (valid for sigemptyset to initialise) on this stack,
  // and sigprocmask are system calls that allocate nothing: async-signal-safe, so sound in a child
  // between fork and exec.
  unsafe {
    for sig in [
      libc::SIGCHLD,
      libc::SIGHUP,
      libc::SIGINT,
      libc::SIGQUIT,
      libc::SIGTERM,
      libc::SIGALRM,
      libc::SIGPIPE,
      libc::SIGXFSZ,
      libc::SIGXCPU,
    ] {
      libc::signal(sig, libc::SIG_DFL);
    }
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
  }
}

/// In a child between fork and exec: a new session whose controlling
/// terminal is the one on stdin. Async-signal-safe.
pub fn child_session_with_tty() -> io::Result<()> {
  // SAFETY: setsid and ioctl(TIOCSCTTY) are system calls that read no memory of ours: async-signal-
  // safe in a child between fork and exec.
  unsafe {
    if libc::setsid() == -1 {
      return Err(io::Error::last_os_error());
    }
    if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
      return Err(io::Error::last_os_error());
    }
  }
  Ok(())
}

/// In a child between fork and exec: SIGXFSZ and SIGXCPU back to their
/// default (Node ignores SIGXFSZ), so that file-size and CPU limits stop the
/// program. Async-signal-safe.
pub fn child_default_limit_signals() {
  // SAFETY: signal(SIG_DFL) on two standard signals: system calls, async-signal-safe in a child
  // between fork and exec.
  unsafe {
    libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
    libc::signal(libc::SIGXCPU, libc::SIG_DFL);
  }
}

/// The parent's pid. Async-signal-safe.
pub fn parent_pid() -> i32 {
  // SAFETY: getppid has no preconditions and is async-signal-safe.
  unsafe { libc::getppid() }
}

/// End this process now, without running anything (`_exit`): for a child
/// between fork and exec. Async-signal-safe.
pub fn exit_now(code: i32) -> ! {
  // SAFETY: _exit ends the process without unwinding or running atexit handlers: the right end for
  // a child between fork and exec, whose copy of the parent's state must not run.
  unsafe { libc::_exit(code) }
}

/// Write `data` to the file `path` (open, one write, close) without
/// allocating: for a child between fork and exec. Async-signal-safe.
pub fn write_file_signal_safe(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
  // SAFETY: `path` is a live NUL-terminated CStr; the descriptor returned is owned here and closed
  // below.
  let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: `data` is a live slice (pointer and length); `fd` is the descriptor opened above.
  let r = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
  let e = io::Error::last_os_error();
  // SAFETY: `fd` was opened above, is owned here, and is closed once.
  unsafe { libc::close(fd) };
  if r != data.len() as isize {
    return Err(e);
  }
  Ok(())
}

/// A signal's disposition, as it was found.
#[derive(Clone, Copy)]
pub struct SignalAction(libc::sigaction);

impl SignalAction {
  /// The signal was ignored (`SIG_IGN`: a `nohup`'d process).
  pub fn is_ignore(&self) -> bool {
    self.0.sa_sigaction == libc::SIG_IGN
  }
}

/// The current disposition of `sig`.
pub fn signal_action(sig: i32) -> SignalAction {
  // SAFETY: sigaction fills the zeroed struct
  let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
  // SAFETY: `old` is a live sigaction for the kernel to fill; a null new action only reads the
  // current one.
  unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
  SignalAction(old)
}

/// Handle `sig` with `handler` (on the alternate stack if there is one,
/// system calls restarted).
pub fn set_signal_handler(sig: i32, handler: extern "C" fn(i32)) {
  // SAFETY: `act` is zeroed (a valid sigaction: no flags, empty mask) and then filled with an
  // extern "C" fn(i32) handler, the shape SA_SIGINFO-less sigaction expects; sigaction copies it.
  unsafe {
    let mut act: libc::sigaction = std::mem::zeroed();
    act.sa_sigaction = handler as *const () as usize;
    act.sa_flags = libc::SA_ONSTACK | libc::SA_RESTART;
    libc::sigemptyset(&mut act.sa_mask);
    libc::sigaction(sig, &act, std::ptr::null_mut());
  }
}

/// Put `action` back as the disposition of `sig` and raise `sig` again (it
/// is delivered once the running handler returns). Async-signal-safe.
pub fn restore_and_raise(sig: i32, action: &SignalAction) {
  // SAFETY: `action.0` is a sigaction the kernel filled earlier (signal_action), so a valid
  // disposition to restore; raise takes a plain value. Both are async-signal-safe.
  unsafe {
    libc::sigaction(sig, &action.0, std::ptr::null_mut());
    libc::raise(sig);
  }
}

/// Remove the file `path`. Async-signal-safe; an error (gone already) is
/// ignored.
pub fn unlink_signal_safe(path: &std::ffi::CStr) {
  // SAFETY: `path` is a NUL-terminated string that outlives the call
  unsafe { libc::unlink(path.as_ptr()) };
}

/// Remove the directory `path` (NUL-terminated). Async-signal-safe. `Ok` also
/// when it is already gone.
pub fn rmdir_signal_safe(path: &[u8]) -> io::Result<()> {
  if path.last() != Some(&0) {
    return Err(io::Error::from(io::ErrorKind::InvalidInput));
  }
  // SAFETY: `path` ends with NUL (checked above) and is a live slice for the call.
  if unsafe { libc::rmdir(path.as_ptr().cast()) } == 0 {
    return Ok(());
  }
  let e = io::Error::last_os_error();
  if e.raw_os_error() == Some(libc::ENOENT) {
    return Ok(());
  }
  Err(e)
}

/// Read the file `path` (NUL-terminated) in pieces handed to `f`, without
/// allocating. Async-signal-safe. False when it cannot be opened.
pub fn read_file_signal_safe(path: &[u8], f: &mut dyn FnMut(&[u8])) -> bool {
  if path.last() != Some(&0) {
    return false;
  }
  // SAFETY: `path` ends with NUL (checked above) and is a live slice for the call; the descriptor
  // returned is owned here and closed below.
  let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
  if fd < 0 {
    return false;
  }
  let mut buf = [0u8; 4096];
  loop {
    // SAFETY: `buf` is a live [u8; 4096]: pointer and length bound what read(2) writes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
      break;
    }
    f(&buf[..n as usize]);
  }
  // SAFETY: `fd` was opened above, is owned here, and is closed once.
  unsafe { libc::close(fd) };
  true
}

/// `execve(program, argv, envp)`: returns only on failure, with the error.
/// `argv` and `envp` end with a null pointer and point into strings the
/// caller keeps alive. Async-signal-safe (for the child between fork and exec).
pub fn execve(
  program: &std::ffi::CStr,
  argv: &[*const std::ffi::c_char],
  envp: &[*const std::ffi::c_char],
) -> io::Error {
  // SAFETY: null-terminated arrays of pointers to NUL-terminated strings
  // (the caller's contract); execve reads them and does not return on success
  unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
  io::Error::last_os_error()
}
