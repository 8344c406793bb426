//! The reaper's decisions, apart from their effects: one look at the host's
//! children (what to record as ours, what to leave as foreign) and one reap of
//! what is recorded (reap, forget, wait, or defer), written against the
//! [`Host`] trait so that they are unit-tested with a fake (as tokio's
//! `process/unix/reap.rs` is with its `MockWait`); [`super::Os`] is the real
//! host, and the real-process tests (`tests/reaping.rs`,
//! `__test__/reaping.test.ts`) prove the wiring.

use std::collections::{HashMap, HashSet};

use crate::process::marks::Stat;

/// Most processes recorded at once (a runaway tree must not grow memory
/// without bound; what does not fit is simply not reaped by us).
pub const MAX_RECORDED: usize = 65536;

/// What the reaper remembers between looks.
#[derive(Default, Debug)]
pub struct State {
  /// Proven ours while alive: pid -> start time.
  pub recorded: HashMap<i32, u64>,
  /// Children of the host seen not to carry our mark (pruned when they go).
  pub foreign: HashSet<i32>,
  /// Groups of runs that ended lately: pgid -> when.
  pub ended: HashMap<i32, std::time::Instant>,
}

impl State {
  /// Record `pid` (alive, ours) with its start time, unless the table is full.
  pub fn insert(&mut self, pid: i32, start: u64) -> bool {
    if self.recorded.len() < MAX_RECORDED || self.recorded.contains_key(&pid) {
      self.recorded.insert(pid, start);
      true
    } else {
      false
    }
  }
}

pub use crate::platform::Waited;

/// What the decisions need of the system. Every method is one observation or
/// one effect; none decides anything.
pub trait Host {
  /// The host's own pid.
  fn me(&self) -> i32;
  /// The host is a reaper (PID 1 or a child subreaper).
  fn enabled(&self) -> bool;
  /// A spawn is between its fork and the registration of its child.
  fn spawning(&self) -> bool;
  /// `pid` leads (is the direct child of) a registered run.
  fn registered(&self, pid: i32) -> bool;
  /// `pgid` is the group of one of our runs, live or ended lately.
  fn our_group(&self, pgid: i32) -> bool;
  /// The host's own process group.
  fn host_pgid(&self) -> i32;
  /// `/proc/<pid>/stat`.
  fn stat(&self, pid: i32) -> Option<Stat>;
  /// `pid` carries one of this host's marks (readable only while alive).
  fn marked_ours(&self, pid: i32) -> bool;
  /// The children of `pid` (of all its threads); `None`: of the host.
  fn children(&self, pid: Option<i32>) -> Vec<i32>;
  /// `waitpid(pid, WNOHANG)`.
  fn wait(&self, pid: i32) -> Waited;
  /// Run `f` on the shared state (a short critical section: no other
  /// method of the host is called inside it).
  fn state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R;
}

fn alive(st: &Stat) -> bool {
  crate::process::marks::alive(st)
}

/// Record `pid` if it is alive, ours and not a registered direct child; the
/// start time is read before the mark, so a pid reused in between is recorded
/// with a start time that never matches again.
pub fn record<H: Host>(h: &H, pid: i32) -> bool {
  if pid == h.me() || h.registered(pid) {
    return false;
  }
  h.stat(pid).is_some_and(|st| record_with(h, pid, st))
}

/// [`record`] with the stat already read.
pub fn record_with<H: Host>(h: &H, pid: i32, st: Stat) -> bool {
  alive(&st) && h.marked_ours(pid) && h.state(|s| s.insert(pid, st.start))
}

