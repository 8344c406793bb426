//! Linux: prctl, pipe sizes, close_range, `/proc/sys`.

use std::io;

/// Have the kernel SIGKILL this process when its parent thread dies
/// (`PR_SET_PDEATHSIG`). Async-signal-safe: for the child before exec.
pub fn kill_me_with_parent() -> io::Result<()> {
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

/// Whether [`kill_me_with_parent`] does anything on this system.
pub const DIE_WITH_PARENT: bool = true;

/// Mark every descriptor from `first` up close-on-exec, so that descriptors
/// the host left open do not reach the program. Async-signal-safe. Linux
/// 5.11+ (`close_range(CLOSE_RANGE_CLOEXEC)`); older kernels keep them, as
/// pipe children do.
pub fn cloexec_from(first: i32) {
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
/// wakes the reader less often.
pub fn grow_pipe(fd: i32, bytes: i32) {
  unsafe {
    libc::fcntl(fd, libc::F_SETPIPE_SZ, bytes);
  }
}

/// The most open files the kernel lets any process have (`fs.nr_open`): a
/// hard RLIMIT_NOFILE above it cannot be set.
pub fn max_open_files_ceiling() -> Option<u64> {
  std::fs::read_to_string("/proc/sys/fs/nr_open")
    .ok()
    .and_then(|s| s.trim().parse::<u64>().ok())
}
