//! Reaping the orphans of our runs, so that none is left as a zombie.
//!
//! A process that escaped a run (`setsid`, double fork, `nohup`) and whose
//! parent died is reparented to the nearest *child subreaper* or to PID 1.
//! When the host is one of those (it is PID 1, as Node is in a container
//! started without `--init`, or [`set_subreaper`] was called), such orphans
//! become the host's children, and when they die the host must reap them or
//! they stay zombies.
//!
//! The host also has children it must never reap: Node (libuv) reaps each of
//! its `child_process` children with `waitpid(pid, WNOHANG)` and never learns
//! of the exit of one that someone else reaped, and tokio reaps the children
//! of [`crate::process::supervise::Execution`] the same way. So there is no `waitpid(-1)` and
//! no SIGCHLD handler here: a pid is reaped only with `waitpid(pid, WNOHANG)`
//! once it is proven to be an orphan of one of our runs:
//!
//! - it carries our mark (`EXEC_NATIVE_RUN_ID=<host pid>.…`, see
//!   [`crate::process::marks`]) — checked while it is alive, since a zombie's
//!   environment cannot be read; it is then recorded as (pid, start time);
//! - it is not a direct child of an execution: no pid of the group registry
//!   ([`crate::process::registry::register`], where every spawn path records its child
//!   before the [`spawning`] guard is released; a direct child stays there
//!   until its owner reaped it), checked when no spawn is in flight;
//! - when it is reaped it is a zombie whose parent is the host and whose start
//!   time (`/proc/<pid>/stat` field 22) is the recorded one (a reused pid
//!   has another start time).
//!
//! A zombie that was never seen alive is also proven ours by its process
//! group: a zombie child of the host that is a member, not the leader, of the
//! group of one of our runs (registered, or ended less than [`ENDED_KEEP`]
//! ago). Node's children lead their own group (`detached`) or share the
//! host's; our direct children lead a registered group; so none of them is
//! such a member. This covers what stays in the run's group (a plain double
//! fork), even when it exits before anything saw it.
//!
//! Records come from the sweeps that signal marked processes ([`note`], called
//! by [`crate::process::marks`], and [`before_kill`] before a group is killed) and from
//! one light background task that looks at the host's children
//! (`/proc/self/task/*/children`) and at the children of what it recorded,
//! every [`INTERVAL`], only while there is something to watch (a live run, a
//! run that ended lately, a recorded process) and only when the host is a
//! reaper. Nothing of this runs otherwise: the cost for a host that is
//! neither PID 1 nor a subreaper is two atomic increments (the spawn guard)
//! and a few atomic loads per run.
//!
//! Limit: a process that left the run's group (`setsid`) and its mark-bearing
//! environment unseen — it becomes an orphan and exits between two looks of
//! the task (within [`INTERVAL`]) without a sweep seeing it alive — cannot be
//! proven ours and is left as it is.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use crate::error::{ErrorCode, ExecError};
use crate::process::marks::{self, Needle};

/// `EXEC_NATIVE_SUBREAPER=1` in the host's environment makes it a subreaper
/// when the addon loads.
pub const SUBREAPER_VAR: &str = "EXEC_NATIVE_SUBREAPER";

/// How often the background task looks while there is something to watch.
pub const INTERVAL: Duration = Duration::from_millis(100);

mod pass;
use pass::{Host, State, Waited, MAX_RECORDED};

static INIT: Once = Once::new();
/// The host is PID 1.
static PID1: AtomicBool = AtomicBool::new(false);
/// The host has the child subreaper attribute (set by us, or found set).
static SUBREAPER: AtomicBool = AtomicBool::new(false);
/// The background task is running.
static RUNNING: AtomicBool = AtomicBool::new(false);
static WAKE: tokio::sync::Notify = tokio::sync::Notify::const_new();
static REAPED: AtomicU64 = AtomicU64::new(0);

/// How long the group of a run that ended still proves its zombies ours.
const ENDED_KEEP: Duration = Duration::from_secs(3);

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
  let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
  f(g.get_or_insert_with(State::default))
}

fn me() -> i32 {
  std::process::id() as i32
}

/// Read `EXEC_NATIVE_SUBREAPER` and whether the host is PID 1, and have the
/// registry tell [`watch`] and [`kick`] when a group comes and goes (once;
/// also done lazily by everything here, and by every spawn before it
/// registers its child). Call it when the host starts.
pub fn init() {
  INIT.call_once(|| {
    crate::process::registry::set_watcher(crate::process::registry::Watcher {
      started: watch,
      ended: kick,
    });
    if me() == 1 {
      PID1.store(true, Ordering::SeqCst);
    }
    if kernel_subreaper() == Some(true) {
      SUBREAPER.store(true, Ordering::SeqCst);
    }
    if std::env::var(SUBREAPER_VAR).is_ok_and(|v| v == "1") {
      let _ = apply(true);
    }
  });
}

