//! Finding every descendant of an execution, even those that left its process
//! group (`setsid`, double fork, `nohup`): each execution is marked with an
//! environment variable, `EXEC_NATIVE_RUN_ID=<host pid>.<owner>.<run>`, which
//! children inherit. `/proc/<pid>/environ` shows the environment a process
//! started with, so a scan of `/proc` finds the marked ones (same user: no root
//! needed).
//!
//! Limits: a descendant that execs with a scrubbed environment (`env -i`)
//! loses the mark (the process-group kill still reaches it unless it also
//! left the group); `/proc` is Linux-only, so on other systems only the group
//! is killed.
//!
//! The scanner allocates nothing and uses the async-signal-safe readers of
//! [`crate::platform`] only, so it also runs inside the SIGTERM/SIGINT
//! handler of the host. Nothing here is specific to one system: where there
//! is no `/proc` the readers find nothing, and only the group is killed.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::platform::{self, Environ};

/// The variable that marks an execution's processes.
pub const MARK_VAR: &str = "EXEC_NATIVE_RUN_ID";

static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

/// A fresh mark for a run owned by `owner`.
pub fn new_mark(owner: u64) -> String {
  format!(
    "{}.{}.{}",
    std::process::id(),
    owner,
    NEXT_RUN.fetch_add(1, Ordering::Relaxed)
  )
}

/// The mark prefix shared by every run of `owner` (or of this host, with None).
pub fn owner_prefix(owner: Option<u64>) -> String {
  match owner {
    Some(o) => format!("{}.{}.", std::process::id(), o),
    None => format!("{}.", std::process::id()),
  }
}

/// Longest needle the scanner accepts.
pub const MAX_NEEDLE: usize = platform::MAX_NEEDLE;

/// A needle `\0EXEC_NATIVE_RUN_ID=<mark>` plus `\0` when `exact` (a whole
/// value), built in a fixed buffer so that it can be prepared ahead of a
/// signal handler.
#[derive(Clone, Copy)]
pub struct Needle {
  buf: [u8; MAX_NEEDLE],
  len: usize,
}

impl Needle {
  pub fn new(mark: &str, exact: bool) -> Option<Needle> {
    let mut buf = [0u8; MAX_NEEDLE];
    let parts: [&[u8]; 4] = [b"\0", MARK_VAR.as_bytes(), b"=", mark.as_bytes()];
    let mut len = 0;
    for p in parts {
      if len + p.len() >= MAX_NEEDLE {
        return None;
      }
      buf[len..len + p.len()].copy_from_slice(p);
      len += p.len();
    }
    if exact {
      buf[len] = 0;
      len += 1;
    }
    Some(Needle { buf, len })
  }

  pub(crate) fn bytes(&self) -> &[u8] {
    &self.buf[..self.len]
  }
}

/// Call `f(pid)` for every process (other than this one) whose environment
/// holds `needle`. Returns how many were found (none where there is no
/// `/proc`).
pub fn scan(needle: &Needle, f: &mut dyn FnMut(i32)) -> usize {
  let mut found = 0;
  platform::for_each_pid(&mut |pid| {
    if environ_contains(pid, needle.bytes()) {
      found += 1;
      f(pid);
    }
  });
  found
}

/// Whether the environment `pid` started with holds `needle` (false once it
/// is a zombie: its environment is gone).
pub fn environ_has(pid: i32, needle: &Needle) -> bool {
  environ_contains(pid, needle.bytes())
}

/// Whether `/proc/<pid>/environ` holds `needle`. A process in the middle of
/// an `execve` reads as empty (its new stack is not set up yet), so one scan
/// can miss it; the sweeps after a run repeat until nothing marked is left.
fn environ_contains(pid: i32, needle: &[u8]) -> bool {
  platform::environ_match(pid, needle) == Environ::Hit
}

