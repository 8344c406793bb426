//! A run's process tree and the one order in which it is signalled.
//!
//! A tree is the run's process group (led by its first child, whose pid is
//! the group id) plus every process carrying the run's mark (see
//! [`crate::process::marks`]): what left the group (`setsid`, double fork, `nohup`) is
//! still found. Every path that signals a tree (a timeout, a cancel, a limit,
//! `kill()`, `terminate`, a session's close) goes through
//! [`ProcessTree::signal`], which keeps one order:
//!
//! 1. the leader itself, while its caller has not reaped it (it may have
//!    left its group; once reaped, its pid may be another process's). First,
//!    so that a shell leader dies of the signal and reports it, rather than
//!    seeing its foreground child die of it and exiting with 128+N;
//! 2. the marked processes, each recorded for the orphan reaper before its
//!    signal (a process killed first and reparented to the host would be a
//!    zombie whose mark can no longer be read, so never proven ours);
//! 3. the group: while the leader is not reaped, always (its pid, and so the
//!    group id, is still ours); once it is reaped, only when the scan of
//!    step 2 found a marked process in the group. A group id stays reserved
//!    while any process is in the group, but once the group emptied, the id
//!    may be a new process's, and a new group's.
//!
//! A job adopted from a finished command is signalled as a *subtree*
//! ([`ProcessTree::subtree`]): the process, its marked descendants, then
//! its group if it leads one, since the jobs adopted from one command share
//! its mark.
//!
//! Left alone by that rule: a process that scrubbed its environment
//! (`env -i`) and stays in the group after the leader was reaped.
//!
//! Each SIGTERM is followed by a SIGCONT to the same target, as systemd and
//! tini send them: a stopped process (SIGSTOP, SIGTSTP) does not act on
//! SIGTERM until it runs again, so without it a stopped child would always
//! wait out the grace period and die by SIGKILL instead of by its handler.

use std::time::Duration;

use nix::sys::signal::Signal;

/// What one step of [`ProcessTree::signal`] signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
  /// A process carrying the run's mark.
  Marked(i32),
  /// The process group.
  Group(i32),
  /// The leader, by pid.
  Leader(i32),
}

/// A run's tree: its group and its mark.
#[derive(Debug, Clone, Copy)]
pub struct ProcessTree<'a> {
  /// The group id: the pid of the run's first child (0: none yet).
  pub pgid: i32,
  /// The run's mark (`None`: only the group is known).
  pub mark: Option<&'a str>,
  /// What the tree is made of besides a run's group and mark.
  shape: Shape<'a>,
}

