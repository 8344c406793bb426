//! The POSIX calls Linux and macOS share, each wrapped once.

/// The file of the shared object (or program) this code was loaded from
/// (`dladdr`): where the sandbox helper is looked for.
pub fn this_library() -> Option<std::path::PathBuf> {
  use std::os::unix::ffi::OsStrExt;
  // SAFETY: an all-zero Dl_info (null pointers) is a valid value for dladdr to fill.
  let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
  let addr = this_library as *const () as *const libc::c_void;
  // SAFETY: dladdr only reads the loader's tables for an address of ours
  if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
    return None;
  }
  // SAFETY: dli_fname is a NUL-terminated path owned by the loader
  let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
  let p = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
  p.canonicalize().ok().or(Some(p))
}

/// Send `sig` to `pid` (POSIX `kill`; 0 probes). Async-signal-safe.
pub fn signal(pid: i32, sig: i32) -> bool {
  // SAFETY: kill(2) takes plain integers and touches no memory of ours; async-signal-safe.
  unsafe { libc::kill(pid, sig) == 0 }
}

/// Whether a process or thread `pid` exists, a zombie too: `kill(pid, 0)`
/// succeeds, or is refused (`EPERM`: someone else's). One system call with
/// no path to walk, where a failed `open` of `/proc/<pid>/…` costs a
/// lookup that proc cannot cache: the sweeps probe ranges of pids, most of
/// them already gone (issue 28).
pub fn pid_exists(pid: i32) -> bool {
  // SAFETY: kill(2) with signal 0 sends nothing and touches no memory of ours
  let sent = unsafe { libc::kill(pid, 0) } == 0;
  sent || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Sleep `d` with `nanosleep` (async-signal-safe, unlike `std::thread::sleep`
/// on some libcs).
pub fn nanosleep(d: std::time::Duration) {
  let ts = libc::timespec {
    tv_sec: d.as_secs() as _,
    tv_nsec: d.subsec_nanos() as libc::c_long,
  };
  // SAFETY: `ts` is a live timespec; a null remainder pointer is allowed.
  unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// This process's real user id.
pub fn uid() -> u32 {
  // SAFETY: getuid has no preconditions and cannot fail.
  unsafe { libc::getuid() }
}

/// This process's effective user id.
pub fn euid() -> u32 {
  // SAFETY: geteuid has no preconditions and cannot fail.
  unsafe { libc::geteuid() }
}

/// The memory page size in bytes.
pub fn page_size() -> u64 {
  // SAFETY: sysconf takes a plain name and reads no memory of ours.
  unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64
}

/// Clock ticks per second (the unit of `/proc/<pid>/stat`'s CPU times).
pub fn clock_ticks() -> u64 {
  // SAFETY: sysconf takes a plain name and reads no memory of ours.
  unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// What `waitpid(pid, WNOHANG)` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
  /// It was reaped.
  Reaped,
  /// Not our child (any more): ECHILD.
  NotChild,
  /// Nothing to reap yet, or another error.
  Nothing,
}

/// Reap `pid` if it is a zombie child of this process (`WNOHANG`).
pub fn reap_nohang(pid: i32) -> Waited {
  let mut status = 0;
  // SAFETY: `status` is a live i32 for waitpid to write; WNOHANG reaps only `pid`, so no child
  // another owner waits for is taken.
  let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
  if r == pid {
    Waited::Reaped
  } else if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
    Waited::NotChild
  } else {
    Waited::Nothing
  }
}

/// A resource of `getrlimit`/`setrlimit` (`libc::RLIMIT_*`): an unsigned
/// enum in glibc, an `int` in musl and on macOS.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub type Resource = libc::__rlimit_resource_t;
/// A resource of `getrlimit`/`setrlimit` (`libc::RLIMIT_*`): an unsigned
/// enum in glibc, an `int` in musl and on macOS.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub type Resource = libc::c_int;

/// This process's `(soft, hard)` limit of `res` (`RLIM_INFINITY` is
/// `u64::MAX`; every supported target is 64-bit, so `rlim_t` is 64 bits).
pub fn get_rlimit(res: Resource) -> (u64, u64) {
  let mut lim = libc::rlimit {
    rlim_cur: libc::RLIM_INFINITY,
    rlim_max: libc::RLIM_INFINITY,
  };
  // SAFETY: `lim` is a live rlimit for getrlimit to fill.
  unsafe { libc::getrlimit(res, &mut lim) };
  (lim.rlim_cur, lim.rlim_max)
}

/// Set this process's limit of `res`. Async-signal-safe (one system call):
/// meant for the child between fork and exec.
pub fn set_rlimit(res: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
  let lim = libc::rlimit {
    rlim_cur: soft,
    rlim_max: hard,
  };
  // SAFETY: `lim` is a live rlimit setrlimit reads; one system call, async-signal-safe.
  if unsafe { libc::setrlimit(res, &lim) } != 0 {
    return Err(std::io::Error::last_os_error());
  }
  Ok(())
}

/// Whether environment variable names `a` and `b` are the same variable
/// (byte for byte).
pub fn env_name_eq(a: &std::ffi::OsStr, b: &str) -> bool {
  a.as_encoded_bytes() == b.as_bytes()
}

/// A program path as given (no `PATHEXT` here).
pub fn with_exe_suffix(p: std::path::PathBuf) -> std::path::PathBuf {
  p
}

/// Whether this directory can be a child's working directory (search permission).
pub fn can_enter(dir: &std::path::Path) -> bool {
  nix::unistd::access(dir, nix::unistd::AccessFlags::X_OK).is_ok()
}

/// Whether we may write `p` (its write permission).
pub fn is_writable(p: &std::path::Path) -> bool {
  nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Whether a file may be executed by us (its execute permission).
pub fn is_executable(file: &std::path::Path) -> bool {
  nix::unistd::access(file, nix::unistd::AccessFlags::X_OK).is_ok()
}

#[cfg(test)]
mod tests {
  use crate::platform::*;

  #[test]
  fn rlimits_round_trip() {
    let (soft, hard) = get_rlimit(libc::RLIMIT_NOFILE);
    assert!(soft <= hard && soft > 0);
    set_rlimit(libc::RLIMIT_NOFILE, soft, hard).unwrap();
    assert_eq!(get_rlimit(libc::RLIMIT_NOFILE), (soft, hard));
    // soft above hard is refused, and nothing changes
    let err = set_rlimit(libc::RLIMIT_NOFILE, 2, 1).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
    assert_eq!(get_rlimit(libc::RLIMIT_NOFILE), (soft, hard));
  }

  #[test]
  fn the_kernel_file_ceiling_is_known_or_none() {
    // the host's own hard limit was set under the ceiling
    let n = max_open_files_ceiling().expect("fs.nr_open / kern.maxfilesperproc");
    let (_, hard) = get_rlimit(libc::RLIMIT_NOFILE);
    assert!(hard == u64::MAX || hard <= n, "hard {hard} ceiling {n}");
  }
}

#[cfg(test)]
mod pipe_tests {
  use crate::platform::*;
  use std::os::fd::AsRawFd;

  #[test]
  fn pending_and_discarded_bytes_are_exact() {
    let (r, w) = nix::unistd::pipe().unwrap();
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(nix::unistd::write(&w, &data).unwrap(), data.len());
    assert_eq!(pipe_pending(r.as_raw_fd()).unwrap(), 10_000);
    set_nonblocking(r.as_raw_fd()).unwrap();
    if ZERO_COPY_DISCARD {
      assert_eq!(discard_from_pipe(r.as_raw_fd(), 4_000).unwrap(), 4_000);
      assert_eq!(pipe_pending(r.as_raw_fd()).unwrap(), 6_000);
    }
    let from = if ZERO_COPY_DISCARD { 4_000 } else { 0 };
    let mut buf = Vec::with_capacity(20_000);
    assert_eq!(read_into(r.as_raw_fd(), &mut buf).unwrap(), 10_000 - from);
    assert_eq!(buf, &data[from..]);
    // empty and non-blocking: nothing waits
    let e = read_into(r.as_raw_fd(), &mut buf).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    if ZERO_COPY_DISCARD {
      let e = discard_from_pipe(r.as_raw_fd(), 100).unwrap_err();
      assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    drop(w);
    assert_eq!(read_into(r.as_raw_fd(), &mut buf).unwrap(), 0);
  }
}

/// The `accept` errors after which a listener goes on: out of descriptors,
/// buffers or memory, a peer gone before its accept, an interruption.
pub const ACCEPT_RETRY: [i32; 6] = [
  libc::EMFILE,
  libc::ENFILE,
  libc::ECONNABORTED,
  libc::EINTR,
  libc::ENOBUFS,
  libc::ENOMEM,
];

/// Each entry of the host's environment (`NAME=value` as `environ` holds
/// it, without its NUL), in order, read in place. Like
/// `std::env::vars_os`, this reads `environ` while nothing of ours changes
/// it (std's `set_var` takes a lock this read cannot; Node's `process.env`
/// writes happen on the JS thread, which never waits for a spawn).
pub fn environ_entries(mut f: impl FnMut(&[u8])) {
  extern "C" {
    static environ: *const *const std::ffi::c_char;
  }
  // SAFETY: `environ` is libc's NULL-terminated array of NUL-terminated
  // strings; each is only read, up to its NUL, during the call of `f`
  unsafe {
    let mut p = environ;
    while !p.is_null() && !(*p).is_null() {
      f(std::ffi::CStr::from_ptr(*p).to_bytes());
      p = p.add(1);
    }
  }
}
