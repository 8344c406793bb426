//! One pass of `/proc` for every sweep that asks at the same time.
//!
//! After a run's child is reaped, its sweep asks which processes created
//! since the child's pid still carry the run's mark (they get the SIGTERM),
//! and whether one is in the middle of an `execve` (its mark cannot be read
//! yet: [`marks::marked_or_pending_since`]): a walk of the pids allocated
//! since then, one probe and one read of the environment of each that
//! exists. When 200 runs end at once, 200 sweeps walk nearly the same range,
//! twice each (the SIGTERM's scan, then the look): 200 x 2 x 100 probes and
//! reads for what one walk can answer (issue 28).
//!
//! Here a sweep leaves its question on a board and waits for the answer. The
//! first to find no pass under way makes passes until the board is empty;
//! each pass takes every question on the board, walks the longest range once
//! and reads each environment once for all of them. A question is answered
//! only by a pass that began after it was asked, so a pass never answers
//! from what it saw before the question (a process the child started just
//! before its reap is seen).
//!
//! A question whose range cannot be walked (too long, no `/proc`) is
//! answered by the lone scans ([`marks::running_marked_since`],
//! [`marks::marked_or_pending_since`]), which fall back to the full scan.

use std::sync::{Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::platform;
use crate::process::marks::{self, Needle};

/// How long the sweep that will make the passes waits for others to ask.
const GATHER: std::time::Duration = std::time::Duration::from_millis(4);

/// What a pass saw of one run's processes (those created after its first
/// pid).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Look {
  /// Running (not zombies, not threads), carrying the run's mark.
  pub marked: Vec<i32>,
  /// One is alive with an empty environment: in the middle of an `execve`,
  /// its mark cannot be read yet.
  pub pending: bool,
}

impl Look {
  /// Nothing of the run is left, as far as the marks tell.
  pub fn gone(&self) -> bool {
    self.marked.is_empty() && !self.pending
  }
}

/// A sweep's question, waiting for the next pass.
struct Ask {
  mark: String,
  needle: Needle,
  first_pid: i32,
  answer: oneshot::Sender<Look>,
}

struct Board {
  asks: Vec<Ask>,
  /// A task is making passes: it will take what is asked now.
  passing: bool,
}

static BOARD: Mutex<Board> = Mutex::new(Board {
  asks: Vec::new(),
  passing: false,
});

fn board() -> std::sync::MutexGuard<'static, Board> {
  BOARD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What is left of the run marked `mark` whose first pid was `first_pid`,
/// answered by a pass shared with every sweep that asks meanwhile. The
/// caller that finds no pass under way makes them (inline: no task is
/// spawned) until nothing is left to answer.
pub async fn look(mark: &str, first_pid: i32) -> Look {
  let Some(needle) = Needle::new(mark, true) else {
    return Look::default();
  };
  let (tx, rx) = oneshot::channel();
  let make_passes = {
    let mut b = board();
    b.asks.push(Ask {
      mark: mark.to_owned(),
      needle,
      first_pid,
      answer: tx,
    });
    !std::mem::replace(&mut b.passing, true)
  };
  if make_passes {
    let duty = Passes;
    // the sweeps of runs that end together ask within a few hundred
    // microseconds of each other, and one pass takes little longer: wait
    // for them, so that one walk answers them all (the sweep is off every
    // result's path)
    tokio::time::sleep(GATHER).await;
    drop(duty);
  }
  // a dropped question (a panic in a pass): something may be left, so the
  // sweep looks again
  rx.await.unwrap_or(Look {
    marked: Vec::new(),
    pending: true,
  })
}

/// The duty of making passes until the board is empty, which one asker has
/// at a time. It is done when dropped, so that it is done even when the
/// asker's task is dropped while it waits for the others (its runtime shut
/// down): the board is never left waiting for a pass nobody makes.
struct Passes;

impl Drop for Passes {
  fn drop(&mut self) {
    loop {
      let asks = {
        let mut b = board();
        if b.asks.is_empty() {
          b.passing = false;
          return;
        }
        std::mem::take(&mut b.asks)
      };
      pass(asks);
    }
  }
}