/// The kinds of [`ProcessTree`].
#[derive(Debug, Clone, Copy)]
enum Shape<'a> {
  /// A run: its leader, its marked processes, `also` (processes that only
  /// its cgroups or parent links tie to it), then its group.
  Run { also: &'a [i32] },
  /// The subtree of a process (see [`ProcessTree::subtree`]).
  Subtree(i32),
  /// The group alone (see [`ProcessTree::group`]).
  Group,
  /// These processes alone (see [`ProcessTree::processes`]).
  Processes(&'a [i32]),
  /// Every process whose mark starts with `mark` (see [`ProcessTree::owned`]).
  Owned,
}

impl<'a> ProcessTree<'a> {
  pub fn new(pgid: i32, mark: &'a str) -> Self {
    ProcessTree {
      pgid,
      mark: (!mark.is_empty()).then_some(mark),
      shape: Shape::Run { also: &[] },
    }
  }

  /// The run's tree and `also`: processes that only its cgroups or parent
  /// links tie to it (they left the group and scrubbed the mark), signalled
  /// after the marked ones and before the group.
  pub fn with(self, also: &'a [i32]) -> Self {
    ProcessTree {
      shape: Shape::Run { also },
      ..self
    }
  }

  /// The process group `pgid` alone: what a terminal's ^C reaches (a
  /// session's interrupt), and a session worker's group.
  pub fn group(pgid: i32) -> Self {
    ProcessTree {
      pgid,
      mark: None,
      shape: Shape::Group,
    }
  }

  /// These processes alone (a cgroup's members, the rest of a session
  /// worker's group), each recorded for the orphan reaper first.
  pub fn processes(pids: &'a [i32]) -> Self {
    ProcessTree {
      pgid: 0,
      mark: None,
      shape: Shape::Processes(pids),
    }
  }

  /// Every process whose mark starts with `prefix` (a host environment's,
  /// or the host's, at its shutdown: see [`crate::process::marks::owner_prefix`]).
  pub fn owned(prefix: &'a str) -> Self {
    ProcessTree {
      pgid: 0,
      mark: Some(prefix),
      shape: Shape::Owned,
    }
  }

  /// The subtree of `pid`, a process carrying `mark` that is not the run's
  /// leader (a job adopted from a finished command, which shares the
  /// command's mark with the other jobs adopted from it): `pid` itself,
  /// its descendants that carry the mark, then, if `pid` leads a process
  /// group, that group. Each process is recorded for the orphan reaper
  /// before its signal, as a marked one is in a whole tree.
  pub fn subtree(pid: i32, mark: &'a str) -> Self {
    let leads = crate::process::marks::pgid_of(pid) == Some(pid);
    ProcessTree {
      pgid: if leads { pid } else { 0 },
      mark: (!mark.is_empty()).then_some(mark),
      shape: Shape::Subtree(pid),
    }
  }

  /// Send `sig` to the whole tree in the one order (see the module doc);
  /// `leader_live`: the caller has not reaped the leader. Returns whether
  /// anything was signalled.
  pub fn signal(&self, sig: Signal, leader_live: bool) -> bool {
    self.send(sig, leader_live, true)
  }

  fn send(&self, sig: Signal, leader_live: bool, group: bool) -> bool {
    self.send_found(sig, leader_live, group, None)
  }

  /// [`ProcessTree::send`] to the marked processes of `found` when given
  /// (a run's tree: a pass of `/proc` found them), instead of a scan now.
  fn send_found(&self, sig: Signal, leader_live: bool, group: bool, found: Option<&[i32]>) -> bool {
    let mut any = false;
    let wake = wakes_stopped(sig);
    let to_pid = |pid: i32| {
      let sent = crate::platform::signal(pid, sig as i32);
      if sent && wake {
        crate::platform::signal(pid, Signal::SIGCONT as i32);
      }
      sent
    };
    self.signal_with_found(leader_live, found, &mut |t| {
      any |= match t {
        Target::Marked(pid) => {
          crate::process::reaper::note(pid);
          to_pid(pid)
        }
        Target::Group(pgid) => group && signal_group(pgid, sig),
        Target::Leader(pid) => to_pid(pid),
      };
    });
    any
  }

  /// The steps of [`ProcessTree::signal`], in order, handed to `f` (the
  /// marked ones found by a scan of `/proc` made now).
  pub fn signal_with(&self, leader_live: bool, f: &mut dyn FnMut(Target)) {
    self.signal_with_found(leader_live, None, f)
  }

  /// [`ProcessTree::signal_with`]; a run's marked processes are `found`
  /// when given, else those a scan finds now.
  fn signal_with_found(&self, leader_live: bool, found: Option<&[i32]>, f: &mut dyn FnMut(Target)) {
    let pgid = self.pgid;
    let also = match self.shape {
      Shape::Run { also } => also,
      Shape::Subtree(root) => {
        for pid in subtree_of(root, self.mark.unwrap_or("")) {
          f(Target::Marked(pid));
        }
        if pgid > 1 {
          f(Target::Group(pgid));
        }
        return;
      }
      Shape::Group => {
        if pgid > 1 {
          f(Target::Group(pgid));
        }
        return;
      }
      Shape::Processes(pids) => {
        for &pid in pids.iter().filter(|&&p| p > 1) {
          f(Target::Marked(pid));
        }
        return;
      }
      Shape::Owned => {
        if let Some(n) = self
          .mark
          .and_then(|m| crate::process::marks::Needle::new(m, false))
        {
          crate::process::marks::scan(&n, &mut |pid| f(Target::Marked(pid)));
        }
        return;
      }
    };
    if pgid > 1 && leader_live {
      f(Target::Leader(pgid));
    }
    // with the leader reaped, the group is ours only while a marked process
    // is in it; without a mark there is nothing else to go by
    let mut group_ours = leader_live || self.mark.is_none();
    if let Some(n) = self
      .mark
      .and_then(|m| crate::process::marks::Needle::new(m, true))
    {
      let mut marked = |pid: i32| {
        if !group_ours && pgid > 1 && crate::process::marks::pgid_of(pid) == Some(pgid) {
          group_ours = true;
        }
        f(Target::Marked(pid));
      };
      if let Some(found) = found {
        found.iter().for_each(|&pid| marked(pid));
      } else if pgid > 1 {
        // a run's descendants were created after its first child
        crate::process::marks::scan_since(pgid, &n, &mut marked);
      } else {
        crate::process::marks::scan(&n, &mut marked);
      }
    }
    for &pid in also.iter().filter(|&&p| p > 1) {
      f(Target::Marked(pid));
    }
    if pgid > 1 && group_ours {
      f(Target::Group(pgid));
    }
  }

  /// The graceful sequence, written once for every tree its caller waits
  /// on (a run's timeout, cancel or limit kill, an adopted job's kill):
  /// SIGTERM the tree, SIGKILL it if `ended` (its end as the caller sees it:
  /// the child's wait, an adopted process's exit) has not completed within
  /// `grace`, then wait for `ended`. Returns what `ended` gave and whether
  /// the SIGKILL was sent.
  pub async fn stop<F: std::future::Future>(
    &self,
    grace: Duration,
    leader_live: bool,
    ended: F,
  ) -> (F::Output, bool) {
    self.signal(Signal::SIGTERM, leader_live);
    let mut ended = std::pin::pin!(ended);
    match tokio::time::timeout(grace, ended.as_mut()).await {
      Ok(v) => (v, false),
      Err(_) => {
        self.signal(Signal::SIGKILL, leader_live);
        (ended.await, true)
      }
    }
  }

  /// SIGKILL the tree now.
  pub fn kill(&self, leader_live: bool) -> bool {
    self.signal(Signal::SIGKILL, leader_live)
  }

  /// No live process of the tree is left: none in the group, none marked.
  pub fn is_gone(&self) -> bool {
    let group_gone = self.pgid <= 1 || !crate::process::registry::group_alive(self.pgid);
    group_gone
      && self
        .mark
        .is_none_or(|m| crate::process::marks::running_marked(m).is_empty())
  }

  /// What is left of a finished run whose leader was reaped: SIGTERM now
  /// (and to each marked process a later look finds: one started, or
  /// mid-`execve`, at the first), SIGKILL after `grace` if anything is
  /// left, and looks until nothing is (bounded); the group stays in the
  /// registry (for the host's exit paths) until it is gone. Only the first
  /// SIGTERM of the group (one `killpg`, right after the reap) happens before
  /// this returns; the scans of `/proc` run in the background, so they never
  /// delay the result of the run that calls this.
  pub fn terminate_later(&self, owner: u64, grace: Duration) {
    let (pgid, mark) = (self.pgid, self.mark.unwrap_or("").to_owned());
    // When the host reaps orphans, what the group SIGTERM kills must be seen
    // alive first (a zombie's mark cannot be read): the group's SIGTERM then
    // comes with the scan, in the background.
    let note_first = !mark.is_empty() && crate::process::reaper::enabled();
    let group_left = note_first || signal_group(pgid, Signal::SIGTERM);
    if !group_left && mark.is_empty() {
      crate::process::registry::unregister(pgid);
      return;
    }
    crate::process::registry::register(pgid, owner);
    let mut sweep = Sweep {
      pgid,
      mark,
      first: true,
      note_first,
      deadline: std::time::Instant::now() + grace,
      signalled: Vec::new(),
      killing: None,
    };
    let pause = Duration::from_millis(10).min(grace.max(Duration::from_millis(1)));
    match tokio::runtime::Handle::try_current() {
      Ok(h) => {
        h.spawn(async move {
          loop {
            // with a mark: one pass of /proc, shared with the sweeps that
            // ask at the same time (`sweeps`), finds what gets the first
            // SIGTERM and whether anything is left
            let gone = if sweep.mark.is_empty() {
              sweep.begin(None);
              !crate::process::registry::group_alive(pgid)
            } else {
              let look = crate::process::sweeps::look(&sweep.mark, pgid).await;
              sweep.begin(Some(&look.marked));
              look.gone()
            };
            if sweep.end(gone) {
              break;
            }
            tokio::time::sleep(pause).await;
          }
        });
      }
      Err(_) => {
        std::thread::spawn(move || loop {
          let found = (!sweep.mark.is_empty())
            .then(|| crate::process::marks::running_marked_since(&sweep.mark, pgid));
          sweep.begin(found.as_deref());
          let gone = sweep.gone();
          if sweep.end(gone) {
            break;
          }
          std::thread::sleep(pause);
        });
      }
    }
  }
}

/// The background loop of [`ProcessTree::terminate_later`]: the group's first
/// SIGTERM, then looks until nothing of the tree is left (SIGKILL at the
/// deadline, then looks until nothing is left or [`KILL_LOOKS`] passed), then
/// the group's unregistration.
struct Sweep {
  pgid: i32,
  mark: String,
  first: bool,
  /// The group's SIGTERM waits for the first look (the host reaps orphans).
  note_first: bool,
  deadline: std::time::Instant,
  /// The marked processes a look found and signalled (each gets its
  /// SIGTERM once, then, past the deadline, its SIGKILL once).
  signalled: Vec<i32>,
  /// Past the deadline: the tree had its SIGKILL, and the looks go on until
  /// then, each SIGKILLing what it finds.
  killing: Option<std::time::Instant>,
}

/// How long the looks go on after the deadline's SIGKILL while something of
/// the tree may be left: a process in the middle of an `execve` when the
/// SIGKILL's scan ran could not be told by its mark (its environment reads
/// empty), so it is looked for again until it can.
const KILL_LOOKS: Duration = Duration::from_secs(2);

impl Sweep {
  /// The first time, the SIGTERM the group did not have yet, and the marked
  /// processes: those of `found` (a shared pass found them), else those a
  /// scan finds now. Later, the processes of `found` that no look found
  /// before: one that was in the middle of an `execve` at the first look
  /// (its mark could not be read yet) has its SIGTERM now, not only the
  /// deadline's SIGKILL; past the deadline, each new one gets a SIGKILL.
  fn begin(&mut self, found: Option<&[i32]>) {
    if std::mem::take(&mut self.first) {
      ProcessTree::new(self.pgid, &self.mark).send_found(
        Signal::SIGTERM,
        false,
        self.note_first,
        found,
      );
      self.signalled.extend(found.unwrap_or_default());
      return;
    }
    let new: Vec<i32> = found
      .unwrap_or_default()
      .iter()
      .filter(|p| !self.signalled.contains(p))
      .copied()
      .collect();
    let sig = if self.killing.is_some() {
      Signal::SIGKILL
    } else {
      Signal::SIGTERM
    };
    ProcessTree::processes(&new).send(sig, false, false);
    self.signalled.extend(new);
  }

  /// Whether nothing is left, looked at here. With a mark: none running,
  /// nor one in the middle of an exec (whose mark cannot be read yet), also
  /// means none left in the group that we could prove ours.
  fn gone(&self) -> bool {
    if self.mark.is_empty() {
      !crate::process::registry::group_alive(self.pgid)
    } else {
      !crate::process::marks::marked_or_pending_since(&self.mark, self.pgid)
    }
  }

  /// After a look that found `gone`: true when the loop is over (gone, or
  /// the looks after the deadline's SIGKILL ran out).
  fn end(&mut self, gone: bool) -> bool {
    let now = std::time::Instant::now();
    let over = gone
      || match self.killing {
        None if now < self.deadline => false,
        None => {
          ProcessTree::new(self.pgid, &self.mark).signal(Signal::SIGKILL, false);
          self.killing = Some(now + KILL_LOOKS);
          // what a later look finds gets its SIGKILL once
          self.signalled.clear();
          false
        }
        Some(until) => now >= until,
      };
    if over {
      crate::process::registry::unregister(self.pgid);
    }
    over
  }
}

/// SIGKILL every live group of `owner` (or of everyone with `None`) and
/// whatever left them but still carries one of `owner`'s marks. Used when
/// the host environment shuts down: there is no time for a grace period.
/// Returns the number of groups.
pub fn kill_all(owner: Option<u64>) -> usize {
  let groups = crate::process::registry::take_groups(owner);
  for &p in &groups {
    ProcessTree::group(p).kill(false);
    crate::process::registry::forget_group(p);
  }
  let prefix = crate::process::marks::owner_prefix(owner);
  ProcessTree::owned(&prefix).kill(false);
  groups.len()
}

/// The host environment `owner` (or the whole process, `None`) goes away:
/// refuse its new spawns, let those in flight register, and SIGKILL all it
/// runs. For exit, env teardown and worker termination. (From a signal
/// handler, `registry::kill_all_signal_safe` instead: no lock, no
/// allocation.)
pub fn shutdown(owner: Option<u64>) -> usize {
  crate::process::registry::close_spawns(owner);
  kill_all(owner)
}

/// `pid` and, after it, its descendants among the processes marked with
/// `mark` (parents before their children).
fn subtree_of(pid: i32, mark: &str) -> Vec<i32> {
  let marked: Vec<(i32, i32)> = if mark.is_empty() {
    Vec::new()
  } else {
    crate::process::marks::running_marked(mark)
      .into_iter()
      .filter_map(|p| crate::process::marks::stat(p).map(|st| (p, st.ppid)))
      .collect()
  };
  let mut out = vec![pid];
  let mut i = 0;
  while i < out.len() {
    let parent = out[i];
    for (p, pp) in &marked {
      if *pp == parent && !out.contains(p) {
        out.push(*p);
      }
    }
    i += 1;
  }
  out
}

/// Whether `sig` is followed by a SIGCONT (see the module doc).
pub fn wakes_stopped(sig: Signal) -> bool {
  sig == Signal::SIGTERM
}

/// `killpg(pgid, sig)`, then SIGCONT when `sig` asks for it.
fn signal_group(pgid: i32, sig: Signal) -> bool {
  let sent = crate::process::registry::signal_group(pgid, sig);
  if sent && wakes_stopped(sig) {
    crate::process::registry::signal_group(pgid, Signal::SIGCONT);
  }
  sent
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::process::{Command, Stdio};

  /// Poll `done` every 5 ms until it holds or 5 s passed.
  fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !done() && std::time::Instant::now() < deadline {
      std::thread::sleep(std::time::Duration::from_millis(5));
    }
  }

  fn wait_marked(mark: &str) {
    // a process mid-exec shows an empty environment: wait for its exec
    wait_until(|| !crate::process::marks::marked(mark).is_empty());
  }

  #[test]
  fn the_order_is_leader_then_marked_then_group() {
    use std::os::unix::process::CommandExt;
    let mark = crate::process::marks::new_mark(77);
    // the run's leader (its own group), then a marked process outside any
    // group of ours (as a setsid escapee is)
    let mut leader = Command::new("sleep")
      .arg("30")
      .process_group(0)
      .spawn()
      .unwrap();
    let pgid = leader.id() as i32;
    let mut escapee = Command::new("sleep")
      .arg("30")
      .env(crate::process::marks::MARK_VAR, &mark)
      .stdout(Stdio::null())
      .spawn()
      .unwrap();
    let pid = escapee.id() as i32;
    wait_marked(&mark);
    let tree = ProcessTree::new(pgid, &mark);
    let mut steps = Vec::new();
    tree.signal_with(true, &mut |t| steps.push(t));
    assert_eq!(
      steps,
      vec![
        Target::Leader(pgid),
        Target::Marked(pid),
        Target::Group(pgid)
      ]
    );
    // the leader reaped: neither it nor a group that holds no marked process
    // (its id may be another group's by now)
    let mut steps = Vec::new();
    tree.signal_with(false, &mut |t| steps.push(t));
    assert_eq!(steps, vec![Target::Marked(pid)]);
    assert!(!tree.is_gone());
    assert!(tree.kill(true));
    escapee.wait().unwrap();
    leader.wait().unwrap();
    assert!(tree.is_gone());
  }

  #[tokio::test]
  async fn stop_is_sigterm_then_sigkill_after_the_grace_unless_the_tree_ended() {
    use std::os::unix::process::CommandExt;
    use std::os::unix::process::ExitStatusExt;
    let mark = crate::process::marks::new_mark(81);
    // one that ends at SIGTERM, one that ignores it (the trap is set before
    // it says it is ready)
    let spawn = |script: &str| {
      let mut c = tokio::process::Command::from({
        let mut c = Command::new("bash");
        c.args(["-c", script])
          .env(crate::process::marks::MARK_VAR, &mark)
          .stdout(Stdio::piped())
          .process_group(0);
        c
      })
      .spawn()
      .unwrap();
      let out = c.stdout.take().unwrap();
      (c, out)
    };
    let ready = |out: tokio::process::ChildStdout| async move {
      use tokio::io::AsyncBufReadExt;
      let mut line = String::new();
      tokio::io::BufReader::new(out)
        .read_line(&mut line)
        .await
        .unwrap();
      assert_eq!(line, "ready\n");
    };
    let grace = std::time::Duration::from_millis(300);
    let (mut polite, out) = spawn("echo ready; exec sleep 30");
    ready(out).await;
    let pgid = polite.id().unwrap() as i32;
    let (st, forced) = ProcessTree::new(pgid, &mark)
      .stop(grace, true, polite.wait())
      .await;
    assert!(!forced, "it ended at SIGTERM, within the grace");
    assert_eq!(st.unwrap().signal(), Some(libc::SIGTERM));

    let (mut stubborn, out) = spawn("trap '' TERM; echo ready; while :; do sleep 0.05; done");
    ready(out).await;
    let pgid = stubborn.id().unwrap() as i32;
    let started = std::time::Instant::now();
    let (st, forced) = ProcessTree::new(pgid, &mark)
      .stop(grace, true, stubborn.wait())
      .await;
    assert!(forced, "it ignored SIGTERM: SIGKILL after the grace");
    assert_eq!(st.unwrap().signal(), Some(libc::SIGKILL));
    assert!(started.elapsed() >= grace);
    wait_until(|| ProcessTree::new(pgid, &mark).is_gone());
  }

  #[test]
  fn a_reaped_leaders_group_is_signalled_while_a_marked_process_is_in_it() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mark = crate::process::marks::new_mark(78);
    // a leader that leaves a marked member behind in its group, then is reaped
    let mut leader = Command::new("sh")
      .args(["-c", "sleep 30 & echo $!"])
      .env(crate::process::marks::MARK_VAR, &mark)
      .process_group(0)
      .stdout(Stdio::piped())
      .spawn()
      .unwrap();
    let pgid = leader.id() as i32;
    let mut line = String::new();
    std::io::BufReader::new(leader.stdout.take().unwrap())
      .read_line(&mut line)
      .unwrap();
    let member: i32 = line.trim().parse().unwrap();
    leader.wait().unwrap();
    wait_marked(&mark);
    let tree = ProcessTree::new(pgid, &mark);
    let mut steps = Vec::new();
    tree.signal_with(false, &mut |t| steps.push(t));
    assert_eq!(steps, vec![Target::Marked(member), Target::Group(pgid)]);
    assert!(tree.kill(false));
    wait_until(|| tree.is_gone());
    assert!(tree.is_gone());
  }

  #[test]
  fn a_subtree_is_its_root_its_marked_descendants_and_its_own_group_only() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mark = crate::process::marks::new_mark(80);
    // two jobs adopted from one command (one mark): a group leader with a
    // child, and a sibling outside its group
    let mut job = Command::new("sh")
      .args(["-c", "sleep 30 & echo $!; wait"])
      .env(crate::process::marks::MARK_VAR, &mark)
      .process_group(0)
      .stdout(Stdio::piped())
      .spawn()
      .unwrap();
    let root = job.id() as i32;
    let mut line = String::new();
    std::io::BufReader::new(job.stdout.take().unwrap())
      .read_line(&mut line)
      .unwrap();
    let child: i32 = line.trim().parse().unwrap();
    let mut sibling = Command::new("sleep")
      .arg("30")
      .env(crate::process::marks::MARK_VAR, &mark)
      .spawn()
      .unwrap();
    wait_until(|| crate::process::marks::marked(&mark).len() >= 3);
    let mut steps = Vec::new();
    ProcessTree::subtree(root, &mark).signal_with(true, &mut |t| steps.push(t));
    assert_eq!(
      steps,
      vec![
        Target::Marked(root),
        Target::Marked(child),
        Target::Group(root)
      ]
    );
    // one that leads no group: no group step
    let mut steps = Vec::new();
    let lone = sibling.id() as i32;
    ProcessTree::subtree(lone, &mark).signal_with(true, &mut |t| steps.push(t));
    assert_eq!(steps, vec![Target::Marked(lone)]);
    // killing the first job's subtree leaves the sibling running
    assert!(ProcessTree::subtree(root, &mark).kill(true));
    job.wait().unwrap();
    wait_until(|| crate::process::marks::marked(&mark).len() <= 1);
    assert_eq!(crate::process::marks::marked(&mark), vec![lone]);
    assert!(sibling.try_wait().unwrap().is_none());
    sibling.kill().unwrap();
    sibling.wait().unwrap();
  }

  #[test]
  fn a_stopped_tree_acts_on_sigterm() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mark = crate::process::marks::new_mark(79);
    // a shell whose SIGTERM handler exits 7, stopped as Ctrl-Z stops a job
    let mut leader = Command::new("bash")
      .args([
        "-c",
        "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done",
      ])
      .env(crate::process::marks::MARK_VAR, &mark)
      .process_group(0)
      .stdout(Stdio::piped())
      .spawn()
      .unwrap();
    let pgid = leader.id() as i32;
    let mut line = String::new();
    std::io::BufRead::read_line(
      &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
      &mut line,
    )
    .unwrap();
    assert!(crate::platform::signal(-pgid, libc::SIGSTOP));
    let stopped = || {
      std::fs::read_to_string(format!("/proc/{pgid}/stat"))
        .ok()
        .and_then(|s| {
          s.rsplit(')')
            .next()
            .map(|r| r.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
    };
    wait_until(stopped);
    assert!(stopped(), "the leader never stopped");
    let tree = ProcessTree::new(pgid, &mark);
    assert!(tree.signal(Signal::SIGTERM, true));
    // no SIGKILL here: without the SIGCONT the stopped shell never runs its
    // handler and this waits forever (bounded below)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let status = loop {
      if let Some(st) = leader.try_wait().unwrap() {
        break Some(st);
      }
      if std::time::Instant::now() > deadline {
        break None;
      }
      std::thread::sleep(std::time::Duration::from_millis(10));
    };
    if status.is_none() {
      tree.kill(true);
      leader.wait().unwrap();
    }
    let status = status.expect("a stopped child ignored SIGTERM");
    assert_eq!((status.code(), status.signal()), (Some(7), None));
  }

  #[test]
  fn without_a_mark_only_the_group() {
    let tree = ProcessTree::new(4_000_001, "");
    let mut steps = Vec::new();
    tree.signal_with(true, &mut |t| steps.push(t));
    assert_eq!(
      steps,
      vec![Target::Leader(4_000_001), Target::Group(4_000_001)]
    );
    assert!(ProcessTree::new(0, "").is_gone());
  }
}
