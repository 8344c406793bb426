//! Linux: prctl, pipe sizes, close_range, `/proc/sys`.

use std::io;

/// Have the kernel SIGKILL this process when its parent thread dies
/// (`PR_SET_PDEATHSIG`). Async-signal-safe: for the child before exec.
pub fn kill_me_with_parent() -> io::Result<()> {
  // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and sets an attribute of this process
  // only; async-signal-safe.
  if unsafe {
    libc::prctl(
      libc::PR_SET_PDEATHSIG,
      libc::SIGKILL as libc::c_ulong,
      0,
      0,
      0,
    )
  } != 0
  {
    return Err(io::Error::last_os_error());
  }
  Ok(())
}

/// Mark every descriptor from `first` up close-on-exec, so that descriptors
/// the host left open do not reach the program. Async-signal-safe. Linux
/// 5.11+ (`close_range(CLOSE_RANGE_CLOEXEC)`); older kernels keep them, as
/// pipe children do.
pub fn cloexec_from(first: i32) {
  // SAFETY: close_range(CLOSE_RANGE_CLOEXEC) takes plain integers and closes nothing: it only sets
  // close-on-exec, so no descriptor owned by a Rust object is invalidated.
  unsafe {
    libc::syscall(
      libc::SYS_close_range,
      first as libc::c_uint,
      libc::c_uint::MAX,
      libc::CLOSE_RANGE_CLOEXEC,
    );
  }
}

/// Best effort: make a pipe hold `bytes` (`F_SETPIPE_SZ`), so a heavy writer
/// wakes the reader less often. Returns the pipe's size afterwards (the
/// kernel rounds up; above `/proc/sys/fs/pipe-max-size` only a privileged
/// process gets more, the others keep the size they had).
pub fn grow_pipe(fd: i32, bytes: i32) -> Option<usize> {
  // SAFETY: fcntl(F_SETPIPE_SZ) reads no memory of ours; on a descriptor that is not a pipe it
  // fails.
  let r = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes) };
  if r > 0 {
    return Some(r as usize);
  }
  // SAFETY: fcntl(F_GETPIPE_SZ) reads no memory of ours.
  let r = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
  (r > 0).then_some(r as usize)
}

/// Whether [`discard_from_pipe`] drops bytes in the kernel.
pub const ZERO_COPY_DISCARD: bool = true;

/// Drop up to `max` bytes from the front of pipe `fd` without copying them to
/// user space (`splice` to an `O_WRONLY` `/dev/null`, non-blocking: an empty
/// pipe is `WouldBlock`). Returns how many were dropped.
pub fn discard_from_pipe(fd: i32, max: usize) -> io::Result<usize> {
  use std::os::fd::AsRawFd;
  static NULL: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();
  let null = NULL
    .get_or_init(|| {
      std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .ok()
    })
    .as_ref()
    .ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))?;
  // SAFETY: null offsets are allowed by splice(2); `fd` is the caller's pipe and `null` a File kept
  // open for the process's life in a static.
  let n = unsafe {
    libc::splice(
      fd,
      std::ptr::null_mut(),
      null.as_raw_fd(),
      std::ptr::null_mut(),
      max,
      libc::SPLICE_F_NONBLOCK,
    )
  };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(n as usize)
}

/// The most open files the kernel lets any process have (`fs.nr_open`): a
/// hard RLIMIT_NOFILE above it cannot be set.
pub fn max_open_files_ceiling() -> Option<u64> {
  std::fs::read_to_string("/proc/sys/fs/nr_open")
    .ok()
    .and_then(|s| s.trim().parse::<u64>().ok())
}

/// Whether `pid` or one of its descendants is blocked reading its input: a
/// terminal, or the pipe that is `pid`'s own stdin (not a pipe between two
/// commands of a pipeline). `/proc/<p>/syscall` shows a read of such a
/// descriptor, or a poll/select while stdin is a terminal; when the syscall
/// file cannot be read, the kernel's wait channel says the same.
pub fn awaiting_input(pid: i32) -> bool {
  let input = fd_target(pid, 0);
  let mut todo = vec![pid];
  let mut seen = 0;
  while let Some(p) = todo.pop() {
    seen += 1;
    if seen > 256 {
      break;
    }
    if blocked_reading(p, input.as_deref()) {
      return true;
    }
    todo.extend(super::children_of(Some(p)));
  }
  false
}

fn fd_target(pid: i32, fd: i64) -> Option<String> {
  std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
    .ok()
    .map(|l| l.to_string_lossy().into_owned())
}

fn is_terminal(target: &str) -> bool {
  target.starts_with("/dev/pts/") || target.starts_with("/dev/tty")
}

/// A terminal, or the session's own input pipe.
fn is_input(target: &str, input: Option<&str>) -> bool {
  is_terminal(target) || (target.starts_with("pipe:") && input == Some(target))
}

