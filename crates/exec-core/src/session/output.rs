//! The worker's output. Its pipes are pumped for the worker's whole
//! life by the worker's [`Execution`](crate::process::supervise::Execution)
//! (the run pump every child has), each into a [`Relay`]; the request that
//! runs takes what the relays hold into its own sinks ([`Output`]).
//!
//! A pump keeps one sink for the run's whole life, and a worker outlives
//! many requests: the relay is the sink that switches, whatever request
//! follows the worker now gets the bytes. The switch is at a control
//! message: before one is handed out, both pumps' catch-up barriers
//! ([`Catchup`]) are asked and answered (while what the relays get is
//! delivered, so a pump waiting for room goes on), so the output the worker
//! wrote before the message is in the relays and goes to the request it
//! belongs to, not the next one. On Windows the worker's pumps read by
//! polling what the pipe holds (a pipe there has no readiness nor
//! non-blocking read), and answer the barrier the same way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::process::supervise::{Catchup, OutputSink};

/// Bytes a relay holds before its pump waits for the request to take them
/// (then the pipe fills, and the worker waits, as with no relay).
const RELAY_MAX: usize = 256 * 1024;

/// What a relay holds, shared by its pump and the request side.
#[derive(Default)]
struct Shared {
  buf: Mutex<Vec<u8>>,
  /// The pump ended (EOF, or stopped after the exit's drain): no more bytes.
  closed: AtomicBool,
  /// Bytes came, or the pump ended.
  data: Notify,
  /// The request took bytes.
  room: Notify,
}

impl Shared {
  fn buf(&self) -> MutexGuard<'_, Vec<u8>> {
    self.buf.lock().unwrap_or_else(|p| p.into_inner())
  }

  /// Resolves once `ready` holds (checked after each wake-up of `notify`).
  async fn until(&self, notify: &Notify, ready: impl Fn() -> bool) {
    loop {
      let n = notify.notified();
      tokio::pin!(n);
      n.as_mut().enable();
      if ready() {
        return;
      }
      n.await;
    }
  }
}

/// The sink a worker's pump writes to: the bytes wait here for the request
/// that runs (see the module doc).
pub(crate) struct Relay(Arc<Shared>);

/// A relay and the request side's end of it.
pub(crate) fn relay() -> (Relay, RelayRx) {
  let shared = Arc::new(Shared::default());
  (Relay(shared.clone()), RelayRx(shared))
}

impl OutputSink for Relay {
  fn write(&mut self, data: &[u8]) {
    self.0.buf().extend_from_slice(data);
    self.0.data.notify_waiters();
  }
  async fn ready(&mut self) {
    let s = &self.0;
    s.until(&s.room, || s.buf().len() < RELAY_MAX).await
  }
  async fn finish(&mut self) {
    self.0.closed.store(true, Ordering::SeqCst);
    self.0.data.notify_waiters();
  }
}

/// The request side of a [`Relay`].
pub(crate) struct RelayRx(Arc<Shared>);

/// One stream of the worker, as the request side reads it.
struct Stream {
  relay: RelayRx,
  catchup: Option<Arc<Catchup>>,
  /// The buffer swapped with the relay's at each take.
  spare: Vec<u8>,
}

impl Stream {
  /// Hand what the relay holds to `sink`.
  fn deliver<S: OutputSink>(&mut self, sink: &mut S) {
    self.spare.clear();
    {
      let mut b = self.relay.0.buf();
      if b.is_empty() {
        return;
      }
      std::mem::swap(&mut *b, &mut self.spare);
    }
    self.relay.0.room.notify_waiters();
    sink.write(&self.spare);
    if self.spare.capacity() > 2 * RELAY_MAX {
      // a burst (the final drain's) is not kept for the worker's life
      self.spare = Vec::new();
    }
  }

  /// Resolves when the relay holds bytes; never once the pump ended with
  /// none left.
  async fn filled(&self) {
    let s = &self.relay.0;
    s.until(&s.data, || {
      !s.buf().is_empty() || s.closed.load(Ordering::SeqCst)
    })
    .await;
    if s.buf().is_empty() {
      std::future::pending::<()>().await;
    }
  }

  /// Resolves when the pump has ended (all it read is in the relay).
  async fn ended(&self) {
    let s = &self.relay.0;
    s.until(&s.data, || s.closed.load(Ordering::SeqCst)).await
  }

  /// Ask the pump to read what its pipe holds now (`None`: nothing pumps
  /// this stream).
  fn ask(&self) -> Option<u64> {
    self.catchup.as_ref().map(|c| c.ask())
  }

  /// Wait for the pump's answer to round `g` (or its end), handing what the
  /// relay gets meanwhile to `sink`, then the rest.
  async fn caught_up<S: OutputSink>(&mut self, sink: &mut S, g: Option<u64>) {
    if let (Some(c), Some(g)) = (self.catchup.clone(), g) {
      let answered = c.answered_from(g);
      tokio::pin!(answered);
      loop {
        self.deliver(sink);
        tokio::select! {
          biased;
          _ = &mut answered => break,
          _ = self.ended() => break,
          _ = self.filled() => {}
        }
      }
    }
    self.deliver(sink);
  }
}

/// The worker's stdout and stderr, as the requests read them.
pub(crate) struct Output {
  out: Stream,
  err: Stream,
}

impl Output {
  /// The relays of the worker's two pumps and their catch-up barriers.
  pub fn new([out, err]: [RelayRx; 2], [cout, cerr]: [Option<Arc<Catchup>>; 2]) -> Output {
    let stream = |relay, catchup| Stream {
      relay,
      catchup,
      spare: Vec::new(),
    };
    Output {
      out: stream(out, cout),
      err: stream(err, cerr),
    }
  }

  /// Wait for output of either stream and hand it to its sink, then wait
  /// for the sink to take more (backpressure). Cancel-safe; never resolves
  /// once both streams ended.
  pub async fn pump<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    tokio::select! {
      _ = self.out.filled() => {
        self.out.deliver(out);
        out.ready().await;
      }
      _ = self.err.filled() => {
        self.err.deliver(err);
        err.ready().await;
      }
    }
  }

  /// Before a control message is handed out: everything the pipes held is
  /// read (the pumps' catch-up barriers) and handed to `out`/`err`.
  pub async fn catch_up<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    // both asked first: the pumps catch up together
    let (go, ge) = (self.out.ask(), self.err.ask());
    self.out.caught_up(out, go).await;
    self.err.caught_up(err, ge).await;
  }

  /// After the worker's exit, once its pumps were drained (bounded) and
  /// ended: what the relays hold goes to `out`/`err`.
  pub async fn after_exit<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    self.out.deliver(out);
    self.err.deliver(err);
  }
}
