//! Linux: the process table as `/proc` shows it. The readers used by the
//! host's signal handler ([`for_each_pid`], [`environ_match`], [`signal`])
//! allocate nothing and make raw system calls only (open, getdents64, read,
//! close, kill), so they are async-signal-safe.

use super::Environ;

/// Call `f` with the pid of every process but this one (one `getdents64`
/// walk of `/proc`, no allocation).
pub fn for_each_pid(f: &mut dyn FnMut(i32)) {
  // SAFETY: getpid has no preconditions; async-signal-safe.
  let me = unsafe { libc::getpid() };
  // SAFETY: a literal NUL-terminated path; the descriptor returned is owned here and closed at the
  // end.
  let dir = unsafe {
    libc::open(
      c"/proc".as_ptr(),
      libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
    )
  };
  if dir < 0 {
    return;
  }
  let mut dents = [0u8; 8192];
  loop {
    // SAFETY: `dents` is a live [u8; 8192]: pointer and length bound what getdents64 writes; `dir`
    // is the descriptor opened above.
    let n = unsafe { libc::syscall(libc::SYS_getdents64, dir, dents.as_mut_ptr(), dents.len()) };
    if n <= 0 {
      break;
    }
    let n = n as usize;
    let mut off = 0;
    while off < n {
      // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[] }
      let reclen = u16::from_ne_bytes([dents[off + 16], dents[off + 17]]) as usize;
      let name = &dents[off + 19..off + reclen];
      off += reclen;
      let mut pid: i32 = 0;
      let mut digits = 0;
      for &c in name {
        if c == 0 {
          break;
        }
        if !c.is_ascii_digit() {
          digits = 0;
          break;
        }
        pid = pid.saturating_mul(10).saturating_add((c - b'0') as i32);
        digits += 1;
      }
      if digits > 0 && pid != me {
        f(pid);
      }
    }
  }
  // SAFETY: `dir` was opened above, is owned here, and is closed once.
  unsafe { libc::close(dir) };
}

/// What one read of `/proc/<pid>/environ` (the environment `pid` started
/// with) finds of `needle`, which starts with a NUL (the environment is read
/// as if preceded by one). No allocation.
pub fn environ_match(pid: i32, needle: &[u8]) -> Environ {
  if needle.is_empty() || needle.len() > MAX_NEEDLE {
    return Environ::Miss;
  }
  // "/proc/<pid>/environ\0" without allocating
  let mut path = [0u8; 40];
  let mut len = 0;
  for &b in b"/proc/" {
    path[len] = b;
    len += 1;
  }
  let mut digits = [0u8; 12];
  let mut nd = 0;
  let mut p = pid;
  while p > 0 {
    digits[nd] = b'0' + (p % 10) as u8;
    p /= 10;
    nd += 1;
  }
  for i in (0..nd).rev() {
    path[len] = digits[i];
    len += 1;
  }
  for &b in b"/environ\0" {
    path[len] = b;
    len += 1;
  }
  // SAFETY: `path` is a live array, NUL-terminated by the loop above (at most 6 + 11 + 9 bytes of
  // its 40); the descriptor returned is owned here and closed below.
  let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
  if fd < 0 {
    return Environ::Unreadable;
  }
  // a sliding window: the environment starts as if preceded by a NUL
  let keep = needle.len() - 1;
  let mut buf = [0u8; 16384 + MAX_NEEDLE];
  buf[0] = 0;
  let mut have = 1;
  let mut hit = false;
  let mut total = 0usize;
  loop {
    // SAFETY: `buf[have..]` is a live mutable slice: pointer and length bound what read(2) writes;
    // `fd` was opened above.
    let n = unsafe { libc::read(fd, buf[have..].as_mut_ptr().cast(), buf.len() - have) };
    if n <= 0 {
      break;
    }
    total += n as usize;
    have += n as usize;
    if buf[..have].windows(needle.len()).any(|w| w == needle) {
      hit = true;
      break;
    }
    if have > keep {
      buf.copy_within(have - keep..have, 0);
      have = keep;
    }
  }
  // SAFETY: `fd` was opened above, is owned here, and is closed once.
  unsafe { libc::close(fd) };
  // the last variable has no NUL after it in some kernels' output
  if !hit && needle.last() == Some(&0) && have >= keep && buf[have - keep..have] == needle[..keep] {
    hit = true;
  }
  if hit {
    Environ::Hit
  } else if total == 0 {
    Environ::Empty
  } else {
    Environ::Miss
  }
}

/// The whole of `/proc/<pid>/environ` into `out` (cleared first), with a
/// NUL before it and after it (so that every variable is `\0NAME=value\0`,
/// whatever the kernel puts after the last one). False when it cannot be
/// opened. Allocates (the shared pass of the sweeps reads many processes into
/// one buffer): not for the signal handler, which uses [`environ_match`].
pub fn environ_read(pid: i32, out: &mut Vec<u8>) -> bool {
  use std::io::Read;
  out.clear();
  let Ok(mut f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
    return false;
  };
  out.push(0);
  if f.read_to_end(out).is_err() {
    return false;
  }
  out.push(0);
  true
}

/// Longest needle [`environ_match`] takes.
pub const MAX_NEEDLE: usize = 96;

