//! Cgroups per execution tree, for `limits.maxProcesses` (the `pids`
//! controller) and `limits.memoryBytes` (the `memory` controller). The child
//! joins them between fork and exec, so every descendant is in them whatever
//! it does to its environment, group or session, and the kernel enforces:
//! - pids: forks past the cap are refused (a fork bomb stalls instead of
//!   exhausting the pid space before any watchdog can look) and counted in
//!   `pids.events`, which says the limit was hit;
//! - memory: past the limit the kernel reclaims, then OOM-kills inside the
//!   cgroup and counts it (`oom_kill` in `memory.oom_control` on v1,
//!   `memory.events` on v2), which says the limit was hit.
//!
//! Needs a writable hierarchy with the controller (cgroup v1, or a v2
//! subtree where it can be enabled), as root or under a delegated subtree.
//! Elsewhere nothing is created and the callers fall back (RLIMIT_NPROC and
//! the watchdog, see [`crate::process::limits`]).
//!
//! Cleanup: a tree's cgroups are removed when its run ends (at once when
//! already empty, else by a background thread); every live one is listed in
//! a lock-free table that the host's exit paths (atexit, the SIGTERM /
//! SIGINT / SIGHUP handler) empty and remove ([`remove_all_signal_safe`]);
//! and those of hosts that died without either (SIGKILL, abort) are swept
//! the first time a host looks for its base directory ([`sweep_stale`]):
//! their names carry the host's pid (`exec-native-<pid>.<owner>.<run>`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

/// One cgroup directory.
pub struct Cgroup {
  path: PathBuf,
  slot: Option<usize>,
  gone: bool,
}

const PREFIX: &str = "exec-native-";

/// Where this process sits in the hierarchy of `controller`, and whether it
/// is v2 (v1 first, then v2). With `enable`, the controller is enabled for
/// the children of a v2 directory.
fn base_dir(controller: &str, enable: bool) -> Option<(PathBuf, bool)> {
  let me = crate::platform::self_cgroup()?;
  for line in me.lines() {
    let mut parts = line.splitn(3, ':');
    let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
    if ctrls.split(',').any(|c| c == controller) {
      let dir = Path::new("/sys/fs/cgroup")
        .join(controller)
        .join(path.trim_start_matches('/'));
      if dir.join("cgroup.procs").exists() {
        return Some((dir, false));
      }
    }
  }
  for line in me.lines() {
    if let Some(path) = line.strip_prefix("0::") {
      for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let dir = Path::new(mount).join(path.trim_start_matches('/'));
        let ctrls =
          std::fs::read_to_string(Path::new(mount).join("cgroup.controllers")).unwrap_or_default();
        if ctrls.split_whitespace().any(|c| c == controller) && dir.exists() {
          if enable {
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"));
          }
          return Some((dir, true));
        }
      }
    }
  }
  None
}

/// [`base_dir`], after the stale cgroups of dead hosts there are swept (once
/// per controller and process).
fn base_dir_swept(controller: &str, enable: bool) -> Option<(PathBuf, bool)> {
  static SWEPT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
  let found = base_dir(controller, enable)?;
  let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
  if !swept.iter().any(|c| c == controller) {
    swept.push(controller.to_owned());
    sweep_stale_in(&found.0);
  }
  Some(found)
}

impl Cgroup {
  fn create_in(base: &Path, name: &str) -> Option<Cgroup> {
    let path = base.join(format!("{PREFIX}{name}"));
    if let Err(e) = std::fs::create_dir(&path) {
      // a leftover of an earlier host with our pid (pids are reused)
      if e.kind() != std::io::ErrorKind::AlreadyExists
        || std::fs::remove_dir(&path).is_err()
        || std::fs::create_dir(&path).is_err()
      {
        return None;
      }
    }
    let slot = register(&path);
    Some(Cgroup {
      path,
      slot,
      gone: false,
    })
  }

