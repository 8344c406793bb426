//! A `pids` cgroup per execution, for `limits.maxProcesses`: the kernel
//! refuses forks past the cap (a fork bomb stalls instead of exhausting the
//! pid space before any watchdog can look) and counts the refusals in
//! `pids.events`, which says the limit was hit.
//!
//! Needs a writable pids hierarchy (cgroup v1 `pids` controller, or a v2
//! subtree where `pids` can be enabled), as root or under a delegated
//! subtree. Elsewhere `None` is returned and the caller falls back to
//! RLIMIT_NPROC. The child joins the cgroup between fork and exec.

use std::path::{Path, PathBuf};

pub struct PidsCgroup {
  path: PathBuf,
}

/// Where this process sits in the pids hierarchy (v1 first, then v2).
fn base_dir() -> Option<PathBuf> {
  let me = std::fs::read_to_string("/proc/self/cgroup").ok()?;
  for line in me.lines() {
    let mut parts = line.splitn(3, ':');
    let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
    if ctrls.split(',').any(|c| c == "pids") {
      let dir = Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/'));
      if dir.join("cgroup.procs").exists() {
        return Some(dir);
      }
    }
  }
  for line in me.lines() {
    if let Some(path) = line.strip_prefix("0::") {
      for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let dir = Path::new(mount).join(path.trim_start_matches('/'));
        let ctrls =
          std::fs::read_to_string(Path::new(mount).join("cgroup.controllers")).unwrap_or_default();
        if ctrls.split_whitespace().any(|c| c == "pids") && dir.exists() {
          let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+pids");
          return Some(dir);
        }
      }
    }
  }
  None
}

impl PidsCgroup {
  /// Create `exec-native-<name>` capped at `max` processes.
  pub fn create(name: &str, max: u64) -> Option<PidsCgroup> {
    let path = base_dir()?.join(format!("exec-native-{name}"));
    std::fs::create_dir(&path).ok()?;
    let cg = PidsCgroup { path };
    if std::fs::write(cg.path.join("pids.max"), max.to_string()).is_err() {
      cg.remove();
      return None;
    }
    Some(cg)
  }

  /// Move `pid` in.
  pub fn add(&self, pid: i32) -> bool {
    std::fs::write(self.path.join("cgroup.procs"), pid.to_string()).is_ok()
  }

  /// Whether a fork was refused for the cap.
  pub fn hit_max(&self) -> bool {
    std::fs::read_to_string(self.path.join("pids.events"))
      .ok()
      .and_then(|s| {
        s.lines().find_map(|l| {
          l.strip_prefix("max ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        })
      })
      .is_some_and(|n| n > 0)
  }

  /// Pids still in the cgroup.
  pub fn procs(&self) -> Vec<i32> {
    std::fs::read_to_string(self.path.join("cgroup.procs"))
      .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
      .unwrap_or_default()
  }

  /// Remove it (only works once it is empty); returns whether it is gone.
  pub fn remove(&self) -> bool {
    std::fs::remove_dir(&self.path).is_ok() || !self.path.exists()
  }

  pub fn path(&self) -> &Path {
    &self.path
  }
}

/// How many processes the current user has (for an RLIMIT_NPROC relative to it).
pub fn user_process_count() -> u64 {
  use std::os::unix::fs::MetadataExt;
  let uid = unsafe { libc::getuid() };
  std::fs::read_dir("/proc")
    .map(|d| {
      d.filter_map(|e| e.ok())
        .filter(|e| {
          e.file_name().to_string_lossy().parse::<u32>().is_ok()
            && e.metadata().is_ok_and(|m| m.uid() == uid)
        })
        .count() as u64
    })
    .unwrap_or(0)
}