/// Probing pids one by one beats listing /proc up to this many.
const RANGE_SCAN_MAX: i64 = 4096;

/// Like [`scan`], but only among processes created after `first_pid` was
/// allocated. Linux hands out pids cyclically, so every descendant of a run
/// whose child got `first_pid` has a pid in the circular range
/// `(first_pid, last allocated pid]`; for a short run that is a handful of
/// pids, probed directly instead of listing all of /proc (which costs ~4 ms
/// on a machine with ~900 processes). Falls back to the full scan when the
/// range is long (or has wrapped all the way) or /proc does not say.
pub fn scan_since(first_pid: i32, needle: &Needle, f: &mut dyn FnMut(i32)) -> usize {
  let mut found = 0;
  let ranged = for_each_since(first_pid, &mut |pid| {
    // a pid in the range may be a thread's id: `/proc/<tid>` answers too
    if environ_contains(pid, needle.bytes()) && !platform::is_thread(pid) {
      found += 1;
      f(pid);
    }
  });
  if ranged {
    found
  } else {
    scan(needle, f)
  }
}

/// Call `f` with every pid allocated after `first_pid` that still exists
/// (but this process's), or return false when the range is too long or /proc does not say.
fn for_each_since(first_pid: i32, f: &mut dyn FnMut(i32)) -> bool {
  let Some((last, max)) = platform::last_pid_and_max() else {
    return false;
  };
  let Some(len) = range_len(first_pid, last, max) else {
    return false;
  };
  walk_since(first_pid, len, max, &mut |_, pid| f(pid));
  true
}

/// Where the kernel's pids start again after they reach `pid_max`
/// (`RESERVED_PIDS`: below it are the pids of early daemons).
const WRAP_TO: i64 = 300;

/// How many pids were allocated after `first_pid`, the kernel's last being
/// `last` of `max`; `None` when that is too many to probe one by one (or
/// `first_pid` is not a pid). The count is of the pids [`walk_since`] steps
/// through: after a wrap the pids below [`WRAP_TO`] are skipped, so the
/// range of a run that began after a wrap starts, in a walk from a run that
/// began before it, exactly where its own walk would (the shared pass of
/// `sweeps` places each question in one walk by these counts; with the
/// wrap's 300 skipped pids counted, a later run's range began 300 pids too
/// far, and a `setsid sleep 100 &` it should have ended was left running).
pub(crate) fn range_len(first_pid: i32, last: i64, max: i64) -> Option<i64> {
  let first = first_pid as i64;
  if first <= 0 || first >= max {
    return None;
  }
  let len = if last >= first {
    last - first
  } else if last >= WRAP_TO {
    (max - first) + (last - WRAP_TO)
  } else {
    return None; // not where a wrap leads: let the full scan answer
  };
  (len <= RANGE_SCAN_MAX).then_some(len)
}

/// The pid `step` allocations after `first`, in the kernel's order (the
/// inverse of [`range_len`]).
fn pid_at(first: i64, step: i64, max: i64) -> i64 {
  let pid = first + step;
  if pid >= max {
    pid - max + WRAP_TO
  } else {
    pid
  }
}

/// Call `f(step, pid)` for the `len` pids allocated after `first_pid` (step
/// 1 to `len`, in the kernel's order; `max` is `pid_max`) that still exist,
/// but this process's.
pub(crate) fn walk_since(first_pid: i32, len: i64, max: i64, f: &mut dyn FnMut(i64, i32)) {
  let first = first_pid as i64;
  let me = std::process::id() as i64;
  for i in 1..=len {
    let pid = pid_at(first, i, max);
    // most pids of a range are gone by now (a burst of short runs): a
    // probe without a path walk first
    if pid != me && pid > 0 && platform::pid_exists(pid as i32) {
      f(i, pid as i32);
    }
  }
}