  /// Pids in it.
  pub fn procs(&self) -> Vec<i32> {
    if self.gone {
      return Vec::new();
    }
    std::fs::read_to_string(self.path.join("cgroup.procs"))
      .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
      .unwrap_or_default()
  }

  /// Remove it (only works once it is empty); returns whether it is gone.
  pub fn remove(&mut self) -> bool {
    if self.gone {
      return true;
    }
    let gone = std::fs::remove_dir(&self.path).is_ok() || !self.path.exists();
    if gone {
      self.gone = true;
      if let Some(s) = self.slot.take() {
        unregister(s);
      }
    }
    gone
  }

  pub fn path(&self) -> &Path {
    &self.path
  }

  /// The value of `key` in the flat-keyed file `file` (`max 3`).
  fn counter(&self, file: &str, key: &str) -> u64 {
    if self.gone {
      return 0;
    }
    std::fs::read_to_string(self.path.join(file))
      .ok()
      .and_then(|s| {
        s.lines().find_map(|l| {
          l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(' '))
            .and_then(|n| n.trim().parse::<u64>().ok())
        })
      })
      .unwrap_or(0)
  }
}

/// The cgroups of one execution tree: none, one (v2, or v1 with one limit)
/// or two (v1 with both limits: one per hierarchy).
#[derive(Default)]
pub struct TreeCgroups {
  dirs: Vec<Cgroup>,
  pids: Option<usize>,
  memory: Option<(usize, bool)>,
}

impl TreeCgroups {
  /// Create `exec-native-<name>` wherever a controller for one of the given
  /// limits can be used; the limits the host cannot enforce this way are
  /// left out ([`Self::has_pids`], [`Self::has_memory`]).
  pub fn create(name: &str, max_processes: Option<u64>, memory_bytes: Option<u64>) -> TreeCgroups {
    let mut t = TreeCgroups::default();
    if let Some(max) = max_processes {
      if let Some((base, _)) = base_dir_swept("pids", true) {
        if let Some(i) = t.dir_in(&base, name) {
          if std::fs::write(t.dirs[i].path.join("pids.max"), max.to_string()).is_ok() {
            t.pids = Some(i);
          }
        }
      }
    }
    if let Some(bytes) = memory_bytes {
      if let Some((base, v2)) = base_dir_swept("memory", true) {
        if let Some(i) = t.dir_in(&base, name) {
          let dir = &t.dirs[i].path;
          let ok = if v2 {
            // swap counts too, as it does on v1 with memsw; the whole cgroup
            // goes at an OOM
            let ok = std::fs::write(dir.join("memory.max"), bytes.to_string()).is_ok();
            let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            let _ = std::fs::write(dir.join("memory.oom.group"), "1");
            ok
          } else {
            let ok = std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string()).is_ok();
            // memory + swap (absent without swap accounting)
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
            ok
          };
          if ok {
            t.memory = Some((i, v2));
          }
        }
      }
    }
    // directories that ended up without a limit go
    let dirs = std::mem::take(&mut t.dirs);
    let (pids, memory) = (t.pids.take(), t.memory.take());
    for (i, mut d) in dirs.into_iter().enumerate() {
      if pids != Some(i) && memory.map(|m| m.0) != Some(i) {
        d.remove();
        continue;
      }
      let at = t.dirs.len();
      t.dirs.push(d);
      if pids == Some(i) {
        t.pids = Some(at);
      }
      if let Some((_, v2)) = memory.filter(|m| m.0 == i) {
        t.memory = Some((at, v2));
      }
    }
    t
  }

  /// The directory named `name` under `base` (one per hierarchy: on v2 the
  /// pids and memory controllers share it).
  fn dir_in(&mut self, base: &Path, name: &str) -> Option<usize> {
    let path = base.join(format!("{PREFIX}{name}"));
    if let Some(i) = self.dirs.iter().position(|d| d.path == path) {
      return Some(i);
    }
    let d = Cgroup::create_in(base, name)?;
    self.dirs.push(d);
    Some(self.dirs.len() - 1)
  }

  /// Whether there is no cgroup (left).
  pub fn is_empty(&self) -> bool {
    self.dirs.iter().all(|d| d.gone)
  }

  /// Whether the kernel caps the number of processes.
  pub fn has_pids(&self) -> bool {
    self.pids.is_some()
  }

  /// Whether the kernel caps the memory.
  pub fn has_memory(&self) -> bool {
    self.memory.is_some()
  }

  /// Whether a fork was refused for the cap.
  pub fn hit_pids_max(&self) -> bool {
    self
      .pids
      .is_some_and(|i| self.dirs[i].counter("pids.events", "max") > 0)
  }

  /// Whether the kernel killed a process of the tree for the memory limit.
  pub fn hit_memory_max(&self) -> bool {
    self.memory.is_some_and(|(i, v2)| {
      let file = if v2 {
        "memory.events"
      } else {
        "memory.oom_control"
      };
      self.dirs[i].counter(file, "oom_kill") > 0
    })
  }

  /// Pids in any of the tree's cgroups.
  pub fn procs(&self) -> Vec<i32> {
    let mut v: Vec<i32> = self.dirs.iter().flat_map(|d| d.procs()).collect();
    v.sort_unstable();
    v.dedup();
    v
  }

  /// The `cgroup.procs` files the child writes itself into.
  pub fn procs_files(&self) -> Vec<PathBuf> {
    self
      .dirs
      .iter()
      .map(|d| d.path.join("cgroup.procs"))
      .collect()
  }

  /// Remove every directory that is empty; returns whether all are gone.
  pub fn remove(&mut self) -> bool {
    let mut all = true;
    for d in &mut self.dirs {
      all &= d.remove();
    }
    all
  }
}

