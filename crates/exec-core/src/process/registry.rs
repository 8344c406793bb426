//! The registry of live process groups, so that nothing is left behind when
//! the host goes away: spawn tickets (held from before a fork until the child
//! is registered), the host's kill-all (also from its signal handler), and
//! signal names. A run's tree is signalled by [`super::tree`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::error::{ErrorCode, ExecError};

/// Send `sig` to process group `pgid`. Returns false when the group is empty.
pub fn signal_group(pgid: i32, sig: Signal) -> bool {
  if pgid <= 1 {
    return false;
  }
  !matches!(killpg(Pid::from_raw(pgid), sig), Err(Errno::ESRCH))
}

/// Whether any process of group `pgid` is still alive (zombies count until reaped).
pub fn group_alive(pgid: i32) -> bool {
  if pgid <= 1 {
    return false;
  }
  // signal 0 checks existence; EPERM means it exists but is not ours
  !matches!(
    nix::sys::signal::killpg(Pid::from_raw(pgid), None),
    Err(Errno::ESRCH)
  )
}

static LIVE: Mutex<Option<HashMap<i32, u64>>> = Mutex::new(None);

/// Who is told when a group comes and goes: the reaper (a layer above this
/// one) registers itself here when it starts ([`crate::process::reaper::init`],
/// which every spawn runs first), so the registry calls nothing above it.
#[derive(Clone, Copy)]
pub struct Watcher {
  /// A group was registered.
  pub started: fn(),
  /// Group `pgid` left the registry.
  pub ended: fn(i32),
}

static WATCHER: std::sync::OnceLock<Watcher> = std::sync::OnceLock::new();

/// Set the [`Watcher`] (once; later calls change nothing).
pub fn set_watcher(w: Watcher) {
  let _ = WATCHER.set(w);
}

/// The same groups in a lock-free table, for the host's signal handler.
const SLOTS: usize = 4096;
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicI32 = AtomicI32::new(0);
static SLOT_TABLE: [AtomicI32; SLOTS] = [EMPTY; SLOTS];

/// Put `pgid` in the table (once). One pass of plain loads: a
/// compare-and-swap only where the slot is free (a CAS of every slot, which
/// the clearing did, is a locked write of each of its 256 cache lines: 3% of
/// a sequential spawn's samples, issue 28).
fn slot_put(pgid: i32) {
  loop {
    let mut free = None;
    for (i, s) in SLOT_TABLE.iter().enumerate() {
      match s.load(Ordering::Relaxed) {
        v if v == pgid => return,
        0 if free.is_none() => free = Some(i),
        _ => {}
      }
    }
    let Some(i) = free else { return };
    if SLOT_TABLE[i]
      .compare_exchange(0, pgid, Ordering::AcqRel, Ordering::Relaxed)
      .is_ok()
    {
      return;
    }
    // taken meanwhile by another group: look again
  }
}