/// Whether a live process created after `first_pid` carries `mark`, or
/// shows an empty environment while alive and not a kernel thread: it is in
/// the middle of an `execve`, and whether it carries the mark cannot be told
/// yet. One read of each environment decides both, so a process cannot slip
/// between two checks; a sweep that took "no mark found" for "none left" let
/// a `setsid sleep 100 &` started just before the run's end escape (the
/// reaping test failed 5 times in 25). Falls back to [`running_marked`] when
/// the range cannot be probed.
pub fn marked_or_pending_since(mark: &str, first_pid: i32) -> bool {
  let Some(n) = Needle::new(mark, true) else {
    return false;
  };
  let mut found = false;
  let ranged = for_each_since(first_pid, &mut |pid| {
    if found {
      return;
    }
    found = match platform::environ_match(pid, n.bytes()) {
      Environ::Hit => !is_dead(pid),
      Environ::Empty => stat(pid).is_some_and(|st| alive(&st) && !st.kthread),
      Environ::Miss | Environ::Unreadable => false,
    };
  });
  if ranged {
    found
  } else {
    !running_marked(mark).is_empty()
  }
}

/// [`running_marked`] among processes created after `first_pid`.
pub fn running_marked_since(mark: &str, first_pid: i32) -> Vec<i32> {
  let mut v = Vec::new();
  if let Some(n) = Needle::new(mark, true) {
    scan_since(first_pid, &n, &mut |pid| v.push(pid));
  }
  v.into_iter().filter(|p| !is_dead(*p)).collect()
}

/// Pids marked with `mark` (exactly).
pub fn marked(mark: &str) -> Vec<i32> {
  let mut v = Vec::new();
  if let Some(n) = Needle::new(mark, true) {
    scan(&n, &mut |pid| v.push(pid));
  }
  v
}

/// Whether `pid` is a zombie or gone (dead for our purposes).
pub fn is_dead(pid: i32) -> bool {
  match stat(pid) {
    None => !platform::signal(pid, 0),
    Some(st) => !alive(&st),
  }
}

/// The process group of `pid`, from `/proc/<pid>/stat`.
pub fn pgid_of(pid: i32) -> Option<i32> {
  stat(pid).map(|st| st.pgid)
}

/// What `/proc/<pid>/stat` says: state, parent, start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
  pub state: u8,
  pub ppid: i32,
  pub pgid: i32,
  pub start: u64,
  /// A kernel thread (PF_KTHREAD): no environment, ever.
  pub kthread: bool,
}

/// Read `/proc/<pid>/stat` (None where there is no `/proc`).
pub fn stat(pid: i32) -> Option<Stat> {
  parse_stat(&platform::stat_text(pid)?)
}

pub fn parse_stat(s: &str) -> Option<Stat> {
  // after "pid (comm) ": state(3) ppid(4) ... starttime(22)
  let rest = s.get(s.rfind(')')? + 2..)?;
  let mut f = rest.split_whitespace();
  let state = *f.next()?.as_bytes().first()?;
  let ppid = f.next()?.parse().ok()?;
  let pgid = f.next()?.parse().ok()?;
  // session(6) tty(7) tpgid(8) flags(9)
  let flags: u64 = f.nth(3)?.parse().ok()?;
  let start = f.nth(21 - 9)?.parse().ok()?;
  Some(Stat {
    state,
    ppid,
    pgid,
    start,
    kthread: flags & 0x0020_0000 != 0,
  })
}

pub fn alive(st: &Stat) -> bool {
  !matches!(st.state, b'Z' | b'X' | b'x')
}

/// Marked processes still running (zombies excluded).
pub fn running_marked(mark: &str) -> Vec<i32> {
  marked(mark).into_iter().filter(|p| !is_dead(*p)).collect()
}

/// A live process of an execution tree, as the limits' watchdog sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
  pub pid: i32,
  /// Its tasks (what RLIMIT_NPROC and the pids cgroup count).
  pub threads: u64,
  /// utime + stime, in clock ticks.
  pub cpu_ticks: u64,
}

