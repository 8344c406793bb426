//! macOS: no `/proc`. The twins find nothing, so what builds on them (the
//! mark scans, the range probe, the reaper) does less, never something else:
//! a tree is then reached through its process group only.

use super::Environ;

/// No `/proc` to list: calls `f` for nothing.
pub fn for_each_pid(_f: &mut dyn FnMut(i32)) {}

/// No environment of another process can be read.
pub fn environ_match(_pid: i32, _needle: &[u8]) -> Environ {
  Environ::Unreadable
}

/// No environment of another process can be read.
pub fn environ_read(_pid: i32, _out: &mut Vec<u8>) -> bool {
  false
}

/// Longest needle [`environ_match`] takes.
pub const MAX_NEEDLE: usize = 96;

/// Not known: the range probe falls back to the (empty) full scan.
pub fn last_pid_and_max() -> Option<(i64, i64)> {
  None
}

/// No `/proc/<pid>/stat`.
pub fn stat_text(_pid: i32) -> Option<String> {
  None
}

/// Not known without `/proc`.
pub fn children_of(_pid: Option<i32>) -> Vec<i32> {
  Vec::new()
}

/// macOS has no child subreaper.
pub fn child_subreaper() -> Option<bool> {
  None
}

/// macOS has no child subreaper: a no-op.
pub fn set_child_subreaper(_on: bool) -> std::io::Result<()> {
  Ok(())
}

/// Not known on macOS: the caller falls back to what it can observe.
pub fn unread_by_peer(_fd: i32) -> Option<usize> {
  None
}

/// Pids whose process group is `pgid` (`proc_listpids(PROC_PGRP_ONLY)`).
pub fn group_members(pgid: i32) -> Vec<i32> {
  const PROC_PGRP_ONLY: u32 = 2;
  let mut pids = vec![0i32; 4096];
  // SAFETY: `pids` is a live Vec of 4096 i32 and the size passed is its length in bytes, so
  // proc_listpids writes within it.
  let bytes = unsafe {
    libc::proc_listpids(
      PROC_PGRP_ONLY,
      pgid as u32,
      pids.as_mut_ptr().cast(),
      (pids.len() * std::mem::size_of::<i32>()) as libc::c_int,
    )
  };
  if bytes <= 0 {
    return Vec::new();
  }
  pids.truncate(bytes as usize / std::mem::size_of::<i32>());
  pids.retain(|&p| p > 0);
  pids
}

/// No cgroups on macOS.
pub fn self_cgroup() -> Option<String> {
  None
}

/// Not known without `/proc` (nothing that needs it runs on macOS).
pub fn boot_time() -> Option<u64> {
  None
}

/// Not known without `/proc`: 0 (the memory watchdog sees nothing).
pub fn resident_pages(_pid: i32) -> u64 {
  0
}

/// Pids are processes on macOS.
pub fn is_thread(_pid: i32) -> bool {
  false
}

/// Not known without `/proc`: empty.
pub fn cmdline(_pid: i32) -> Vec<u8> {
  Vec::new()
}

/// Not known without `/proc`: 0.
pub fn user_task_count(_uid: u32) -> u64 {
  0
}