/// Whether orphans of our runs are reparented to the host, and so reaped here.
pub fn enabled() -> bool {
  init();
  PID1.load(Ordering::Relaxed) || SUBREAPER.load(Ordering::Relaxed)
}

fn kernel_subreaper() -> Option<bool> {
  crate::platform::child_subreaper()
}

fn apply(on: bool) -> Result<bool, ExecError> {
  if !cfg!(target_os = "linux") {
    return Ok(false);
  }
  crate::platform::set_child_subreaper(on).map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot change the child subreaper attribute: {e}"),
    )
  })?;
  // what the kernel says now, not what was asked
  let now = kernel_subreaper().unwrap_or(on);
  SUBREAPER.store(now, Ordering::SeqCst);
  Ok(now)
}

/// Make the host a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`) or stop
/// being one. While it is one, every orphan among its descendants is
/// reparented to it instead of to PID 1: those of our runs are reaped here,
/// the others (orphans of the host's plain `child_process` grandchildren)
/// stay zombies of the host until it exits. Returns whether the host is now a
/// subreaper (always false on systems other than Linux).
pub fn set_subreaper(on: bool) -> Result<bool, ExecError> {
  init();
  let now = apply(on)?;
  if now {
    watch();
  }
  Ok(now)
}

/// Whether the host is a child subreaper (asked of the kernel).
pub fn is_subreaper() -> bool {
  init();
  kernel_subreaper().unwrap_or_else(|| SUBREAPER.load(Ordering::SeqCst))
}

/// Whether the host is PID 1 (of its pid namespace).
pub fn is_pid1() -> bool {
  init();
  PID1.load(Ordering::SeqCst)
}

/// How many orphans were reaped here since the host started.
pub fn reaped_count() -> u64 {
  REAPED.load(Ordering::Relaxed)
}

/// How many processes are recorded, waiting to exit and be reaped.
pub fn recorded_count() -> usize {
  with_state(|s| s.recorded.len())
}

/// Whether the background task is running.
pub fn watching() -> bool {
  RUNNING.load(Ordering::SeqCst)
}

/// A run started (its group was registered): watch while it lives.
pub fn watch() {
  if enabled() {
    ensure_running();
  }
}

/// A run ended (group `pgid` left the registry): look soon, while what it
/// left behind still runs, and let its group prove its zombies ours for a
/// while ([`ENDED_KEEP`]).
pub fn kick(pgid: i32) {
  if enabled() {
    with_state(|s| {
      if s.ended.len() < MAX_RECORDED {
        s.ended.insert(pgid, std::time::Instant::now());
      }
    });
    WAKE.notify_one();
    ensure_running();
  }
}

/// Whether `pgid` is the group of one of our runs, live or ended lately.
fn our_group(pgid: i32) -> bool {
  pgid > 1
    && (crate::process::registry::is_registered(pgid)
      || with_state(|s| s.ended.contains_key(&pgid)))
}

/// The needle of every mark of this host.
fn host_needle() -> Option<&'static Needle> {
  static N: std::sync::OnceLock<Option<Needle>> = std::sync::OnceLock::new();
  N.get_or_init(|| Needle::new(&marks::owner_prefix(None), false))
    .as_ref()
}

/// A mark the host itself inherited that looks like one of ours (possible
/// only when an exec-native host with the same pid, in another pid namespace,
/// started this one): Node's own children carry it too, so it proves nothing.
fn inherited_needle() -> Option<&'static Needle> {
  static N: std::sync::OnceLock<Option<Needle>> = std::sync::OnceLock::new();
  N.get_or_init(|| {
    let v = std::env::var(marks::MARK_VAR).ok()?;
    if !v.starts_with(&marks::owner_prefix(None)) {
      return None;
    }
    Needle::new(&v, true)
  })
  .as_ref()
}

/// Whether `pid` carries one of this host's marks (readable only while alive).
fn marked_ours(pid: i32) -> bool {
  let Some(n) = host_needle() else { return false };
  if !marks::environ_has(pid, n) {
    return false;
  }
  !inherited_needle().is_some_and(|i| marks::environ_has(pid, i))
}