/// One look at the host's children: a live child that carries our mark is
/// recorded, one that does not is remembered as foreign (its environment is
/// not read again while it stays); a zombie never seen alive that is a
/// member, not the leader, of one of our runs' groups is recorded too; then
/// the descendants of everything recorded. While a spawn is in flight a new
/// child may be that spawn's, not yet registered: it is left for a later
/// look (`*deferred`).
pub fn look<H: Host>(h: &H, deferred: &mut bool) {
  let kids = h.children(None);
  let in_flight = h.spawning();
  let (known, foreign): (HashSet<i32>, HashSet<i32>) =
    h.state(|s| (s.recorded.keys().copied().collect(), s.foreign.clone()));
  let host_pgid = h.host_pgid();
  let mut new_foreign = HashSet::new();
  let mut by_group = Vec::new();
  for &pid in &kids {
    if known.contains(&pid) || h.registered(pid) {
      continue;
    }
    if in_flight {
      *deferred = true;
      continue;
    }
    let Some(st) = h.stat(pid) else { continue };
    if alive(&st) {
      if foreign.contains(&pid) || !record_with(h, pid, st) {
        new_foreign.insert(pid);
      }
    } else if st.state == b'Z' && st.pgid != pid && st.pgid != host_pgid && h.our_group(st.pgid) {
      // Node's children lead their own group or share the host's; our
      // direct children lead a registered group: a member is an escapee
      by_group.push((pid, st.start));
    }
  }
  if !by_group.is_empty() {
    h.state(|s| {
      for (pid, start) in by_group {
        s.recorded.insert(pid, start);
      }
    });
  }
  // the descendants of what is recorded: a grandchild that dies after its
  // parent (and comes to us as a zombie) was then seen alive
  let mut queue: Vec<i32> = h.state(|s| s.recorded.keys().copied().collect());
  let mut seen: HashSet<i32> = queue.iter().copied().collect();
  while let Some(pid) = queue.pop() {
    for g in h.children(Some(pid)) {
      if seen.insert(g) && record(h, g) {
        queue.push(g);
      }
    }
    if seen.len() > MAX_RECORDED {
      break;
    }
  }
  h.state(|s| s.foreign = new_foreign);
}

/// What to do with one recorded process at one reap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
  /// Gone, reused, or never coming to us: drop the record.
  Forget,
  /// Alive, or not (yet) the host's child: look again later.
  Keep,
  /// A zombie of ours, but a spawn is in flight: try again in a moment.
  Defer,
  /// A zombie child of the host, proven ours: `waitpid` it.
  Reap,
}

/// The decision for a recorded `(pid, start)` given what `/proc` says now.
pub fn verdict<H: Host>(h: &H, pid: i32, start: u64, st: Option<Stat>) -> Verdict {
  let Some(st) = st else {
    return Verdict::Forget; // reaped by its parent
  };
  if st.start != start {
    return Verdict::Forget; // the pid was reused
  }
  if st.ppid != h.me() {
    // no longer a reaper: it will never come to us
    return if h.enabled() {
      Verdict::Keep
    } else {
      Verdict::Forget
    };
  }
  if st.state != b'Z' {
    return Verdict::Keep;
  }
  // a direct child of an execution is in the registry from before its spawn
  // ticket is released until its owner reaped it: so no spawn in flight
  // (asked after the zombie was seen), and not registered
  if h.spawning() {
    return Verdict::Defer;
  }
  if h.registered(pid) {
    return Verdict::Keep;
  }
  Verdict::Reap
}

/// Reap the recorded zombies that are ours; returns how many were reaped.
pub fn reap<H: Host>(h: &H, deferred: &mut bool) -> u64 {
  let recorded: Vec<(i32, u64)> = h.state(|s| s.recorded.iter().map(|(p, t)| (*p, *t)).collect());
  let mut forget = Vec::new();
  let mut reaped = 0;
  for (pid, start) in recorded {
    match verdict(h, pid, start, h.stat(pid)) {
      Verdict::Forget => forget.push(pid),
      Verdict::Keep => {}
      Verdict::Defer => *deferred = true,
      Verdict::Reap => match h.wait(pid) {
        Waited::Reaped => {
          reaped += 1;
          forget.push(pid);
        }
        Waited::NotChild => forget.push(pid),
        Waited::Nothing => {}
      },
    }
  }
  if !forget.is_empty() {
    h.state(|s| {
      for p in forget {
        s.recorded.remove(&p);
      }
    });
  }
  reaped
}