/// The last pid the kernel allocated (in this pid namespace) and `pid_max`.
pub fn last_pid_and_max() -> Option<(i64, i64)> {
  // one read into the stack (the whole file is some 30 bytes): no size
  // query, no second read, as a sweep after every run asks for it
  let mut buf = [0u8; 128];
  let n = std::io::Read::read(&mut std::fs::File::open("/proc/loadavg").ok()?, &mut buf).ok()?;
  let last = std::str::from_utf8(&buf[..n])
    .ok()?
    .split_whitespace()
    .nth(4)?
    .parse()
    .ok()?;
  // read once: it changes only when an administrator writes it, and a sweep
  // after every run asked for it (an open and a read each time)
  static MAX: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
  let max = (*MAX.get_or_init(|| {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
      .ok()?
      .trim()
      .parse()
      .ok()
  }))?;
  Some((last, max))
}

/// The text of `/proc/<pid>/stat`.
pub fn stat_text(pid: i32) -> Option<String> {
  if pid <= 0 {
    return None;
  }
  std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()
}

/// The children of `pid` (of all its threads), from
/// `/proc/<pid>/task/*/children`; `None`: of this process.
pub fn children_of(pid: Option<i32>) -> Vec<i32> {
  let dir = match pid {
    Some(p) => format!("/proc/{p}/task"),
    None => "/proc/self/task".to_owned(),
  };
  let Ok(tasks) = std::fs::read_dir(dir) else {
    return Vec::new();
  };
  tasks
    .flatten()
    .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
    .flat_map(|s| {
      s.split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect::<Vec<i32>>()
    })
    .collect()
}

/// Whether this process is a child subreaper (`PR_GET_CHILD_SUBREAPER`).
pub fn child_subreaper() -> Option<bool> {
  let mut v: libc::c_int = 0;
  // SAFETY: `v` is a live c_int where PR_GET_CHILD_SUBREAPER writes its answer.
  let r = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut v as *mut libc::c_int) };
  (r == 0).then_some(v != 0)
}

/// Make this process a child subreaper or stop being one.
pub fn set_child_subreaper(on: bool) -> std::io::Result<()> {
  // SAFETY: PR_SET_CHILD_SUBREAPER takes plain integers and sets an attribute of this process.
  let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, on as libc::c_ulong, 0, 0, 0) };
  if r != 0 {
    return Err(std::io::Error::last_os_error());
  }
  Ok(())
}

/// Bytes written on the socket `fd` that its peer has not read yet
/// (`SIOCOUTQ`: a Unix socket's data stays charged to the sender until read).
pub fn unread_by_peer(fd: i32) -> Option<usize> {
  let mut n: libc::c_int = 0;
  // SAFETY: `n` is a live c_int where TIOCOUTQ writes the count; on a descriptor that is not a
  // socket the ioctl fails.
  let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
  (r == 0 && n >= 0).then_some(n as usize)
}

/// Pids whose process group is `pgid` (a walk of `/proc`).
pub fn group_members(pgid: i32) -> Vec<i32> {
  let mut out = Vec::new();
  for_each_pid(&mut |pid| {
    if let Some(s) = stat_text(pid) {
      // after "pid (comm) ": state ppid pgrp
      let pg = s
        .get(s.rfind(')').unwrap_or(0) + 2..)
        .and_then(|r| r.split_whitespace().nth(2))
        .and_then(|v| v.parse::<i32>().ok());
      if pg == Some(pgid) {
        out.push(pid);
      }
    }
  });
  out
}

/// The text of `/proc/self/cgroup` (this process's place in the cgroup
/// hierarchies).
pub fn self_cgroup() -> Option<String> {
  std::fs::read_to_string("/proc/self/cgroup").ok()
}

/// When the system booted, in seconds since the epoch (`btime` of `/proc/stat`).
pub fn boot_time() -> Option<u64> {
  std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
    s.lines().find_map(|l| {
      l.strip_prefix("btime ")
        .and_then(|v| v.trim().parse::<u64>().ok())
    })
  })
}

/// Resident pages of `pid` (`/proc/<pid>/statm`; 0 when unknown).
pub fn resident_pages(pid: i32) -> u64 {
  std::fs::read_to_string(format!("/proc/{pid}/statm"))
    .ok()
    .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
    .unwrap_or(0)
}

/// Whether `pid` names a thread of another process (its `Tgid` differs):
/// `/proc/<tid>` answers for a thread though `/proc` does not list it.
pub fn is_thread(pid: i32) -> bool {
  let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
    return false;
  };
  status
    .lines()
    .find_map(|l| l.strip_prefix("Tgid:"))
    .and_then(|v| v.trim().parse::<i32>().ok())
    .is_some_and(|tgid| tgid != pid)
}

/// The raw `/proc/<pid>/cmdline` (arguments separated by NULs).
pub fn cmdline(pid: i32) -> Vec<u8> {
  std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
}

/// How many tasks (threads: what RLIMIT_NPROC counts) the real user `uid` has.
pub fn user_task_count(uid: u32) -> u64 {
  let mut n = 0;
  for_each_pid(&mut |pid| {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
      return;
    };
    let field = |key: &str| {
      status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
    };
    // the real uid is the one the kernel counts against
    if field("Uid:") == Some(uid as u64) {
      n += field("Threads:").unwrap_or(1);
    }
  });
  n
}
