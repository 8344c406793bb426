//! Opt-in resource limits for an execution.
//!
//! - `cpu_seconds`, `file_size_bytes`, `open_files`: kernel rlimits, set in
//!   the child between fork and exec, so they hold from its first instruction
//!   and descendants inherit them. This takes a real fork instead of
//!   posix_spawn: runs with limits pay for it, runs without keep the fast
//!   path. CPU: SIGXCPU at the limit, SIGKILL one second later (the watchdog
//!   notes who passed the limit, so that the SIGKILL of a process that
//!   ignored SIGXCPU is reported as the limit); file size: SIGXFSZ.
//! - `memory_bytes`: a memory cgroup where the host can make one (see
//!   [`crate::process::cgroup`]): the kernel holds the limit for every process that
//!   ever joined the tree. Everywhere, a watchdog also sums the resident
//!   memory of the tree's processes every few milliseconds and kills the
//!   tree when the limit is passed. The tree is what [`crate::process::marks::members`]
//!   finds: the process group, the processes carrying the run's mark, the
//!   cgroup members and every descendant of those; a process that scrubbed
//!   its environment (`env -i`) still counts. Without a cgroup a tree can
//!   overshoot by what it allocates within one interval.
//! - `max_processes`: a pids cgroup where the host can make one (the kernel
//!   refuses the fork past the cap); elsewhere RLIMIT_NPROC, which the kernel
//!   checks against all the tasks (threads) of the user: it is set to the
//!   user's tasks at spawn time plus the limit plus [`NPROC_HEADROOM`] (root
//!   is exempt from it). The watchdog counts the tree too (tasks where the
//!   kernel counts tasks, processes where only the watchdog enforces) and
//!   kills it when it has more than the limit, naming the limit.
//!
//! Without limits nothing of this runs.

#[cfg(unix)]
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
#[cfg(unix)]
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{ErrorCode, ExecError};
#[cfg(unix)]
use crate::platform::{self, Resource};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
  pub memory_bytes: Option<u64>,
  pub cpu_seconds: Option<u64>,
  pub max_processes: Option<u64>,
  pub file_size_bytes: Option<u64>,
  pub open_files: Option<u64>,
}

/// How often the watchdog looks (memory, processes).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(20);
/// How often it looks when only the CPU time is watched (the SIGKILL comes a
/// second after the limit).
pub const CPU_WATCH_INTERVAL: Duration = Duration::from_millis(200);
/// Tasks RLIMIT_NPROC allows beyond the user's count at spawn time plus
/// `max_processes`: room for the threads the host (and the user's other
/// programs) start meanwhile, so that the kernel does not refuse the tree's
/// first forks; the watchdog enforces the limit itself.
pub const NPROC_HEADROOM: u64 = 16;

/// A number of the options that counts something (bytes, milliseconds,
/// processes): not NaN, not negative, finite. The message says what is wrong.
pub fn finite_non_negative(n: f64) -> Result<f64, String> {
  if n.is_nan() {
    return Err("must be a number, got NaN".into());
  }
  if n < 0.0 {
    return Err(format!("must not be negative, got {n}"));
  }
  if n.is_infinite() {
    return Err("must be finite".into());
  }
  Ok(n)
}

/// One limit's value as the options give it (a JavaScript number, a JSON
/// number): at least 1, a fraction cut. The message says what is wrong
/// ("must be at least 1, got 0"); the caller names the option. The addon and
/// `serve` both check with it.
pub fn limit_value(n: f64) -> Result<u64, String> {
  let n = finite_non_negative(n)?;
  if n < 1.0 {
    return Err(format!("must be at least 1, got {n}"));
  }
  Ok(n as u64)
}

impl Limits {
  /// The options' names of the limits (`limits: { memoryBytes, ... }`).
  pub const NAMES: [&'static str; 5] = [
    "memoryBytes",
    "cpuSeconds",
    "maxProcesses",
    "fileSizeBytes",
    "openFiles",
  ];

