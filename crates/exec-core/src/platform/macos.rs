//! macOS: the twins of the Linux calls.

use std::io;

/// macOS has no parent-death signal: a no-op.
/// Children of a host that died are still found by their group.
pub fn kill_me_with_parent() -> io::Result<()> {
  Ok(())
}

/// Mark every descriptor from `first` up close-on-exec. Async-signal-safe:
/// one fcntl per possible descriptor up to the soft RLIMIT_NOFILE (capped).
pub fn cloexec_from(first: i32) {
  // SAFETY: getdtablesize has no preconditions.
  let max = unsafe { libc::getdtablesize() }.min(1 << 16);
  for fd in first.max(0)..max {
    // SAFETY: fcntl F_GETFD/F_SETFD read no memory of ours and close nothing: they only set close-
    // on-exec (a closed fd fails with EBADF); async-signal-safe.
    unsafe {
      let flags = libc::fcntl(fd, libc::F_GETFD);
      if flags >= 0 {
        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
      }
    }
  }
}

/// macOS pipes size themselves (up to 64 KiB): a no-op, the size is not
/// known (`None`), so nothing is left in the pipe on purpose.
pub fn grow_pipe(_fd: i32, _bytes: i32) -> Option<usize> {
  None
}

/// Whether [`discard_from_pipe`] drops bytes in the kernel: macOS has no
/// `splice`, so output is always read.
pub const ZERO_COPY_DISCARD: bool = false;

/// macOS has no `splice`: always `Unsupported` (the caller reads instead).
pub fn discard_from_pipe(_fd: i32, _max: usize) -> io::Result<usize> {
  Err(io::ErrorKind::Unsupported.into())
}

/// `kern.maxfilesperproc`: a hard RLIMIT_NOFILE above it cannot be set.
pub fn max_open_files_ceiling() -> Option<u64> {
  let mut v: libc::c_int = 0;
  let mut len = std::mem::size_of::<libc::c_int>();
  // SAFETY: a literal NUL-terminated name; `v` and `len` are live and `len` holds v's size, so
  // sysctlbyname writes within `v`; no new value is passed (null, 0).
  let r = unsafe {
    libc::sysctlbyname(
      c"kern.maxfilesperproc".as_ptr(),
      (&mut v as *mut libc::c_int).cast(),
      &mut len,
      std::ptr::null_mut(),
      0,
    )
  };
  (r == 0 && v > 0).then_some(v as u64)
}

/// macOS has no `/proc`: a prompt waiting for input is not detected (the
/// answer then waits its whole yield time).
pub fn awaiting_input(_pid: i32) -> bool {
  false
}

/// What this system offers a sandbox: Seatbelt through `/usr/bin/sandbox-exec`.
pub fn sandbox_support() -> super::SandboxSupport {
  super::SandboxSupport {
    landlock_abi: 0,
    seccomp: false,
    user_namespaces: false,
    user_namespaces_restricted: false,
    sandbox_exec: std::path::Path::new("/usr/bin/sandbox-exec").is_file(),
  }
}
