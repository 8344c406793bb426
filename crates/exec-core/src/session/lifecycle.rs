//! [`Session`]: one type for every kind of session (a driver's interpreter,
//! bash). What is the same for all of them is written here once: the start
//! (the engine, then the first worker booted before `start` returns), the
//! pid, the place in the queue an execution takes when it is called, the
//! interrupt, the reset, the close. A kind ([`Kind`]: `driver::Driver`,
//! `shell::Shell`) brings its options, its state in the worker slot, its
//! `boot` ([`Boot`]) and its own `execute`.

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::engine::{Boot, Engine};
use super::queue::{Ticket, Turn};
use super::worker::WorkerSpec;
use crate::error::ExecError;

/// What a kind of session brings to [`Session`].
pub trait Kind: Send + Sync + 'static {
  /// The kind's state in the worker slot (bash: its cwd), which a fresh
  /// worker starts from.
  type State: Send + 'static;
  /// The state of a fresh worker (at the start and at a reset).
  fn fresh(&self) -> Self::State;
}

/// A session of kind `K`: its worker engine and the kind's own part, which
/// the session derefs to (its options, a driver's history).
pub struct Session<K: Kind> {
  pub(super) kind: K,
  pub(super) engine: Engine<K::State>,
}

impl<K: Kind> Deref for Session<K> {
  type Target = K;
  fn deref(&self) -> &K {
    &self.kind
  }
}

// `Boot` is the crate's own (it works on the worker slot): these methods
// exist for the kinds this crate boots, which is every kind there is
#[allow(private_bounds)]
impl<K: Kind> Session<K>
where
  Session<K>: Boot<K::State>,
{
  /// Make the engine for `spec` (the program looked up, the options
  /// checked) and boot the first worker: the session is returned ready.
  pub(super) async fn boot_new(
    kind: K,
    spec: WorkerSpec,
    owner: u64,
    startup_timeout: Duration,
  ) -> Result<Self, ExecError> {
    let state = kind.fresh();
    let engine = Engine::new(spec, owner, startup_timeout, state)?;
    let session = Session { kind, engine };
    {
      let mut slot = session.engine.slot.lock().await;
      session.boot(&mut slot).await?;
    }
    Ok(session)
  }

  /// The worker's pid (0 when none runs: before a restart, after close).
  pub fn pid(&self) -> i32 {
    self.engine.pid()
  }

  /// Take the execution's place in the queue now, in call order, and give
  /// `run` its turn: the [`Ticket`] lets `interrupt()` reach the execution
  /// until the caller drops it.
  pub(super) fn in_turn<F: Future>(
    self: &Arc<Self>,
    run: impl FnOnce(Arc<Self>, Turn) -> F,
  ) -> (Ticket, F) {
    let (turn, ticket) = self.engine.queue.join_execution();
    (ticket, run(self.clone(), turn))
  }

  /// Interrupt the running execution: SIGINT to the worker's group, as
  /// Ctrl+C (a Python cell gets `KeyboardInterrupt`; in a JavaScript cell
  /// synchronous code stops, a pending `await` is abandoned, anything else
  /// is killed after the grace; bash abandons the running line and keeps
  /// its state). False when none runs.
  pub fn interrupt(&self) -> bool {
    self.engine.queue.interrupt()
  }

  /// A fresh worker, from the kind's fresh state (its init code runs
  /// again). Waits for the executions queued before it.
  pub fn reset(self: &Arc<Self>) -> impl Future<Output = Result<(), ExecError>> + Send + 'static {
    let turn = self.engine.queue.join();
    let this = self.clone();
    async move {
      let fresh = this.kind.fresh();
      this.engine.reset(turn, &*this, |s| *s = fresh).await
    }
  }

  /// End the worker and everything it started. A running execution ends
  /// with `died`; queued and later calls fail with ECANCELED.
  pub async fn close(&self) {
    self.engine.close().await
  }

  pub fn is_closed(&self) -> bool {
    self.engine.closing.is_cancelled()
  }
}