fn blocked_reading(pid: i32, input: Option<&str>) -> bool {
  let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
    return false;
  };
  // state after the command name's closing parenthesis: S = interruptible sleep
  if stat.rsplit_once(") ").map(|(_, r)| r.starts_with('S')) != Some(true) {
    return false;
  }
  let stdin_is_tty = || fd_target(pid, 0).is_some_and(|t| is_terminal(&t));
  if let Ok(sys) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) {
    let mut f = sys.split_whitespace();
    let Some(nr) = f.next().and_then(|n| n.parse::<i64>().ok()) else {
      return false;
    };
    let arg0 = f
      .next()
      .and_then(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    if nr == libc::SYS_read || nr == libc::SYS_readv || nr == libc::SYS_pread64 {
      return arg0
        .and_then(|fd| fd_target(pid, fd))
        .is_some_and(|t| is_input(&t, input));
    }
    let polls = [
      libc::SYS_ppoll,
      libc::SYS_pselect6,
      libc::SYS_epoll_pwait,
      #[cfg(target_arch = "x86_64")]
      libc::SYS_poll,
      #[cfg(target_arch = "x86_64")]
      libc::SYS_select,
      #[cfg(target_arch = "x86_64")]
      libc::SYS_epoll_wait,
    ];
    return polls.contains(&nr) && stdin_is_tty();
  }
  let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
  match wchan.trim() {
    "n_tty_read" => true,
    "pipe_read" | "pipe_wait" => fd_target(pid, 0).is_some_and(|t| is_input(&t, input)),
    "wait_woken" | "do_select" | "do_sys_poll" | "ep_poll" => stdin_is_tty(),
    _ => false,
  }
}

/// What this kernel offers a sandbox (see [`super::SandboxSupport`]).
pub fn sandbox_support() -> super::SandboxSupport {
  // LANDLOCK_CREATE_RULESET_VERSION: the ABI version, or an error without Landlock
  // SAFETY: LANDLOCK_CREATE_RULESET_VERSION takes a null attribute and size 0 by definition and
  // only returns the ABI version; no descriptor is made.
  let abi = unsafe {
    libc::syscall(
      libc::SYS_landlock_create_ruleset,
      std::ptr::null::<libc::c_void>(),
      0usize,
      1u32,
    )
  };
  // PR_SET_SECCOMP with a null filter: EFAULT when filters are supported, EINVAL
  // when not; nothing is installed either way
  // SAFETY: PR_SET_SECCOMP with a null filter installs nothing (EFAULT or EINVAL): it probes
  // support without changing this process.
  let r = unsafe {
    libc::prctl(
      libc::PR_SET_SECCOMP,
      libc::SECCOMP_MODE_FILTER as libc::c_ulong,
      0 as libc::c_ulong,
      0,
      0,
    )
  };
  let seccomp = r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EFAULT);
  let read_num = |p: &str| -> Option<i64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
  // SAFETY: geteuid has no preconditions and cannot fail.
  let root = unsafe { libc::geteuid() } == 0;
  let max_ns = read_num("/proc/sys/user/max_user_namespaces").unwrap_or(0);
  // Debian's old switch, and Ubuntu's AppArmor restriction (24.04+)
  let debian_off = read_num("/proc/sys/kernel/unprivileged_userns_clone") == Some(0);
  let apparmor = read_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1);
  super::SandboxSupport {
    landlock_abi: if abi > 0 { abi as u32 } else { 0 },
    seccomp,
    user_namespaces: max_ns > 0 && (root || (!debian_off && !apparmor)),
    user_namespaces_restricted: !root && (debian_off || apparmor),
    sandbox_exec: false,
  }
}

/// Whether the mount table of `mountinfo` (this process's
/// `/proc/self/mountinfo`, kept open) changed since the last call on the
/// same descriptor: the kernel marks the file with a priority event on every
/// mount or unmount in the namespace, and clears the mark for the
/// descriptor when a poll reports it. Waits up to `timeout_ms` for a change
/// (`-1`: until one; `0`: not at all). `Err` if the poll fails.
pub fn mounts_changed(mountinfo: &std::fs::File, timeout_ms: i32) -> io::Result<bool> {
  use std::os::fd::AsRawFd;
  loop {
    let mut p = libc::pollfd {
      fd: mountinfo.as_raw_fd(),
      events: libc::POLLPRI,
      revents: 0,
    };
    // SAFETY: `p` is one live pollfd for the call, whose descriptor the borrowed File keeps open.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n >= 0 {
      return Ok(n > 0 && p.revents & (libc::POLLPRI | libc::POLLERR) != 0);
    }
    let e = io::Error::last_os_error();
    if e.kind() != io::ErrorKind::Interrupted {
      return Err(e);
    }
  }
}