/// Remove the cgroups of dead hosts under `base`: `exec-native-<pid>.*`
/// whose host (`pid`) is gone or is a process that started after the cgroup
/// was created (a reused pid), once they are empty and older than a few
/// seconds. What still runs in one is left alone (it is still limited); a
/// later sweep removes it.
fn sweep_stale_in(base: &Path) {
  let Ok(entries) = std::fs::read_dir(base) else {
    return;
  };
  let me = std::process::id() as i32;
  let now = std::time::SystemTime::now();
  for e in entries.flatten() {
    let name = e.file_name();
    let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
      continue;
    };
    let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<i32>().ok()) else {
      continue;
    };
    let Ok(created) = e.metadata().and_then(|m| m.modified()) else {
      continue;
    };
    if now.duration_since(created).unwrap_or_default() < std::time::Duration::from_secs(5) {
      continue;
    }
    if pid != me && host_alive_since(pid, created) {
      continue;
    }
    let path = e.path();
    let empty =
      std::fs::read_to_string(path.join("cgroup.procs")).is_ok_and(|s| s.trim().is_empty());
    if empty {
      let _ = std::fs::remove_dir(&path);
    }
  }
}

/// Whether `pid` runs and started before `created` (so it may be the host
/// that created the cgroup).
fn host_alive_since(pid: i32, created: std::time::SystemTime) -> bool {
  let Some(st) = crate::process::marks::stat(pid) else {
    return false;
  };
  let btime = crate::platform::boot_time();
  let hz = crate::platform::clock_ticks();
  match btime {
    Some(b) => {
      let started =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(b * 1000 + st.start * 1000 / hz);
      // btime has a one-second resolution
      started <= created + std::time::Duration::from_secs(2)
    }
    None => true,
  }
}

/// Sweep the stale cgroups of dead hosts now (see [`sweep_stale_in`]); the
/// host calls it when it starts. Changes nothing else.
pub fn sweep_stale() {
  for c in ["pids", "memory"] {
    let _ = base_dir_swept(c, false);
  }
}