/// Record `pid`, which a scan of /proc has just found carrying one of our run
/// marks, if it is alive and not a registered direct child. Called by the
/// sweep before it signals the process (which may then die before the task
/// ever sees it). The mark is not read again: a second read can come back
/// empty when the process is in the middle of an `execve` (`setsid sleep`),
/// and the signal that follows would leave a zombie nobody recorded (the
/// reaping test of a setsid orphan failed 10 times in 25 that way). A no-op
/// when the host is not a reaper.
pub fn note(pid: i32) {
  if !enabled() || pid == me() || crate::process::registry::is_registered(pid) {
    return;
  }
  let Some(st) = marks::stat(pid) else { return };
  // an inherited look-alike mark (see `inherited_needle`) needs the full check
  let proven = if inherited_needle().is_some() {
    marked_ours(pid)
  } else {
    true
  };
  if marks::alive(&st) && proven && with_state(|s| s.insert(pid, st.start)) {
    ensure_running();
  }
}

/// The real host: the statics of this module, `/proc` and `waitpid`.
struct Os;

impl Host for Os {
  fn me(&self) -> i32 {
    me()
  }
  fn enabled(&self) -> bool {
    enabled()
  }
  fn spawning(&self) -> bool {
    crate::process::registry::spawning_now() > 0
  }
  fn registered(&self, pid: i32) -> bool {
    crate::process::registry::is_registered(pid)
  }
  fn our_group(&self, pgid: i32) -> bool {
    our_group(pgid)
  }
  fn host_pgid(&self) -> i32 {
    nix::unistd::getpgrp().as_raw()
  }
  fn stat(&self, pid: i32) -> Option<marks::Stat> {
    marks::stat(pid)
  }
  fn marked_ours(&self, pid: i32) -> bool {
    marked_ours(pid)
  }
  fn children(&self, pid: Option<i32>) -> Vec<i32> {
    crate::platform::children_of(pid)
  }
  fn wait(&self, pid: i32) -> Waited {
    crate::platform::reap_nohang(pid)
  }
  fn state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
    with_state(f)
  }
}

/// One look: record the host's marked children and their descendants, then
/// reap the recorded ones that are our zombies (the decisions: [`pass`]).
/// Runs in the background task; public for tests. True when a spawn was in
/// flight and some children or zombies were left for a moment later.
pub fn pass() -> bool {
  let (reaped, deferred) = pass::pass(&Os);
  REAPED.fetch_add(reaped, Ordering::Relaxed);
  deferred
}

fn has_work() -> bool {
  let now = std::time::Instant::now();
  let (recorded, ended) = with_state(|s| {
    s.ended.retain(|_, t| now.duration_since(*t) < ENDED_KEEP);
    (s.recorded.len(), s.ended.len())
  });
  recorded > 0 || (enabled() && (ended > 0 || crate::process::registry::live_count() > 0))
}

/// Owned by the running task: clears RUNNING when the task is dropped
/// without finishing (its runtime shut down, as a test's does), and then
/// goes on in a thread if there is still work.
struct Running {
  thread_fallback: bool,
}

impl Drop for Running {
  fn drop(&mut self) {
    RUNNING.store(false, Ordering::SeqCst);
    if self.thread_fallback && has_work() && !RUNNING.swap(true, Ordering::SeqCst) {
      spawn_thread(Running {
        thread_fallback: false,
      });
    }
  }
}

fn ensure_running() {
  if RUNNING.swap(true, Ordering::SeqCst) {
    return;
  }
  // made here and moved in: a task dropped unpolled still clears RUNNING
  match tokio::runtime::Handle::try_current() {
    Ok(h) => {
      let running = Running {
        thread_fallback: true,
      };
      h.spawn(async move {
        let running = running;
        loop {
          tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = WAKE.notified() => {}
          }
          for _ in 0..50 {
            if !pass() {
              break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
          }
          if !keep_going() {
            std::mem::forget(running);
            return;
          }
        }
      });
    }
    Err(_) => spawn_thread(Running {
      thread_fallback: false,
    }),
  }
}

/// The loop in a thread of its own, for callers outside a tokio runtime.
fn spawn_thread(running: Running) {
  let spawned = std::thread::Builder::new()
    .name("exec-reaper".into())
    .spawn(move || {
      let running = running;
      loop {
        std::thread::sleep(INTERVAL);
        for _ in 0..50 {
          if !pass() {
            break;
          }
          std::thread::sleep(Duration::from_millis(2));
        }
        if !keep_going() {
          std::mem::forget(running);
          return;
        }
      }
    });
  // on failure the closure, and so `running`, is dropped: RUNNING clears
  drop(spawned);
}

/// Decide whether the task goes on; when it stops, RUNNING is false.
fn keep_going() -> bool {
  if has_work() {
    return true;
  }
  RUNNING.store(false, Ordering::SeqCst);
  // a watch() between has_work() and the store saw RUNNING set and left the
  // work to us: take it back unless another task started meanwhile
  has_work() && !RUNNING.swap(true, Ordering::SeqCst)
}