/// Take `pgid` out of the table: a compare-and-swap only where a load saw it.
fn slot_clear(pgid: i32) {
  for s in SLOT_TABLE.iter() {
    if s.load(Ordering::Relaxed) == pgid {
      let _ = s.compare_exchange(pgid, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
  }
}

/// The whole host is going away (exit, or a terminating signal).
static CLOSING_ALL: AtomicBool = AtomicBool::new(false);
/// Environments (workers) that went away: their spawns are refused.
static CLOSED_OWNERS: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// How long the exit paths wait for spawns in flight to register.
const SPAWN_SETTLE: Duration = Duration::from_secs(1);

/// Held by a spawn path from before the fork until its child is registered
/// (see [`begin_spawn`]). While one is held, the exit and teardown paths wait
/// before they kill, so a child being spawned cannot slip past them; after
/// they began, new spawns of the departing host (or environment) are refused.
pub struct SpawnTicket {
  owner: u64,
}

/// Spawns between their ticket and the registration of their child (the
/// exit paths wait for them; the reaper takes none of their children for an
/// orphan meanwhile).
static SPAWNING: AtomicUsize = AtomicUsize::new(0);

/// How many spawns are between their fork and their registration now.
pub fn spawning_now() -> usize {
  SPAWNING.load(Ordering::SeqCst)
}

impl Drop for SpawnTicket {
  fn drop(&mut self) {
    SPAWNING.fetch_sub(1, Ordering::SeqCst);
  }
}

/// Take a ticket for one spawn by `owner`, or `ECANCELED` when that host
/// environment (or the whole process) is shutting down.
pub fn begin_spawn(owner: u64) -> Result<SpawnTicket, ExecError> {
  // count first, then look at the flags: an exit path sets its flag, then
  // reads the count (both SeqCst), so one of the two sides sees the other
  SPAWNING.fetch_add(1, Ordering::SeqCst);
  let ticket = SpawnTicket { owner };
  let closed = CLOSING_ALL.load(Ordering::SeqCst)
    || CLOSED_OWNERS
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .contains(&owner);
  if closed {
    return Err(ExecError::new(
      ErrorCode::ECANCELED,
      "the host is shutting down: no new process is started",
    ));
  }
  Ok(ticket)
}

impl SpawnTicket {
  /// The child is spawned: track its group (the ticket is then given back).
  pub fn register(self, pgid: i32) {
    register(pgid, self.owner);
  }
}

/// Wait (bounded) until no spawn is between its fork and its registration.
/// Async-signal-safe (an atomic load and nanosleep); a spawn interrupted on
/// this very thread cannot finish, hence the bound.
fn settle_spawns() {
  let mut waited = Duration::ZERO;
  let step = Duration::from_millis(1);
  while spawning_now() > 0 && waited < SPAWN_SETTLE {
    crate::platform::nanosleep(step);
    waited += step;
  }
}

/// Refuse new spawns of `owner` (or of everyone with `None`) and let those in
/// flight register, so that a kill that follows sees them all.
pub(crate) fn close_spawns(owner: Option<u64>) {
  match owner {
    None => CLOSING_ALL.store(true, Ordering::SeqCst),
    Some(o) => CLOSED_OWNERS
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .push(o),
  }
  settle_spawns();
}

/// SIGKILL every tracked group and every process marked by this host.
/// Async-signal-safe: no locks, no allocation.
pub fn kill_all_signal_safe(prefix: &crate::process::marks::Needle) {
  // no new spawns; those in flight get registered before the kill
  CLOSING_ALL.store(true, Ordering::SeqCst);
  settle_spawns();
  for s in SLOT_TABLE.iter() {
    let p = s.load(Ordering::Relaxed);
    if p > 1 {
      crate::platform::signal(-p, libc::SIGKILL);
    }
  }
  crate::process::marks::scan(prefix, &mut |pid| {
    crate::platform::signal(pid, libc::SIGKILL);
  });
}

/// Record a live group owned by `owner` (an id of the host environment).
pub fn register(pgid: i32, owner: u64) {
  slot_put(pgid);
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .get_or_insert_with(HashMap::new)
    .insert(pgid, owner);
  // orphans of the run may come to the host (see crate::process::reaper)
  if let Some(w) = WATCHER.get() {
    (w.started)();
  }
}

pub fn unregister(pgid: i32) {
  if let Some(m) = LIVE.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
    m.remove(&pgid);
  }
  slot_clear(pgid);
  if let Some(w) = WATCHER.get() {
    (w.ended)(pgid);
  }
}

/// Whether `pgid` is tracked (a direct child's pid is its group id).
pub fn is_registered(pgid: i32) -> bool {
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .as_ref()
    .is_some_and(|m| m.contains_key(&pgid))
}

/// Number of groups currently tracked (for tests and leak checks).
pub fn live_count() -> usize {
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .as_ref()
    .map_or(0, |m| m.len())
}

/// Number of groups tracked for `owner` (tests give their own owner, so
/// that the runs of tests in parallel don't count).
#[cfg(test)]
pub fn live_count_of(owner: u64) -> usize {
  LIVE
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .as_ref()
    .map_or(0, |m| m.values().filter(|o| **o == owner).count())
}

/// Stop tracking every live group of `owner` (or of everyone with `None`)
/// and return them: the host environment shuts down, and
/// [`crate::process::tree::kill_all`] kills them (the signal-safe kill-all
/// still sees each until [`forget_group`]).
pub fn take_groups(owner: Option<u64>) -> Vec<i32> {
  let groups: Vec<i32> = {
    let mut guard = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(m) = guard.as_mut() else {
      return Vec::new();
    };
    let picked: Vec<i32> = m
      .iter()
      .filter(|(_, o)| owner.is_none_or(|w| **o == w))
      .map(|(p, _)| *p)
      .collect();
    for p in &picked {
      m.remove(p);
    }
    picked
  };
  groups
}

/// Forget a group the signal-safe kill-all would kill (it was killed).
pub(crate) fn forget_group(pgid: i32) {
  slot_clear(pgid);
}

/// The conventional name of a signal number (`SIGTERM`), or `SIG<n>`.
pub fn signal_name(n: i32) -> String {
  Signal::try_from(n)
    .map(|s| s.as_str().to_owned())
    .unwrap_or_else(|_| format!("SIG{n}"))
}

/// Parse a signal name (`SIGTERM`, `TERM`, `term`) or number.
pub fn parse_signal(name: &str) -> Option<Signal> {
  if let Ok(n) = name.parse::<i32>() {
    return Signal::try_from(n).ok();
  }
  let upper = name.to_ascii_uppercase();
  let full = if upper.starts_with("SIG") {
    upper
  } else {
    format!("SIG{upper}")
  };
  full.parse::<Signal>().ok()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn names() {
    assert_eq!(signal_name(15), "SIGTERM");
    assert_eq!(signal_name(9), "SIGKILL");
    assert_eq!(parse_signal("term"), Some(Signal::SIGTERM));
    assert_eq!(parse_signal("SIGINT"), Some(Signal::SIGINT));
    assert_eq!(parse_signal("9"), Some(Signal::SIGKILL));
    assert_eq!(parse_signal("nope"), None);
  }

  #[test]
  fn empty_group_is_not_alive() {
    assert!(!group_alive(0));
    assert!(!signal_group(1, Signal::SIGTERM));
  }
}