/// The live processes of the tree led by `leader` (whose pid is its process
/// group id): the leader, every process in its group, every process carrying
/// `mark`, every pid in `extra` (the tree's cgroups), and every descendant of
/// one of those, so that a process that scrubbed its environment (`env -i`)
/// or left the group still counts while its parent does. Looks among the
/// pids allocated since the leader's when /proc says which (see
/// [`scan_since`]), else at every process.
pub fn members(mark: &str, leader: i32, extra: &[i32]) -> Vec<Member> {
  struct Seen {
    pid: i32,
    ppid: i32,
    live: bool,
    threads: u64,
    cpu: u64,
    inside: bool,
  }
  let needle = Needle::new(mark, true);
  let me = std::process::id() as i32;
  let look = |pid: i32| -> Option<Seen> {
    if pid == me || pid <= 0 {
      return None;
    }
    let s = platform::stat_text(pid)?;
    let st = parse_stat(&s)?;
    let rest = s.get(s.rfind(')').unwrap_or(0) + 2..).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let inside = pid == leader
      || (leader > 1 && st.pgid == leader)
      || extra.contains(&pid)
      || needle.is_some_and(|n| environ_contains(pid, n.bytes()));
    Some(Seen {
      pid,
      ppid: st.ppid,
      live: alive(&st),
      threads: num(17).max(1),
      cpu: num(11) + num(12),
      inside,
    })
  };
  let mut seen: Vec<Seen> = Vec::new();
  let ranged = leader > 1 && for_each_since(leader - 1, &mut |pid| seen.extend(look(pid)));
  if !ranged {
    seen.clear();
    platform::for_each_pid(&mut |pid| seen.extend(look(pid)));
  }
  // descendants of members are members, to any depth
  loop {
    let inside: Vec<i32> = seen.iter().filter(|s| s.inside).map(|s| s.pid).collect();
    let mut grew = false;
    for s in seen.iter_mut().filter(|s| !s.inside) {
      if inside.contains(&s.ppid) {
        s.inside = true;
        grew = true;
      }
    }
    if !grew {
      break;
    }
  }
  seen
    .into_iter()
    .filter(|s| s.inside && s.live)
    .map(|s| Member {
      pid: s.pid,
      threads: s.threads,
      cpu_ticks: s.cpu,
    })
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::process::Command;
  use std::time::{Duration, Instant};

  #[test]
  fn stat_fields() {
    let s = "123 (a b) c) S 45 123 123 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 98765 1 2";
    assert_eq!(
      parse_stat(s),
      Some(Stat {
        state: b'S',
        ppid: 45,
        pgid: 123,
        start: 98765,
        kthread: false,
      })
    );
    let me = stat(std::process::id() as i32).unwrap();
    assert!(alive(&me));
    // SAFETY: getppid has no preconditions and cannot fail.
    assert_eq!(me.ppid, unsafe { libc::getppid() });
    assert!(me.start > 0);
    assert_eq!(stat(-1), None);
  }

  #[test]
  fn pgid_of_self() {
    let me = std::process::id() as i32;
    // SAFETY: getpgrp has no preconditions and cannot fail.
    assert_eq!(pgid_of(me), Some(unsafe { libc::getpgrp() }));
    assert_eq!(pgid_of(-5), None);
  }

  #[test]
  fn a_range_counts_the_steps_of_its_walk_across_a_wrap() {
    let max: i64 = 32768;
    // every pid of a walk is at the step range_len counts for it: before,
    // at and after the wrap to 300
    for first in [1000, max - 10, max - 1] {
      for step in 1..=40 {
        let pid = pid_at(first, step, max);
        assert!((WRAP_TO..max).contains(&pid), "{first} + {step} -> {pid}");
        assert_eq!(
          range_len(first as i32, pid, max),
          Some(step),
          "{first} -> {pid}"
        );
      }
    }
    assert_eq!(pid_at(max - 10, 10, max), WRAP_TO);
    // the shared pass places a later run's range in a walk from an earlier
    // run's first pid by the difference of their lengths: a run begun
    // after the wrap (at 305) starts at the step of its first pid
    let (origin, later, last) = (max - 50, 305, 400);
    let start =
      range_len(origin as i32, last, max).unwrap() - range_len(later as i32, last, max).unwrap();
    assert_eq!(pid_at(origin, start, max), later);
    assert_eq!(pid_at(origin, start + 1, max), later + 1);
    // not a pid, too long, or a last pid no wrap leads to: the full scan
    assert_eq!(range_len(0, 10, max), None);
    assert_eq!(range_len(max as i32, 10, max), None);
    assert_eq!(range_len(1000, 1001 + RANGE_SCAN_MAX, max), None);
    assert_eq!(range_len(1000, 12, max), None);
    assert_eq!(range_len(1000, 1000, max), Some(0));
  }

  #[test]
  fn needle_shape() {
    let n = Needle::new("1.2.3", true).unwrap();
    assert_eq!(n.bytes(), b"\0EXEC_NATIVE_RUN_ID=1.2.3\0");
    assert!(Needle::new(&"x".repeat(200), true).is_none());
  }

  #[test]
  fn finds_an_escaped_descendant_and_kills_it() {
    let mark = new_mark(999);
    // the grandchild leaves the session and the group, and outlives its parent
    let st = Command::new("sh")
      .arg("-c")
      .arg("setsid sleep 30 >/dev/null 2>&1 < /dev/null & exit 0")
      .env(MARK_VAR, &mark)
      .status()
      .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let mut found = Vec::new();
    while found.is_empty() && t0.elapsed() < Duration::from_secs(3) {
      found = running_marked(&mark);
    }
    assert_eq!(found.len(), 1, "the escaped sleep is found by its mark");
    assert!(platform::signal(found[0], libc::SIGKILL));
    let t0 = Instant::now();
    while !running_marked(&mark).is_empty() && t0.elapsed() < Duration::from_secs(3) {
      std::thread::sleep(Duration::from_millis(10));
    }
    assert!(running_marked(&mark).is_empty());
  }

  #[test]
  fn range_scan_finds_what_the_full_scan_finds() {
    let mark = new_mark(997);
    let mut first = Command::new("true").spawn().unwrap();
    let first_pid = first.id() as i32;
    first.wait().unwrap();
    let st = Command::new("sh")
      .arg("-c")
      .arg("setsid sleep 30 >/dev/null 2>&1 < /dev/null & exit 0")
      .env(MARK_VAR, &mark)
      .status()
      .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    let mut full = Vec::new();
    while full.is_empty() && t0.elapsed() < Duration::from_secs(3) {
      full = running_marked(&mark);
    }
    assert_eq!(full.len(), 1);
    // found while still the forked shell: wait for the exec of sleep to be
    // over, since an environ read in the middle of an exec comes back empty
    // (this made the test fail 3 times in 20 runs)
    let comm = format!("/proc/{}/comm", full[0]);
    while std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() != "sleep")
      && t0.elapsed() < Duration::from_secs(3)
    {
      std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(running_marked_since(&mark, first_pid), full);
    // a range that starts after the process was created does not see it
    assert!(running_marked_since(&mark, full[0]).is_empty());
    assert!(platform::signal(full[0], libc::SIGKILL));
  }

  #[test]
  fn other_marks_are_not_matched() {
    let mark = new_mark(998);
    let mut child = Command::new("sleep")
      .arg("5")
      .env(MARK_VAR, format!("{mark}0"))
      .spawn()
      .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(
      marked(&mark).is_empty(),
      "a mark that only shares a prefix must not match"
    );
    child.kill().unwrap();
    child.wait().unwrap();
  }
}
