//! Streaming output to JavaScript callbacks: decoded on UTF-8 boundaries, cut
//! into chunks of at most [`CHUNK`] bytes, coalesced, in order, and with
//! backpressure on the pipe when JavaScript falls behind, so memory stays
//! bounded and nothing is lost.
//!
//! The rule: chunks go to JavaScript in batches of at most [`WINDOW`], the
//! next batch once JavaScript has returned from every call of the previous
//! one. A batch holds the full chunks (64 KiB each) read meanwhile; a partial
//! chunk joins it only when `interval` has passed since the last batch (the
//! first goes at once). So a trickle of output gets at most one call per
//! interval, and a flood gets 64 KiB per call, up to 8 calls (512 KiB) per
//! turn of the event loop: the calls of a batch are calls of one threadsafe
//! function, which Node runs back to back in one wake-up; after the last one
//! the loop gets a turn (setImmediate), and then the JS thread itself hands
//! over the next batch, already read and converted by the pump meanwhile.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use exec_core::process::supervise::OutputSink;
use exec_core::utf8::Utf8Decoder;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::text::{JsBytes, JsText};

/// A callback taking one string, weak (does not keep Node alive by itself: the
/// pending promise does), errors not passed as a first argument.
pub type StringCallback =
  ThreadsafeFunction<JsText, Unknown<'static>, JsText, Status, false, true, 0>;

/// The same, taking one Buffer (`encoding: 'buffer'`).
pub type BufferCallback =
  ThreadsafeFunction<JsBytes, Unknown<'static>, JsBytes, Status, false, true, 0>;

/// An output callback: strings decoded on UTF-8 boundaries, or raw Buffers.
pub enum Callback {
  Text(StringCallback),
  Bytes(BufferCallback),
}

/// Most bytes (UTF-8 input) in one call: what Node's own pipe reads give a
/// `'data'` listener, and a string V8 allocates in its young generation.
pub const CHUNK: usize = 64 * 1024;
/// Chunks handed to the JS thread in one batch (one turn of the event loop),
/// at most: 512 KiB. Fewer cost throughput, more the loop's p99 (the
/// comparison is in docs/PERFORMANCE.md).
const WINDOW: usize = 8;
/// A Buffer stream's pump reads ahead until this many chunks (1 MiB) wait
/// to be handed over, then stops (backpressure: the child blocks on the full
/// pipe) ...
const AHEAD: usize = 2 * WINDOW;
/// ... and reads on once JavaScript has taken them down to one batch: when
/// the JS thread ends a batch the next is staged already (it does not sleep
/// until the pump wakes up and reads), and the pump reads a whole batch per
/// wake-up. Further ahead ran faster still, but the loop p99 rose past
/// Node's (the same collections in less time): docs/PERFORMANCE.md, item 6.
const RESUME: usize = WINDOW;

/// What the pump and the JS thread share for one stream.
struct Shared {
  cb: Callback,
  staged: Mutex<Staged>,
  /// Calls of the batch in flight that JavaScript has not returned from.
  queued: AtomicUsize,
  /// A batch is in flight (until a turn of the event loop after its last
  /// call). Changed only with `staged` locked.
  busy: AtomicBool,
  /// The JS thread took a batch or let the last one go.
  changed: Notify,
}

/// Chunks read, converted for JavaScript, not yet handed over.
#[derive(Default)]
struct Staged {
  chunks: VecDeque<(Ready, usize)>,
  /// Their length in bytes (as read).
  bytes: usize,
  last_sent: Option<Instant>,
}

impl Shared {
  fn lock(&self) -> std::sync::MutexGuard<'_, Staged> {
    self.staged.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Hand over a batch of up to [`WINDOW`] staged chunks unless one is in
  /// flight (from the pump's thread, or from the JS thread after a turn).
  fn send_batch(self: &Arc<Self>, st: &mut Staged) {
    let n = st.chunks.len().min(WINDOW);
    if n == 0 || self.busy.load(Ordering::Acquire) {
      return;
    }
    // counted before the first call: the batch ends with its last call
    self.busy.store(true, Ordering::Release);
    self.queued.fetch_add(n, Ordering::AcqRel);
    for (chunk, len) in st.chunks.drain(..n) {
      st.bytes -= len;
      self.call(chunk);
    }
    st.last_sent = Some(Instant::now());
  }