// The live cgroups, for the exit paths: a fixed table of NUL-terminated
// paths that a signal handler can read without locks or allocation.
const SLOTS: usize = 256;
const PATH_MAX: usize = 240;
const FREE: u8 = 0;
const BUSY: u8 = 1;
const READY: u8 = 2;

struct Slot {
  state: AtomicU8,
  path: std::cell::UnsafeCell<[u8; PATH_MAX]>,
}

// SAFETY: `path` is written only by the thread that moved `state` from FREE
// to BUSY, and read only while `state` is READY.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot = Slot {
  state: AtomicU8::new(FREE),
  path: std::cell::UnsafeCell::new([0; PATH_MAX]),
};
static TABLE: [Slot; SLOTS] = [EMPTY_SLOT; SLOTS];

fn register(path: &Path) -> Option<usize> {
  let bytes = path.as_os_str().as_encoded_bytes();
  // room for "/cgroup.procs" and the NUL
  if bytes.len() + 16 > PATH_MAX {
    return None;
  }
  for (i, s) in TABLE.iter().enumerate() {
    if s
      .state
      .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
      .is_ok()
    {
      // SAFETY: this thread owns the slot (BUSY)
      let buf = unsafe { &mut *s.path.get() };
      buf[..bytes.len()].copy_from_slice(bytes);
      buf[bytes.len()] = 0;
      s.state.store(READY, Ordering::Release);
      return Some(i);
    }
  }
  None
}

fn unregister(i: usize) {
  TABLE[i].state.store(FREE, Ordering::Release);
}

/// SIGKILL every process in the live cgroups of this host and remove them,
/// waiting at most about a second for the killed to leave. For the exit
/// paths (atexit, the host's signal handler): async-signal-safe (open, read,
/// kill, rmdir, nanosleep; no locks, no allocation).
pub fn remove_all_signal_safe() {
  let mut left = true;
  for round in 0..100 {
    if !left {
      return;
    }
    left = false;
    for s in TABLE.iter() {
      if s.state.load(Ordering::Acquire) != READY {
        continue;
      }
      // SAFETY: READY slots are not written until unregistered
      let dir = unsafe { &*s.path.get() };
      let len = dir.iter().position(|&b| b == 0).unwrap_or(0);
      if crate::platform::rmdir_signal_safe(&dir[..=len]).is_ok() {
        s.state.store(FREE, Ordering::Release);
        continue;
      }
      left = true;
      if round % 10 == 0 {
        kill_procs_raw(&dir[..len]);
      }
    }
    if left {
      crate::platform::nanosleep(std::time::Duration::from_millis(10));
    }
  }
}

/// SIGKILL the pids listed in `<dir>/cgroup.procs` (raw syscalls only).
fn kill_procs_raw(dir: &[u8]) {
  let mut path = [0u8; PATH_MAX];
  let file = b"/cgroup.procs\0";
  if dir.len() + file.len() > PATH_MAX {
    return;
  }
  path[..dir.len()].copy_from_slice(dir);
  path[dir.len()..dir.len() + file.len()].copy_from_slice(file);
  let mut pid: i32 = 0;
  let mut digits = false;
  let len = dir.len() + file.len();
  crate::platform::read_file_signal_safe(&path[..len], &mut |chunk| {
    for &c in chunk {
      if c.is_ascii_digit() {
        pid = pid.saturating_mul(10).saturating_add((c - b'0') as i32);
        digits = true;
      } else {
        if digits && pid > 1 {
          crate::platform::signal(pid, libc::SIGKILL);
        }
        pid = 0;
        digits = false;
      }
    }
  });
  if digits && pid > 1 {
    crate::platform::signal(pid, libc::SIGKILL);
  }
}

/// How many tasks (threads: what RLIMIT_NPROC counts) the current user has.
pub fn user_task_count() -> u64 {
  crate::platform::user_task_count(crate::platform::uid())
}
