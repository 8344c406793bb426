//! The session's queue: one execution at a time, in call order, and which
//! execution `interrupt()` reaches.
//!
//! The queue is joined synchronously (in call order: `execute` called twice in
//! a row runs in that order, whatever order the runtime polls the futures in)
//! and handed on from one [`Turn`] to the next. A turn dropped while it waits
//! (its caller gave up) passes the queue on as well.
//!
//! Every execution has a number (its generation). `interrupt()` targets the
//! oldest execution whose caller has not taken its result yet (its
//! [`Ticket`] is alive): the one the caller sees running. A SIGINT goes only
//! to the worker running that very execution; one asked for before it started
//! is held until it starts; one that comes when it is over does nothing. So an
//! interrupt never lands in the next execution.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::worker::Interrupt;

/// The queue and who may interrupt what. Shared between the execution that
/// owns the worker and `interrupt()` callers, which must not wait for the
/// execution.
#[derive(Default, Clone)]
pub(crate) struct Queue {
  state: Arc<Mutex<QueueState>>,
}

#[derive(Default)]
struct QueueState {
  /// A turn holds the queue.
  busy: bool,
  waiters: VecDeque<oneshot::Sender<()>>,
  next_gen: u64,
  /// Executions whose caller has not taken the result, in call order, and
  /// whether each is over.
  live: VecDeque<(u64, bool)>,
  /// How an interrupt reaches the worker that has the request.
  target: Option<Interrupt>,
  /// The execution whose request the worker has (0: none, or an init request).
  running: u64,
  /// The worker confirmed it started that request.
  started: bool,
  /// An interrupt held for this execution until its request starts (0: none).
  pending: u64,
  /// The running request got a SIGINT from `interrupt()`.
  interrupted: bool,
  /// Cancelled when an interrupt reaches the running execution (its
  /// follower may escalate; see `Engine::follow`).
  wake: Option<CancellationToken>,
}

impl QueueState {
  fn mark_over(&mut self, gen: u64) {
    if let Some(e) = self.live.iter_mut().find(|e| e.0 == gen) {
      e.1 = true;
    }
    if self.pending == gen {
      self.pending = 0;
    }
  }
}

/// A place in the queue; [`Turn::ready`] waits for it. Dropping a turn (held or
/// not) hands the queue on, and ends its execution for `interrupt()`.
pub(crate) struct Turn {
  state: Arc<Mutex<QueueState>>,
  rx: Option<oneshot::Receiver<()>>,
  held: bool,
  /// The execution's generation (0 for `reset`, which is not interrupted).
  gen: u64,
}

impl Turn {
  /// Wait until every earlier turn is done (or `cancel` fires: false).
  pub async fn ready(&mut self, cancel: &CancellationToken) -> bool {
    if let Some(rx) = self.rx.as_mut() {
      tokio::select! {
        r = rx => {
          self.rx = None;
          self.held = r.is_ok();
        }
        _ = cancel.cancelled() => return false,
      }
    }
    self.held
  }

  /// The execution's generation.
  pub fn gen(&self) -> u64 {
    self.gen
  }
}

impl Drop for Turn {
  fn drop(&mut self) {
    if self.gen != 0 {
      let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
      s.mark_over(self.gen);
    }
    let held = self.held
      || self.rx.as_mut().is_some_and(|rx| {
        // the queue may have been handed to us in the meantime
        rx.close();
        rx.try_recv().is_ok()
      });
    if held {
      hand_on(&self.state);
    }
  }
}

/// An execution as its caller sees it: `interrupt()` may target it until the
/// ticket is dropped, which the caller does once it has the result (the
/// JavaScript binding: when the promise settles, on the JavaScript thread).
pub struct Ticket {
  state: Arc<Mutex<QueueState>>,
  gen: u64,
}

impl Drop for Ticket {
  fn drop(&mut self) {
    let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
    s.live.retain(|e| e.0 != self.gen);
    if s.pending == self.gen {
      s.pending = 0;
    }
  }
}

fn hand_on(state: &Mutex<QueueState>) {
  let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
  while let Some(tx) = s.waiters.pop_front() {
    if tx.send(()).is_ok() {
      return;
    }
  }
  s.busy = false;
}

impl Queue {
  fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Join the queue now (`reset`: not a target of `interrupt()`).
  pub fn join(&self) -> Turn {
    let mut s = self.lock();
    self.join_locked(&mut s, 0)
  }

  /// Join the queue now with an execution, which `interrupt()` targets until
  /// the ticket is dropped.
  pub fn join_execution(&self) -> (Turn, Ticket) {
    let mut s = self.lock();
    s.next_gen += 1;
    let gen = s.next_gen;
    s.live.push_back((gen, false));
    let ticket = Ticket {
      state: self.state.clone(),
      gen,
    };
    (self.join_locked(&mut s, gen), ticket)
  }

  fn join_locked(&self, s: &mut QueueState, gen: u64) -> Turn {
    if !s.busy {
      s.busy = true;
      return Turn {
        state: self.state.clone(),
        rx: None,
        held: true,
        gen,
      };
    }
    let (tx, rx) = oneshot::channel();
    s.waiters.push_back(tx);
    Turn {
      state: self.state.clone(),
      rx: Some(rx),
      held: false,
      gen,
    }
  }

  /// A request of execution `gen` (0: an init request) was sent to the
  /// worker that `target` interrupts.
  pub fn begin(&self, target: Interrupt, gen: u64) {
    let mut s = self.lock();
    s.target = Some(target);
    s.running = gen;
    s.started = false;
    s.interrupted = false;
    s.wake = None;
  }

  /// `wake` is cancelled when an interrupt reaches the running execution.
  pub fn wake_on_interrupt(&self, wake: CancellationToken) {
    self.lock().wake = Some(wake);
  }

  /// The worker confirmed it runs the request: deliver an interrupt held for it.
  pub fn started(&self) {
    let mut s = self.lock();
    s.started = true;
    if s.running != 0 && s.pending == s.running {
      s.pending = 0;
      s.interrupted = true;
      if let Some(t) = &s.target {
        t.send();
      }
      if let Some(w) = &s.wake {
        w.cancel();
      }
    }
  }

  /// SIGINT the execution the caller sees running (the oldest whose result
  /// it has not taken); one that has not started gets it when it starts.
  /// False when there is none, or it is over.
  pub fn interrupt(&self) -> bool {
    let mut s = self.lock();
    let Some(&(gen, over)) = s.live.front() else {
      return false;
    };
    if over {
      return false;
    }
    if s.running == gen && s.started {
      s.interrupted = true;
      if let Some(t) = &s.target {
        t.send();
      }
      if let Some(w) = &s.wake {
        w.cancel();
      }
    } else {
      s.pending = gen;
    }
    true
  }

  /// The request is over: whether `interrupt()` hit it, whether the worker
  /// had started it. An interrupt held for a request that never started stays
  /// held (the execution may send it again to a new worker).
  pub fn end(&self) -> (bool, bool) {
    let mut s = self.lock();
    let was = (s.interrupted, s.started);
    s.wake = None;
    s.running = 0;
    s.started = false;
    s.interrupted = false;
    was
  }
}