  fn call(self: &Arc<Self>, chunk: Ready) {
    let me = self.clone();
    let settled = move |_ret: Result<Unknown<'static>>, env: Env| {
      // a callback that threw lands here as Err: the run goes on
      me.done(Some(&env));
      Ok(())
    };
    let status = match (&self.cb, chunk) {
      (Callback::Text(cb), Ready::Text(text)) => {
        cb.call_with_return_value(text, ThreadsafeFunctionCallMode::NonBlocking, settled)
      }
      (Callback::Bytes(cb), Ready::Bytes(bytes)) => cb.call_with_return_value(
        JsBytes(bytes),
        ThreadsafeFunctionCallMode::NonBlocking,
        settled,
      ),
      _ => unreachable!("a sink fills chunks of its callback's kind"),
    };
    if status != Status::Ok {
      // the environment is closing: nobody is listening any more
      self.done(None);
    }
  }

  /// JavaScript returned from one call (on the JS thread; `env` is None when
  /// the call could not be made).
  fn done(self: &Arc<Self>, env: Option<&Env>) {
    if self.queued.fetch_sub(1, Ordering::AcqRel) != 1 {
      return;
    }
    // The last call of the batch. Node runs the queued calls of a threadsafe
    // function back to back, and keeps going (up to 1000 calls) when more
    // were queued meanwhile: handing over the next batch right away let one
    // turn of the loop run hundreds of calls. The next batch goes
    // after a turn of the event loop instead (setImmediate runs after the I/O
    // callbacks of this turn), from this thread: it is staged already, so
    // JavaScript does not wait for the pump to wake up.
    let deferred = env.map(|env| -> Result<()> {
      let me = self.clone();
      let turn = env.create_function_from_closure("execStreamTurn", move |_| {
        me.next_turn();
        Ok(())
      })?;
      let set_immediate: Function<Function<(), ()>, Unknown> =
        env.get_global()?.get_named_property("setImmediate")?;
      set_immediate.call(turn)?;
      Ok(())
    });
    if !matches!(deferred, Some(Ok(()))) {
      // (not locked: a failed call is seen inside `send_batch`, which holds the lock)
      self.busy.store(false, Ordering::Release);
      self.changed.notify_waiters();
    }
  }

  /// A turn of the event loop after a batch: the next one goes.
  fn next_turn(self: &Arc<Self>) {
    let mut st = self.lock();
    self.busy.store(false, Ordering::Release);
    self.send_batch(&mut st);
    drop(st);
    // the pump may read again (or finish)
    self.changed.notify_waiters();
  }

  /// Until `ok` holds (checked with the staging locked).
  async fn wait_until(&self, ok: impl Fn(&Staged, bool) -> bool) {
    loop {
      let w = self.changed.notified();
      tokio::pin!(w);
      w.as_mut().enable();
      {
        let st = self.lock();
        if ok(&st, self.busy.load(Ordering::Acquire)) {
          return;
        }
      }
      w.await;
    }
  }
}

/// A chunk ready to go.
enum Ready {
  Text(JsText),
  Bytes(Vec<u8>),
}

pub struct CallbackSink {
  shared: Option<Arc<Shared>>,
  decoder: Utf8Decoder,
  /// The chunk being filled (text callbacks).
  open: String,
  /// The chunk being filled (Buffer callbacks).
  open_bytes: Vec<u8>,
  interval: Duration,
  text: bool,
}

impl CallbackSink {
  pub fn new(callback: Option<Callback>, interval: Duration) -> Self {
    CallbackSink {
      text: matches!(callback, Some(Callback::Text(_))),
      shared: callback.map(|cb| {
        Arc::new(Shared {
          cb,
          staged: Mutex::new(Staged::default()),
          queued: AtomicUsize::new(0),
          busy: AtomicBool::new(false),
          changed: Notify::new(),
        })
      }),
      decoder: Utf8Decoder::new(),
      open: String::new(),
      open_bytes: Vec::new(),
      interval,
    }
  }

  fn open_len(&self) -> usize {
    self.open.len() + self.open_bytes.len()
  }

  /// The open chunk is staged (converted here, on the runtime's thread, so
  /// that the JS thread only copies).
  fn seal(&mut self, st: &mut Staged) {
    if !self.open.is_empty() {
      // SAFETY: an empty buffer is a valid string
      let next = unsafe { String::from_utf8_unchecked(crate::text::chunk_buffer(CHUNK)) };
      let s = std::mem::replace(&mut self.open, next);
      st.bytes += s.len();
      let n = s.len();
      st.chunks.push_back((Ready::Text(JsText::new(s)), n));
    }
    if !self.open_bytes.is_empty() {
      let b = std::mem::replace(&mut self.open_bytes, crate::text::chunk_buffer(CHUNK));
      st.bytes += b.len();
      let n = b.len();
      st.chunks.push_back((Ready::Bytes(b), n));
    }
  }

  fn seal_now(&mut self) {
    if let Some(shared) = self.shared.clone() {
      let mut st = shared.lock();
      self.seal(&mut st);
    }
  }

