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
      let hard = s.max(1).saturating_add(1);
      check_hard(libc::RLIMIT_CPU, "cpuSeconds", s, hard)?;
      rlimits.push((libc::RLIMIT_CPU, s.max(1), hard));
    }
    if let Some(b) = self.file_size_bytes {
      check_hard(libc::RLIMIT_FSIZE, "fileSizeBytes", b, b)?;
      rlimits.push((libc::RLIMIT_FSIZE, b, b));
    }
    if let Some(n) = self.open_files {
      check_hard(libc::RLIMIT_NOFILE, "openFiles", n, n)?;
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
      // (never above the hard limit, which only root could raise: the
      // watchdog still counts)
      let n = (crate::cgroup::user_process_count() + max).min(host_limit(libc::RLIMIT_NPROC).1);
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

  /// What a program that gave up said about a limit, judging by its error
  /// output (`stderr`), under these limits: EMFILE under `open_files`,
  /// EAGAIN (a failed fork) under `max_processes`, EFBIG under
  /// `file_size_bytes`. For a program that died before it was ready, where
  /// no signal or watchdog explains the death.
  pub fn explain_output(&self, stderr: &str) -> Option<ExecError> {
    let said = |text: &str, errno: i32| {
      stderr.contains(text) || {
        // ld.so and some tools print the bare number: `Error 24`
        let tag = format!("Error {errno}");
        stderr.match_indices(&tag).any(|(i, _)| {
          !stderr[i + tag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
        })
      }
    };
    let limit = |what: String| Some(ExecError::new(ErrorCode::ELIMIT, what));
    if let Some(n) = self.open_files {
      if said("Too many open files", libc::EMFILE) {
        return limit(format!("open files limit of {n} exceeded"));
      }
    }
    if let Some(n) = self.max_processes {
      if said("Resource temporarily unavailable", libc::EAGAIN) {
        return limit(format!("process limit of {n} exceeded"));
      }
    }
    if let Some(b) = self.file_size_bytes {
      if said("File too large", libc::EFBIG) {
        return limit(format!("file size limit of {} exceeded", human_bytes(b)));
      }
    }
    None
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

/// This process's `(soft, hard)` limit of `res`.
fn host_limit(res: libc::__rlimit_resource_t) -> (u64, u64) {
  let mut lim = libc::rlimit64 {
    rlim_cur: libc::RLIM64_INFINITY,
    rlim_max: libc::RLIM64_INFINITY,
  };
  unsafe { libc::getrlimit64(res, &mut lim) };
  (lim.rlim_cur, lim.rlim_max)
}

/// A limit the child could not set (setrlimit fails with EPERM, which would
/// surface as a puzzling spawn error): above the host's hard limit without
/// root, or more open files than the kernel allows (`fs.nr_open`).
fn check_hard(
  res: libc::__rlimit_resource_t,
  name: &str,
  value: u64,
  hard: u64,
) -> Result<(), ExecError> {
  let too_high = |max: u64, whose: &str| {
    Err(ExecError::invalid(format!(
      "limits.{name} of {value} is above {whose} ({max})"
    )))
  };
  let (_, host_hard) = host_limit(res);
  if hard > host_hard && unsafe { libc::geteuid() } != 0 {
    return too_high(host_hard, "the hard limit of this host");
  }
  if res == libc::RLIMIT_NOFILE {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
      .ok()
      .and_then(|s| s.trim().parse::<u64>().ok());
    if let Some(max) = nr_open.filter(|m| hard > *m) {
      return too_high(max, "the kernel's maximum fs.nr_open");
    }
  }
  Ok(())
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

/// The limits of one execution tree (every process carrying `mark`), as
/// every entry point uses them: the pids cgroup, the plan for the child, the
/// watchdog, the attribution of SIGXCPU/SIGXFSZ, and the cleanup.
pub struct LimitGuard {
  limits: Limits,
  mark: String,
  cgroup: Option<crate::cgroup::PidsCgroup>,
  hit: std::sync::atomic::AtomicBool,
}

impl LimitGuard {
  /// Prepare for a tree marked `mark` (creates the pids cgroup if
  /// `max_processes` is set and the host may create one).
  pub fn new(limits: &Limits, mark: &str) -> LimitGuard {
    let cgroup = limits
      .max_processes
      .and_then(|max| crate::cgroup::PidsCgroup::create(mark, max));
    LimitGuard {
      limits: limits.clone(),
      mark: mark.to_owned(),
      cgroup,
      hit: std::sync::atomic::AtomicBool::new(false),
    }
  }

  pub fn limits(&self) -> &Limits {
    &self.limits
  }

  /// The mark of the tree.
  pub fn mark(&self) -> &str {
    &self.mark
  }

  /// What the child must do before exec; `None` when nothing (the
  /// posix_spawn fast path stays).
  pub fn child_plan(&self, die_with_parent: bool) -> Result<Option<ChildPlan>, ExecError> {
    if self.limits.is_empty() && !die_with_parent {
      return Ok(None);
    }
    let mut plan = self.limits.child_plan(self.cgroup.as_ref())?;
    if die_with_parent {
      plan.pdeathsig_parent = Some(std::process::id() as i32);
    }
    Ok(Some(plan))
  }

  /// Resolves with the limit error when the tree passes a watched limit
  /// (memory, process count; checked every [`WATCH_INTERVAL`]); never
  /// resolves when nothing is watched. Cancel-safe.
  pub async fn watch(&self) -> ExecError {
    if !self.limits.needs_watchdog() {
      return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    loop {
      tick.tick().await;
      if let Some(e) = self.check() {
        return e;
      }
    }
  }

  /// One look: an error if a watched limit is passed.
  pub fn check(&self) -> Option<ExecError> {
    if let (Some(cg), Some(max)) = (&self.cgroup, self.limits.max_processes) {
      if cg.hit_max() {
        return Some(ExecError::new(
          ErrorCode::ELIMIT,
          format!("process limit of {max} exceeded"),
        ));
      }
    }
    self.limits.check_tree(&self.mark)
  }

  /// SIGKILL the whole tree at once (the group `pgid`, the marked processes
  /// and the cgroup's members): a tree over a limit gets no grace.
  pub fn kill_tree(&self, pgid: i32) {
    self.hit.store(true, std::sync::atomic::Ordering::Relaxed);
    // the marked first (recorded for the reaper as they are signalled)
    crate::tree::signal_marked(&self.mark, libc::SIGKILL);
    crate::group::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
    if pgid > 1 {
      unsafe { libc::kill(pgid, libc::SIGKILL) };
    }
    if let Some(cg) = &self.cgroup {
      for p in cg.procs() {
        unsafe { libc::kill(p, libc::SIGKILL) };
      }
    }
  }

  /// What an exit by `signal` (or a shell's 128+N) means under the limits.
  pub fn explain(&self, signal: Option<&str>, exit_code: i32) -> Option<ExecError> {
    self.limits.explain_signal(signal, exit_code)
  }

  /// The run is over: the cgroup is emptied (SIGKILL when the limit was hit)
  /// and removed in the background.
  pub fn release(&mut self) {
    if let Some(cg) = self.cgroup.take() {
      reap_cgroup(cg, self.hit.load(std::sync::atomic::Ordering::Relaxed));
    }
  }
}

impl Drop for LimitGuard {
  fn drop(&mut self) {
    self.release();
  }
}

/// SIGKILL what is left in the cgroup when the limit was hit (members stay in
/// it even if they scrub the mark), and remove it once it is empty.
fn reap_cgroup(cg: crate::cgroup::PidsCgroup, kill: bool) {
  let job = move || {
    for _ in 0..500 {
      let procs = cg.procs();
      if procs.is_empty() && cg.remove() {
        return;
      }
      if kill {
        for p in procs {
          unsafe { libc::kill(p, libc::SIGKILL) };
        }
      }
      std::thread::sleep(Duration::from_millis(20));
    }
  };
  std::thread::spawn(job);
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

  #[test]
  fn limits_above_the_hard_limit_are_einval() {
    let l = Limits {
      open_files: Some(u64::MAX - 1),
      ..Default::default()
    };
    let e = l.child_plan(None).err().unwrap();
    assert_eq!(e.code, ErrorCode::EINVAL);
    assert!(
      e.what
        .starts_with("limits.openFiles of 18446744073709551614 is above "),
      "{}",
      e.what
    );
    // the host's own hard limit is fine
    let (_, hard) = host_limit(libc::RLIMIT_NOFILE);
    let l = Limits {
      open_files: Some(hard.min(4096)),
      cpu_seconds: Some(u64::MAX),
      ..Default::default()
    };
    assert!(l.child_plan(None).is_ok());
  }

  #[test]
  fn explains_output() {
    let l = Limits {
      open_files: Some(3),
      max_processes: Some(4),
      ..Default::default()
    };
    let ld = "bash: error while loading shared libraries: libtinfo.so.6: cannot open shared object file: Error 24";
    assert_eq!(
      l.explain_output(ld).unwrap().message(),
      "exec: open files limit of 3 exceeded (ELIMIT)"
    );
    assert!(l.explain_output("x: Error 240").is_none());
    assert_eq!(
      l.explain_output("bash: fork: retry: Resource temporarily unavailable")
        .unwrap()
        .message(),
      "exec: process limit of 4 exceeded (ELIMIT)"
    );
    // a limit that is not set explains nothing
    assert!(l.explain_output("head: File too large").is_none());
    assert!(Limits::default()
      .explain_output("Too many open files")
      .is_none());
  }
}
