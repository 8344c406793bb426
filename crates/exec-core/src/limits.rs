//! Opt-in resource limits for an execution.
//!
//! - `cpu_seconds`, `file_size_bytes`, `open_files`: kernel rlimits, set in
//!   the child between fork and exec, so they hold from its first instruction
//!   and descendants inherit them. This takes a real fork instead of
//!   posix_spawn: runs with limits pay for it, runs without keep the fast
//!   path. CPU: SIGXCPU at the limit, SIGKILL one second later; file size:
//!   SIGXFSZ.
//! - `memory_bytes`, `max_processes`: a watchdog sums the resident memory and
//!   counts the processes of the execution's tree (every process carrying its
//!   mark, see [`crate::tree`]) every few milliseconds and kills the tree when
//!   a limit is passed. It works without root and also for root (for whom
//!   RLIMIT_NPROC does not apply), and says exactly which limit was hit.
//!   A tree can overshoot by what it allocates or forks within one interval.
//!
//! Without limits nothing of this runs.

use std::time::Duration;

use crate::error::{ErrorCode, ExecError};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
  pub memory_bytes: Option<u64>,
  pub cpu_seconds: Option<u64>,
  pub max_processes: Option<u64>,
  pub file_size_bytes: Option<u64>,
  pub open_files: Option<u64>,
}

/// How often the watchdog looks.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(20);

impl Limits {
  pub fn is_empty(&self) -> bool {
    *self == Limits::default()
  }

  pub fn needs_watchdog(&self) -> bool {
    self.memory_bytes.is_some() || self.max_processes.is_some()
  }

  /// Everything the child must do before exec, prepared in the parent so
  /// that the child only makes async-signal-safe syscalls.
  pub fn child_plan(
    &self,
    cgroup: Option<&crate::cgroup::PidsCgroup>,
  ) -> Result<ChildPlan, ExecError> {
    let mut rlimits = Vec::new();
    if let Some(s) = self.cpu_seconds {
      rlimits.push((libc::RLIMIT_CPU, s.max(1), s.max(1) + 1));
    }
    if let Some(b) = self.file_size_bytes {
      rlimits.push((libc::RLIMIT_FSIZE, b, b));
    }
    if let Some(n) = self.open_files {
      rlimits.push((libc::RLIMIT_NOFILE, n, n));
    }
    let cgroup_procs = match cgroup {
      Some(cg) => Some(
        std::ffi::CString::new(
          cg.path()
            .join("cgroup.procs")
            .into_os_string()
            .into_encoded_bytes(),
        )
        .map_err(|_| ExecError::new(ErrorCode::ELIMIT, "bad cgroup path"))?,
      ),
      None => None,
    };
    if let (None, Some(max)) = (&cgroup_procs, self.max_processes) {
      // no cgroup: RLIMIT_NPROC counts every process of the user (not root)
      let n = crate::cgroup::user_process_count() + max;
      rlimits.push((libc::RLIMIT_NPROC, n, n));
    }
    Ok(ChildPlan {
      rlimits,
      cgroup_procs,
      pdeathsig_parent: None,
    })
  }

  /// What an exit by `signal` (or a shell's `128+N` report of a child's
  /// signal death, in `exit_code`) means under these limits.
  pub fn explain_signal(&self, signal: Option<&str>, exit_code: i32) -> Option<ExecError> {
    let by_code = match exit_code - 128 {
      libc::SIGXCPU => Some("SIGXCPU"),
      libc::SIGXFSZ => Some("SIGXFSZ"),
      _ => None,
    };
    match signal.or(by_code) {
      Some("SIGXCPU") => self.cpu_seconds.map(cpu_error),
      Some("SIGXFSZ") => self.file_size_bytes.map(|b| {
        ExecError::new(
          ErrorCode::ELIMIT,
          format!("file size limit of {} exceeded", human_bytes(b)),
        )
      }),
      _ => None,
    }
  }

  /// One look at the tree marked `mark`: an error if a watched limit is passed.
  pub fn check_tree(&self, mark: &str) -> Option<ExecError> {
    let pids = crate::tree::running_marked(mark);
    if let Some(max) = self.max_processes {
      if pids.len() as u64 > max {
        return Some(ExecError::new(
          ErrorCode::ELIMIT,
          format!("process limit of {max} exceeded"),
        ));
      }
    }
    if let Some(max) = self.memory_bytes {
      let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
      let rss: u64 = pids.iter().map(|p| resident_pages(*p) * page).sum();
      if rss > max {
        return Some(ExecError::new(
          ErrorCode::ELIMIT,
          format!("memory limit of {} exceeded", human_bytes(max)),
        ));
      }
    }
    None
  }
}

/// What runs in the child between fork and exec.
pub struct ChildPlan {
  rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
  cgroup_procs: Option<std::ffi::CString>,
  /// With `die_with_parent`: the host's pid, to catch a host that died before
  /// the prctl.
  pub pdeathsig_parent: Option<i32>,
}

impl ChildPlan {
  /// Async-signal-safe: setrlimit, open, write, close.
  pub fn apply(&self) -> std::io::Result<()> {
    // Node ignores SIGXFSZ and ignored signals survive exec: give the limits
    // their signals back
    unsafe {
      libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
      libc::signal(libc::SIGXCPU, libc::SIG_DFL);
    }
    if let Some(parent) = self.pdeathsig_parent {
      unsafe {
        if libc::prctl(
          libc::PR_SET_PDEATHSIG,
          libc::SIGKILL as libc::c_ulong,
          0,
          0,
          0,
        ) != 0
        {
          return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
          libc::_exit(137);
        }
      }
    }
    if let Some(path) = &self.cgroup_procs {
      let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
      if fd < 0 {
        return Err(std::io::Error::last_os_error());
      }
      // "0" moves the writing process itself
      let r = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
      unsafe { libc::close(fd) };
      if r != 1 {
        return Err(std::io::Error::last_os_error());
      }
    }
    for &(res, soft, hard) in &self.rlimits {
      let lim = libc::rlimit64 {
        rlim_cur: soft,
        rlim_max: hard,
      };
      if unsafe { libc::setrlimit64(res, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
      }
    }
    Ok(())
  }
}

pub fn cpu_error(s: u64) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("CPU time limit of {s}s exceeded"),
  )
}

fn resident_pages(pid: i32) -> u64 {
  std::fs::read_to_string(format!("/proc/{pid}/statm"))
    .ok()
    .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
    .unwrap_or(0)
}

/// `268435456` -> `256 MiB`.
pub fn human_bytes(b: u64) -> String {
  const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
  for (name, size) in UNITS {
    if b >= size && b.is_multiple_of(size) {
      return format!("{} {name}", b / size);
    }
  }
  format!("{b} bytes")
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn human() {
    assert_eq!(human_bytes(256 << 20), "256 MiB");
    assert_eq!(human_bytes(1 << 30), "1 GiB");
    assert_eq!(human_bytes(1000), "1000 bytes");
  }

  #[test]
  fn explains_signals() {
    let l = Limits {
      cpu_seconds: Some(2),
      ..Default::default()
    };
    assert_eq!(
      l.explain_signal(Some("SIGXCPU"), 0).unwrap().message(),
      "exec: CPU time limit of 2s exceeded (ELIMIT)"
    );
    assert!(l.explain_signal(Some("SIGTERM"), 143).is_none());
    // bash reports its child's SIGXCPU death as 152
    assert!(l.explain_signal(None, 152).is_some());
  }
}