  fn write_text(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      if self.open.capacity() == 0 {
        // SAFETY: an empty buffer is a valid string
        self.open = unsafe { String::from_utf8_unchecked(crate::text::chunk_buffer(CHUNK)) };
      }
      let take = (CHUNK - self.open.len()).min(data.len());
      self.decoder.decode_into(&data[..take], &mut self.open);
      data = &data[take..];
      if self.open.len() >= CHUNK {
        // a carried character may overshoot by up to 3 bytes: it starts the next chunk
        let mut cut = CHUNK;
        while !self.open.is_char_boundary(cut) {
          cut -= 1;
        }
        let tail = self.open.split_off(cut);
        self.seal_now();
        self.open.push_str(&tail);
      }
    }
  }

  fn write_bytes(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      if self.open_bytes.capacity() == 0 {
        self.open_bytes = crate::text::chunk_buffer(CHUNK);
      }
      let take = (CHUNK - self.open_bytes.len()).min(data.len());
      self.open_bytes.extend_from_slice(&data[..take]);
      data = &data[take..];
      if self.open_bytes.len() == CHUNK {
        self.seal_now();
      }
    }
  }

  /// Hand over a batch unless one is in flight: the staged (full) chunks,
  /// and the open one too when `interval` has passed since the last batch or
  /// the stream ended (`flush`).
  fn maybe_send(&mut self, flush: bool) {
    let Some(shared) = self.shared.clone() else {
      return;
    };
    let mut st = shared.lock();
    if shared.busy.load(Ordering::Acquire) {
      return;
    }
    let due = flush || st.last_sent.is_none_or(|t| t.elapsed() >= self.interval);
    if due && st.chunks.len() < WINDOW {
      self.seal(&mut st);
    }
    shared.send_batch(&mut st);
  }

  /// Bytes read and not handed over.
  fn pending_len(&self) -> usize {
    self.shared.as_ref().map_or(0, |s| s.lock().bytes) + self.open_len()
  }
}

impl OutputSink for CallbackSink {
  fn write(&mut self, data: &[u8]) {
    if self.shared.is_none() {
      return;
    }
    if self.text {
      self.write_text(data);
    } else {
      self.write_bytes(data);
    }
    self.maybe_send(false);
  }

  /// Buffer streams are read straight into what is left of the open chunk
  /// (one copy less: the pump's buffer into the chunk; reads into a part
  /// filled still coalesce); text goes through `write`, where it is decoded.
  fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
    if self.text || self.shared.is_none() {
      return None;
    }
    if self.open_bytes.capacity() == 0 {
      self.open_bytes = crate::text::chunk_buffer(CHUNK);
    }
    let left = CHUNK - self.open_bytes.len();
    Some(&mut self.open_bytes.spare_capacity_mut()[..left])
  }

  fn filled(&mut self, n: usize) {
    assert!(
      self.open_bytes.len() + n <= CHUNK,
      "a read fills at most the room lent"
    );
    // SAFETY: the pump's read wrote the first `n` bytes of the room `lend` gave
    unsafe { self.open_bytes.set_len(self.open_bytes.len() + n) };
    if self.open_bytes.len() == CHUNK {
      self.seal_now();
    }
    self.maybe_send(false);
  }

  fn next_tick(&self) -> Option<Instant> {
    let shared = self.shared.as_ref()?;
    let st = shared.lock();
    if st.bytes + self.open_len() == 0 {
      return None;
    }
    if shared.busy.load(Ordering::Acquire) {
      // look again shortly: the JS thread sends what is staged itself, only
      // the open chunk waits for the pump
      return Some(Instant::now() + Duration::from_millis(2));
    }
    if !st.chunks.is_empty() {
      return Some(Instant::now());
    }
    Some(
      st.last_sent
        .map_or_else(Instant::now, |t| t + self.interval),
    )
  }

  fn tick(&mut self) {
    self.maybe_send(false);
  }

  async fn ready(&mut self) {
    // backpressure: stop reading while a window's worth waits to be handed over
    let Some(shared) = self.shared.clone() else {
      return;
    };
    // text stops at one batch and reads on below it: reading ahead as
    // Buffer streams do took the strings' loop p99 up to Node's and their RSS
    // growth over 16 MiB (docs/PERFORMANCE.md, item 6)
    let (high, low) = if self.text {
      (WINDOW * CHUNK, WINDOW * CHUNK - 1)
    } else {
      (AHEAD * CHUNK, RESUME * CHUNK)
    };
    loop {
      self.maybe_send(false);
      let open = self.open_len();
      if self.pending_len() < high {
        return;
      }
      // woken when the JS thread took batches down to `low`, or let the
      // last one go with nothing staged (then the pump sends)
      shared
        .wait_until(|st, busy| st.bytes + open <= low || !busy)
        .await;
    }
  }

  async fn finish(&mut self) {
    let Some(shared) = self.shared.clone() else {
      return;
    };
    let rest = self.decoder.finish();
    if self.open.len() + rest.len() > CHUNK {
      self.seal_now();
    }
    self.open.push_str(&rest);
    self.seal_now();
    loop {
      self.maybe_send(true);
      // every byte is delivered before the promise resolves
      let w = shared.changed.notified();
      tokio::pin!(w);
      w.as_mut().enable();
      {
        let st = shared.lock();
        if st.chunks.is_empty() && !shared.busy.load(Ordering::Acquire) {
          return;
        }
      }
      w.await;
    }
  }
}