  /// Set the limit the options call `name` to `n`, checked with
  /// [`limit_value`]. An unknown name is an error that lists the known ones.
  pub fn set(&mut self, name: &str, n: f64) -> Result<(), String> {
    let slot = match name {
      "memoryBytes" => &mut self.memory_bytes,
      "cpuSeconds" => &mut self.cpu_seconds,
      "maxProcesses" => &mut self.max_processes,
      "fileSizeBytes" => &mut self.file_size_bytes,
      "openFiles" => &mut self.open_files,
      _ => {
        return Err(format!(
          "is not a limit, expected one of {}",
          Self::NAMES.join(", ")
        ))
      }
    };
    *slot = Some(limit_value(n)?);
    Ok(())
  }

  pub fn is_empty(&self) -> bool {
    *self == Limits::default()
  }

  pub fn needs_watchdog(&self) -> bool {
    self.memory_bytes.is_some() || self.max_processes.is_some() || self.cpu_seconds.is_some()
  }

  #[cfg(unix)]
  /// Everything the child must do before exec, prepared in the parent so
  /// that the child only makes async-signal-safe syscalls.
  pub fn child_plan(
    &self,
    cgroup: Option<&crate::process::cgroup::TreeCgroups>,
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
    let mut cgroup_procs = Vec::new();
    for f in cgroup.map(|c| c.procs_files()).unwrap_or_default() {
      cgroup_procs.push(
        std::ffi::CString::new(f.into_os_string().into_encoded_bytes())
          .map_err(|_| ExecError::new(ErrorCode::ELIMIT, "bad cgroup path"))?,
      );
    }
    let pids_cgroup = cgroup.is_some_and(|c| c.has_pids());
    if let (false, Some(max)) = (pids_cgroup, self.max_processes) {
      // no pids cgroup: RLIMIT_NPROC, which the kernel checks against every
      // task (thread) of the user (not root): what the user runs now, the
      // limit, and some headroom (never above the hard limit, which only
      // root could raise: the watchdog still counts)
      let n = crate::process::cgroup::user_task_count()
        .saturating_add(max)
        .saturating_add(NPROC_HEADROOM)
        .min(host_limit(libc::RLIMIT_NPROC).1);
      rlimits.push((libc::RLIMIT_NPROC, n, n));
    }
    Ok(ChildPlan {
      rlimits,
      cgroup_procs,
      pdeathsig_parent: None,
    })
  }

  #[cfg(unix)]
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

  #[cfg(unix)]
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

  #[cfg(unix)]
  /// One look at the tree's processes `members`: an error if a watched
  /// limit is passed. `count_tasks`: the process limit counts tasks
  /// (threads), as the kernel does where it enforces it.
  pub fn check_members(
    &self,
    members: &[crate::process::marks::Member],
    count_tasks: bool,
    uncounted: u64,
  ) -> Option<ExecError> {
    if let Some(max) = self.max_processes {
      let n: u64 = if count_tasks {
        members.iter().map(|m| m.threads).sum()
      } else {
        members.len() as u64
      };
      let n = n.saturating_sub(uncounted);
      if n > max {
        return Some(process_error(max));
      }
    }
    if let Some(max) = self.memory_bytes {
      let page = crate::platform::page_size();
      let rss: u64 = members
        .iter()
        .map(|m| platform::resident_pages(m.pid) * page)
        .sum();
      if rss > max {
        return Some(memory_error(max));
      }
    }
    None
  }
}

#[cfg(unix)]
/// This process's `(soft, hard)` limit of `res`.
fn host_limit(res: Resource) -> (u64, u64) {
  platform::get_rlimit(res)
}

#[cfg(unix)]
/// A limit the child could not set (setrlimit fails with EPERM, which would
/// surface as a puzzling spawn error): above the host's hard limit without
/// root, or more open files than the kernel allows (`fs.nr_open`).
fn check_hard(res: Resource, name: &str, value: u64, hard: u64) -> Result<(), ExecError> {
  let too_high = |max: u64, whose: &str| {
    Err(ExecError::invalid(format!(
      "limits.{name} of {value} is above {whose} ({max})"
    )))
  };
  let (_, host_hard) = host_limit(res);
  if hard > host_hard && crate::platform::euid() != 0 {
    return too_high(host_hard, "the hard limit of this host");
  }
  if res == libc::RLIMIT_NOFILE {
    let nr_open = platform::max_open_files_ceiling();
    if let Some(max) = nr_open.filter(|m| hard > *m) {
      return too_high(max, "the kernel's maximum fs.nr_open");
    }
  }
  Ok(())
}