/// Answer every question of `asks` with one walk of the pids allocated since
/// the earliest of them.
fn pass(asks: Vec<Ask>) {
  let mut walked = Vec::with_capacity(asks.len());
  let last_and_max = platform::last_pid_and_max();
  for a in asks {
    match last_and_max.and_then(|(last, max)| marks::range_len(a.first_pid, last, max)) {
      Some(len) => walked.push((len, a)),
      None => {
        let marked = marks::running_marked_since(&a.mark, a.first_pid);
        let pending = marks::marked_or_pending_since(&a.mark, a.first_pid);
        let _ = a.answer.send(Look { marked, pending });
      }
    }
  }
  let Some((_, max)) = last_and_max else {
    return;
  };
  // the longest range first: every range ends at the last pid, so a
  // question's range is the walk's steps after `longest - len`, and the
  // questions a pid is in are a prefix of this order
  walked.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
  let Some(&(longest, ref first)) = walked.first() else {
    return;
  };
  let origin = first.first_pid;
  let starts: Vec<i64> = walked.iter().map(|(len, _)| longest - len).collect();
  let mut looks: Vec<Look> = walked.iter().map(|_| Look::default()).collect();
  let mut env = Vec::new();
  marks::walk_since(origin, longest, max, &mut |step, pid| {
    let asking = starts.partition_point(|&start| start < step);
    if asking == 0 || !platform::environ_read(pid, &mut env) {
      return;
    }
    if env.len() == 2 {
      // empty: mid-`execve` if alive and not a kernel thread
      if marks::stat(pid).is_some_and(|st| marks::alive(&st) && !st.kthread) {
        looks[..asking].iter_mut().for_each(|l| l.pending = true);
      }
      return;
    }
    let mut live = None;
    for (look, (_, a)) in looks[..asking].iter_mut().zip(&walked) {
      let n = a.needle.bytes();
      if env.windows(n.len()).any(|w| w == n)
        && *live.get_or_insert_with(|| !marks::is_dead(pid) && !platform::is_thread(pid))
      {
        look.marked.push(pid);
      }
    }
  });
  for ((_, a), look) in walked.into_iter().zip(looks) {
    let _ = a.answer.send(look);
  }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
  use super::*;

  /// The pid of a process that has already exited: a range's start.
  fn a_pid_now() -> i32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    pid
  }

  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  async fn one_pass_answers_each_question_for_its_own_mark_and_range() {
    let before = a_pid_now();
    let mut marked = std::process::Command::new("sleep")
      .arg("5")
      .env(marks::MARK_VAR, "sweeps-test.1")
      .spawn()
      .unwrap();
    // let the child finish its exec (an empty environment reads as pending)
    let pid = marked.id() as i32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !platform::cmdline(pid).starts_with(b"sleep\0") && std::time::Instant::now() < deadline {
      std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let after = a_pid_now();
    // asked together
    let (mine, other, later, unknown) = tokio::join!(
      look("sweeps-test.1", before),
      look("sweeps-test.2", before),
      look("sweeps-test.1", after),
      look("sweeps-test.3", after),
    );
    assert_eq!(
      mine.marked,
      vec![pid],
      "the live marked process, created after `before`"
    );
    assert!(other.gone(), "no process carries that mark: {other:?}");
    assert!(
      later.marked.is_empty(),
      "the marked process was created before `after`"
    );
    assert!(unknown.gone(), "{unknown:?}");
    // the answers the lone scans give
    assert_eq!(
      marks::running_marked_since("sweeps-test.1", before),
      vec![pid]
    );
    assert!(marks::running_marked_since("sweeps-test.1", after).is_empty());
    marked.kill().unwrap();
    marked.wait().unwrap();
    assert!(
      look("sweeps-test.1", before).await.marked.is_empty(),
      "gone once reaped"
    );
  }

  #[test]
  fn a_sweep_dropped_while_it_gathers_still_makes_the_pass_for_the_others() {
    // the asker with the duty is in a runtime shut down while it waits (one
    // thread: the spawned asker runs up to its wait at the yield)
    let rt = tokio::runtime::Builder::new_current_thread()
      .enable_all()
      .build()
      .unwrap();
    rt.block_on(async {
      let first = tokio::spawn(look("sweeps-test.dropped", a_pid_now()));
      tokio::task::yield_now().await;
      first.abort();
    });
    drop(rt);
    // a later sweep, on another runtime, is still answered
    let rt = tokio::runtime::Runtime::new().unwrap();
    let answer = rt.block_on(async {
      tokio::time::timeout(
        std::time::Duration::from_secs(5),
        look("sweeps-test.after", a_pid_now()),
      )
      .await
    });
    assert!(answer.is_ok_and(|l| l.gone()), "answered");
  }
}