/// One pass: a look (when the host is a reaper), then a reap. Returns how
/// many were reaped and whether something was deferred.
pub fn pass<H: Host>(h: &H) -> (u64, bool) {
  let mut deferred = false;
  if h.enabled() {
    look(h, &mut deferred);
  }
  let reaped = reap(h, &mut deferred);
  (reaped, deferred)
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::cell::{Cell, RefCell};

  const ME: i32 = 100;
  const HOST_PGID: i32 = 100;

  /// A process table in memory.
  #[derive(Default)]
  struct Fake {
    enabled: bool,
    spawning: Cell<bool>,
    registered: HashSet<i32>,
    groups: HashSet<i32>,
    procs: RefCell<HashMap<i32, Stat>>,
    marked: HashSet<i32>,
    children: HashMap<i32, Vec<i32>>,
    state: RefCell<State>,
    /// environments read
    reads: Cell<usize>,
    waited: RefCell<Vec<i32>>,
  }

  fn st(state: u8, ppid: i32, pgid: i32, start: u64) -> Stat {
    Stat {
      state,
      ppid,
      pgid,
      start,
      kthread: false,
    }
  }

  impl Fake {
    fn new() -> Self {
      Fake {
        enabled: true,
        ..Default::default()
      }
    }
    fn proc(mut self, pid: i32, s: Stat) -> Self {
      self.procs.get_mut().insert(pid, s);
      if s.ppid == ME {
        self.children.entry(0).or_default().push(pid);
      } else {
        self.children.entry(s.ppid).or_default().push(pid);
      }
      self
    }
    fn marked(mut self, pid: i32) -> Self {
      self.marked.insert(pid);
      self
    }
    fn die(&self, pid: i32) {
      if let Some(s) = self.procs.borrow_mut().get_mut(&pid) {
        s.state = b'Z';
      }
    }
    fn recorded(&self) -> Vec<i32> {
      let mut v: Vec<i32> = self.state.borrow().recorded.keys().copied().collect();
      v.sort();
      v
    }
  }

  impl Host for Fake {
    fn me(&self) -> i32 {
      ME
    }
    fn enabled(&self) -> bool {
      self.enabled
    }
    fn spawning(&self) -> bool {
      self.spawning.get()
    }
    fn registered(&self, pid: i32) -> bool {
      self.registered.contains(&pid)
    }
    fn our_group(&self, pgid: i32) -> bool {
      self.groups.contains(&pgid)
    }
    fn host_pgid(&self) -> i32 {
      HOST_PGID
    }
    fn stat(&self, pid: i32) -> Option<Stat> {
      self.procs.borrow().get(&pid).copied()
    }
    fn marked_ours(&self, pid: i32) -> bool {
      self.reads.set(self.reads.get() + 1);
      // a zombie's environment cannot be read
      self.marked.contains(&pid) && self.stat(pid).is_some_and(|s| alive(&s))
    }
    fn children(&self, pid: Option<i32>) -> Vec<i32> {
      self
        .children
        .get(&pid.unwrap_or(0))
        .cloned()
        .unwrap_or_default()
    }
    fn wait(&self, pid: i32) -> Waited {
      let mut procs = self.procs.borrow_mut();
      match procs.get(&pid) {
        Some(s) if s.ppid == ME && s.state == b'Z' => {
          procs.remove(&pid);
          self.waited.borrow_mut().push(pid);
          Waited::Reaped
        }
        Some(s) if s.ppid == ME => Waited::Nothing,
        _ => Waited::NotChild,
      }
    }
    fn state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
      f(&mut self.state.borrow_mut())
    }
  }

  #[test]
  fn a_marked_orphan_seen_alive_is_reaped_once_it_dies() {
    let h = Fake::new().proc(7, st(b'S', ME, 7, 50)).marked(7);
    assert_eq!(pass(&h), (0, false));
    assert_eq!(h.recorded(), vec![7]);
    h.die(7);
    assert_eq!(pass(&h), (1, false));
    assert_eq!(*h.waited.borrow(), vec![7]);
    assert!(h.recorded().is_empty());
  }

  #[test]
  fn a_child_without_our_mark_is_never_reaped_and_read_once() {
    let h = Fake::new().proc(8, st(b'S', ME, 8, 50));
    pass(&h);
    pass(&h);
    assert!(h.recorded().is_empty());
    assert_eq!(
      h.reads.get(),
      1,
      "a foreign child's environment is read once"
    );
    h.die(8);
    pass(&h);
    assert!(
      h.waited.borrow().is_empty(),
      "Node's child is libuv's to reap"
    );
  }

  #[test]
  fn a_reused_pid_is_forgotten_not_reaped() {
    let h = Fake::new().proc(9, st(b'S', ME, 9, 50)).marked(9);
    pass(&h);
    // the recorded process went, another one got its pid, and is a zombie
    h.procs.borrow_mut().insert(9, st(b'Z', ME, 9, 51));
    assert_eq!(
      verdict(&h, 9, 50, h.stat(9)),
      Verdict::Forget,
      "another start time"
    );
    assert_eq!(pass(&h).0, 0);
    assert!(h.waited.borrow().is_empty());
    assert!(h.recorded().is_empty());
  }

  #[test]
  fn a_registered_direct_child_is_its_owners_to_reap() {
    let mut h = Fake::new().proc(10, st(b'Z', ME, 10, 50));
    h.registered.insert(10);
    h.state.borrow_mut().recorded.insert(10, 50);
    assert_eq!(verdict(&h, 10, 50, h.stat(10)), Verdict::Keep);
    pass(&h);
    assert!(h.waited.borrow().is_empty());
  }

  #[test]
  fn nothing_is_reaped_or_recorded_while_a_spawn_is_in_flight() {
    let h = Fake::new()
      .proc(11, st(b'S', ME, 11, 50))
      .marked(11)
      .proc(12, st(b'Z', ME, 12, 50));
    h.state.borrow_mut().recorded.insert(12, 50);
    h.spawning.set(true);
    assert_eq!(pass(&h), (0, true), "deferred");
    assert_eq!(h.recorded(), vec![12], "11 may be the spawn's own child");
    assert!(h.waited.borrow().is_empty());
    h.spawning.set(false);
    assert_eq!(pass(&h), (1, false));
    assert_eq!(h.recorded(), vec![11]);
  }

  #[test]
  fn a_zombie_never_seen_alive_is_ours_only_as_a_member_of_our_group() {
    let mut h = Fake::new()
      .proc(20, st(b'Z', ME, 30, 50)) // member of our run's group 30
      .proc(21, st(b'Z', ME, 21, 50)) // leads its own group (Node's detached child)
      .proc(22, st(b'Z', ME, HOST_PGID, 50)) // in the host's group (Node's child)
      .proc(23, st(b'Z', ME, 31, 50)); // member of a group that is not ours
    h.groups.insert(30);
    h.groups.insert(21);
    h.groups.insert(HOST_PGID);
    assert_eq!(pass(&h).0, 1);
    assert_eq!(*h.waited.borrow(), vec![20]);
  }

  #[test]
  fn descendants_of_a_recorded_process_are_recorded_while_alive() {
    let h = Fake::new()
      .proc(40, st(b'S', ME, 40, 50))
      .marked(40)
      .proc(41, st(b'S', 40, 40, 51))
      .marked(41)
      .proc(42, st(b'S', 41, 40, 52))
      .marked(42)
      .proc(43, st(b'S', 41, 40, 53)); // dropped the mark: not ours
    pass(&h);
    assert_eq!(h.recorded(), vec![40, 41, 42]);
  }

  #[test]
  fn a_host_that_stops_being_a_reaper_forgets_what_will_not_come_to_it() {
    let mut h = Fake::new().proc(50, st(b'S', 1, 50, 50));
    h.state.borrow_mut().recorded.insert(50, 50);
    assert_eq!(verdict(&h, 50, 50, h.stat(50)), Verdict::Keep);
    h.enabled = false;
    assert_eq!(verdict(&h, 50, 50, h.stat(50)), Verdict::Forget);
    assert_eq!(verdict(&h, 51, 50, None), Verdict::Forget, "gone");
  }

  #[test]
  fn the_record_table_is_bounded() {
    let mut s = State::default();
    for pid in 0..MAX_RECORDED as i32 {
      assert!(s.insert(pid, 1));
    }
    assert!(!s.insert(-1, 1));
    assert!(s.insert(5, 2), "an update of a recorded pid still fits");
  }
}