#[cfg(unix)]
/// What runs in the child between fork and exec.
pub struct ChildPlan {
  rlimits: Vec<(Resource, u64, u64)>,
  cgroup_procs: Vec<std::ffi::CString>,
  /// With `die_with_parent`: the host's pid, to catch a host that died before
  /// the prctl.
  pub pdeathsig_parent: Option<i32>,
}

#[cfg(unix)]
impl ChildPlan {
  /// Async-signal-safe: setrlimit, open, write, close.
  pub fn apply(&self) -> std::io::Result<()> {
    // Node ignores SIGXFSZ and ignored signals survive exec: give the limits
    // their signals back
    platform::child_default_limit_signals();
    if let Some(parent) = self.pdeathsig_parent {
      platform::kill_me_with_parent()?;
      if platform::parent_pid() != parent {
        platform::exit_now(137);
      }
    }
    for path in &self.cgroup_procs {
      // "0" moves the writing process itself
      platform::write_file_signal_safe(path, b"0")?;
    }
    for &(res, soft, hard) in &self.rlimits {
      platform::set_rlimit(res, soft, hard)?;
    }
    Ok(())
  }
}

#[cfg(unix)]
/// The limits of one execution tree (see [`crate::process::marks::members`]), as every
/// entry point uses them: the cgroups, the plan for the child, the watchdog,
/// the attribution of SIGXCPU/SIGXFSZ (and of the SIGKILLs of the CPU hard
/// limit and of the memory cgroup), and the cleanup.
pub struct LimitGuard {
  limits: Limits,
  mark: String,
  cgroups: crate::process::cgroup::TreeCgroups,
  /// The tree's first process (its pid is the group id), once spawned.
  leader: AtomicI32,
  /// The process limit counts tasks (threads), as the kernel does where it
  /// enforces it (a pids cgroup, RLIMIT_NPROC for a user other than root).
  count_tasks: bool,
  /// Processes of exec-native's own in the tree (the sandbox helper and its
  /// init), not counted against `max_processes`.
  helpers: u64,
  hit: AtomicBool,
  /// What [`LimitGuard::watch`] found (the tree was killed for it).
  found: std::sync::OnceLock<ExecError>,
  /// What the cgroups said when they were released.
  memory_hit: AtomicBool,
  pids_hit: AtomicBool,
  /// Processes seen past their CPU soft limit (still alive then).
  over_cpu: Mutex<Vec<i32>>,
}

#[cfg(unix)]
impl LimitGuard {
  /// Prepare for a tree marked `mark` (creates the cgroups for
  /// `max_processes` and `memory_bytes` where the host may create them).
  pub fn new(limits: &Limits, mark: &str) -> LimitGuard {
    Self::with_helpers(limits, mark, 0)
  }

  /// [`LimitGuard::new`] for a tree that also holds `helpers` processes of
  /// exec-native's own (the sandbox helper and its init): they are not
  /// counted against `max_processes`.
  pub fn with_helpers(limits: &Limits, mark: &str, helpers: u64) -> LimitGuard {
    let cgroups = if limits.max_processes.is_some() || limits.memory_bytes.is_some() {
      let pids = limits.max_processes.map(|m| m.saturating_add(helpers));
      crate::process::cgroup::TreeCgroups::create(mark, pids, limits.memory_bytes)
    } else {
      crate::process::cgroup::TreeCgroups::default()
    };
    let count_tasks = cgroups.has_pids() || crate::platform::uid() != 0;
    LimitGuard {
      limits: limits.clone(),
      mark: mark.to_owned(),
      cgroups,
      leader: AtomicI32::new(0),
      count_tasks,
      helpers,
      hit: AtomicBool::new(false),
      found: std::sync::OnceLock::new(),
      memory_hit: AtomicBool::new(false),
      pids_hit: AtomicBool::new(false),
      over_cpu: Mutex::new(Vec::new()),
    }
  }

  pub fn limits(&self) -> &Limits {
    &self.limits
  }

