//! Reaping the orphans of our runs (see `exec_core::process::reaper`): making the host
//! a child subreaper, and what the reaper did.

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// What the orphan reaper of this process is doing.
#[napi(object)]
pub struct ReaperStatus {
  /// The host has the Linux child subreaper attribute: orphans among its
  /// descendants are reparented to it instead of to PID 1.
  pub subreaper: bool,
  /// The host is PID 1 of its pid namespace (a container without `--init`):
  /// every orphan of the namespace is reparented to it.
  pub pid1: bool,
  /// Orphans of exec-native runs are reaped here (`subreaper || pid1`).
  pub enabled: bool,
  /// The background task is polling (a run is live or an orphan is awaited).
  pub watching: bool,
  /// Escaped processes of our runs recorded and not yet reaped.
  pub pending: u32,
  /// Orphans reaped since the host started.
  pub reaped: f64,
}

/// Make this process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`), or
/// stop being one. While it is one, a process that escapes an exec-native run
/// (`setsid`, double fork, `nohup`) and outlives its parent is reparented to
/// this process instead of PID 1, and exec-native reaps it when it exits, so
/// that no zombie is left. Orphans of processes started another way (the
/// grandchildren of a plain `child_process.spawn`) are reparented here too but
/// are NOT reaped (they cannot be told from Node's own children): they stay
/// zombies until this process exits. See docs/REAPING.md.
///
/// Also set at load time by `EXEC_NATIVE_SUBREAPER=1`. When the host is PID 1
/// the orphans of exec-native runs are reaped without this call.
///
/// Returns whether the process is now a subreaper (always `false` on systems
/// other than Linux, where this is a no-op).
#[napi(ts_args_type = "enabled: boolean")]
pub fn set_subreaper(env: Env, enabled: Unknown) -> Result<bool> {
  let enabled = crate::call::sync_args(
    &env,
    crate::read::required(enabled, &crate::read::At::arg("enabled")),
  )?;
  #[cfg(unix)]
  return exec_core::process::reaper::set_subreaper(enabled)
    .map_err(|e| crate::error::throw_coded(&env, &e));
  // Windows has no orphans to reap: a run's Job Object ends its whole tree
  #[cfg(windows)]
  {
    let _: bool = enabled;
    Ok(false)
  }
}

/// What the orphan reaper is doing (see `setSubreaper`).
#[cfg(windows)]
#[napi]
pub fn reaper_status() -> ReaperStatus {
  ReaperStatus {
    subreaper: false,
    pid1: false,
    enabled: false,
    watching: false,
    pending: 0,
    reaped: 0.0,
  }
}

/// What the orphan reaper is doing (see `setSubreaper`).
#[cfg(unix)]
#[napi]
pub fn reaper_status() -> ReaperStatus {
  use exec_core::process::reaper as r;
  ReaperStatus {
    subreaper: r::is_subreaper(),
    pid1: r::is_pid1(),
    enabled: r::enabled(),
    watching: r::watching(),
    pending: r::recorded_count() as u32,
    reaped: r::reaped_count() as f64,
  }
}