  /// The mark of the tree.
  pub fn mark(&self) -> &str {
    &self.mark
  }

  /// The tree's first process was spawned as `pid` (its group).
  pub fn set_leader(&self, pid: i32) {
    self.leader.store(pid, Ordering::Relaxed);
  }

  /// What the child must do before exec; `None` when nothing (the
  /// posix_spawn fast path stays).
  pub fn child_plan(&self, die_with_parent: bool) -> Result<Option<ChildPlan>, ExecError> {
    if self.limits.is_empty() && !die_with_parent {
      return Ok(None);
    }
    let mut plan = self
      .limits
      .child_plan((!self.cgroups.is_empty()).then_some(&self.cgroups))?;
    if die_with_parent {
      plan.pdeathsig_parent = Some(std::process::id() as i32);
    }
    Ok(Some(plan))
  }

  /// Resolves with the limit error when the tree passes a watched limit
  /// (memory, process count; checked every [`WATCH_INTERVAL`]); never
  /// resolves when nothing is watched. With a CPU limit, notes the processes
  /// past it (every [`CPU_WATCH_INTERVAL`] when only that is watched).
  /// Cancel-safe.
  pub async fn watch(&self) -> ExecError {
    if !self.limits.needs_watchdog() {
      return std::future::pending().await;
    }
    let every = if self.limits.memory_bytes.is_some() || self.limits.max_processes.is_some() {
      WATCH_INTERVAL
    } else {
      CPU_WATCH_INTERVAL
    };
    let mut tick = tokio::time::interval(every);
    loop {
      tick.tick().await;
      if let Some(e) = self.check() {
        let _ = self.found.set(e.clone());
        return e;
      }
    }
  }

  /// What [`LimitGuard::watch`] found, once it did (its caller kills the
  /// tree for it): known before the tree's exit is.
  pub fn finding(&self) -> Option<ExecError> {
    self.found.get().cloned()
  }

  /// One look: an error if a watched limit is passed.
  pub fn check(&self) -> Option<ExecError> {
    if let Some(e) = self.cgroup_finding() {
      return Some(e);
    }
    if !self.limits.needs_watchdog() {
      return None;
    }
    let members = crate::process::marks::members(
      &self.mark,
      self.leader.load(Ordering::Relaxed),
      &self.cgroups.procs(),
    );
    if let Some(s) = self.limits.cpu_seconds {
      let hz = crate::platform::clock_ticks();
      let over: Vec<i32> = members
        .iter()
        .filter(|m| m.cpu_ticks >= s.max(1) * hz)
        .map(|m| m.pid)
        .collect();
      if !over.is_empty() {
        let mut seen = self.over_cpu.lock().unwrap_or_else(|e| e.into_inner());
        for p in over {
          if !seen.contains(&p) {
            seen.push(p);
          }
        }
      }
    }
    self
      .limits
      .check_members(&members, self.count_tasks, self.helpers)
  }

  /// What the kernel's cgroups say: a refused fork, an OOM kill.
  fn cgroup_finding(&self) -> Option<ExecError> {
    if let Some(max) = self.limits.max_processes {
      if self.pids_hit.load(Ordering::Relaxed) || self.cgroups.hit_pids_max() {
        return Some(process_error(max));
      }
    }
    if let Some(max) = self.limits.memory_bytes {
      if self.memory_hit.load(Ordering::Relaxed) || self.cgroups.hit_memory_max() {
        return Some(memory_error(max));
      }
    }
    None
  }

  /// SIGKILL the whole tree at once (the group `pgid`, the marked processes,
  /// the cgroups' members and the descendants of all those): a tree over a
  /// limit gets no grace.
  pub fn kill_tree(&self, pgid: i32) {
    self.hit.store(true, Ordering::Relaxed);
    // what only the cgroups or the parent links tie to it, found while the
    // links are intact
    let mut also = self.cgroups.procs();
    also.extend(
      crate::process::marks::members(&self.mark, pgid, &[])
        .into_iter()
        .map(|m| m.pid),
    );
    also.sort_unstable();
    also.dedup();
    // the tree in its one order, those with it (the leader is not reaped:
    // its watchdog runs)
    crate::process::ProcessTree::new(pgid, &self.mark)
      .with(&also)
      .kill(true);
  }

  /// What an exit by `signal` (or a shell's 128+N) means under the limits.
  pub fn explain(&self, signal: Option<&str>, exit_code: i32) -> Option<ExecError> {
    self.explain_exit(signal, exit_code, false)
  }

  /// [`Self::explain`], for an exit that may follow a kill of ours
  /// (`killed_by_us`: a timeout, a cancel), which a SIGKILL then does not
  /// blame on the CPU limit.
  pub fn explain_exit(
    &self,
    signal: Option<&str>,
    exit_code: i32,
    killed_by_us: bool,
  ) -> Option<ExecError> {
    if let Some(e) = self.limits.explain_signal(signal, exit_code) {
      return Some(e);
    }
    if let Some(e) = self.cgroup_finding() {
      return Some(e);
    }
    // the CPU hard limit: a SIGKILL (or a shell's 137) after a process of
    // the tree was seen past its soft limit, and that process is gone
    let killed =
      signal == Some("SIGKILL") || (signal.is_none() && exit_code == 128 + libc::SIGKILL);
    if let (Some(s), true, false) = (self.limits.cpu_seconds, killed, killed_by_us) {
      let mut over = self.over_cpu.lock().unwrap_or_else(|e| e.into_inner());
      if let Some(i) = over.iter().position(|p| crate::process::marks::is_dead(*p)) {
        over.remove(i);
        return Some(cpu_error(s));
      }
    }
    None
  }

  /// The run is over: the cgroups are emptied (SIGKILL when a limit was hit)
  /// and removed (at once when empty, else in the background).
  pub fn release(&mut self) {
    if self.cgroups.is_empty() {
      return;
    }
    self
      .memory_hit
      .fetch_or(self.cgroups.hit_memory_max(), Ordering::Relaxed);
    self
      .pids_hit
      .fetch_or(self.cgroups.hit_pids_max(), Ordering::Relaxed);
    if self.cgroups.remove() {
      return;
    }
    let cg = std::mem::take(&mut self.cgroups);
    reap_cgroup(cg, self.hit.load(Ordering::Relaxed));
  }
}

#[cfg(unix)]
impl Drop for LimitGuard {
  fn drop(&mut self) {
    self.release();
  }
}

#[cfg(unix)]
/// SIGKILL what is left in the cgroups when a limit was hit (members stay in
/// them whatever they do to their environment or group), and remove them
/// once empty.
fn reap_cgroup(mut cg: crate::process::cgroup::TreeCgroups, kill: bool) {
  let job = move || {
    for _ in 0..500 {
      let procs = cg.procs();
      if procs.is_empty() && cg.remove() {
        return;
      }
      if kill {
        crate::process::ProcessTree::processes(&procs).kill(false);
      }
      std::thread::sleep(Duration::from_millis(20));
    }
  };
  std::thread::spawn(job);
}

pub(crate) fn process_error(max: u64) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("process limit of {max} exceeded"),
  )
}

pub(crate) fn memory_error(max: u64) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("memory limit of {} exceeded", human_bytes(max)),
  )
}

pub fn cpu_error(s: u64) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("CPU time limit of {s}s exceeded"),
  )
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

#[cfg(all(test, unix))]
mod tests {
  use super::*;

  #[test]
  fn a_limit_is_checked_once_for_every_caller() {
    let mut l = Limits::default();
    l.set("memoryBytes", 1e6 + 0.5).unwrap();
    assert_eq!(l.memory_bytes, Some(1_000_000));
    assert_eq!(
      l.set("cpuSeconds", 0.0),
      Err("must be at least 1, got 0".into())
    );
    assert_eq!(
      l.set("openFiles", -2.0),
      Err("must not be negative, got -2".into())
    );
    assert_eq!(
      l.set("openFiles", f64::INFINITY),
      Err("must be finite".into())
    );
    assert_eq!(
      l.set("openFiles", f64::NAN),
      Err("must be a number, got NaN".into())
    );
    assert!(l
      .set("memory", 5.0)
      .unwrap_err()
      .contains("memoryBytes, cpuSeconds"));
    assert_eq!(l.cpu_seconds, None, "a refused value sets nothing");
  }

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
