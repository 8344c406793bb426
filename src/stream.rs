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
//! interval, and a flood gets 64 KiB per call, up to 16 calls (1 MiB) per
//! wake-up of the event loop: the calls of a batch are calls of one
//! threadsafe function, which Node runs back to back in one wake-up, and the
//! loop gets a turn between batches.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use exec_core::run::OutputSink;
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
/// Chunks handed to the JS thread in one batch, at most.
const WINDOW_DEFAULT: usize = 16;
// EXPLORATION KNOB (not to be committed)
fn window() -> usize {
  std::env::var("EXEC_NATIVE_WINDOW")
    .ok()
    .and_then(|v| v.parse().ok())
    .unwrap_or(WINDOW_DEFAULT)
}
/// Chunks read but not yet handed over above which the pump stops reading.

#[derive(Default)]
struct InFlight {
  /// Calls queued for the JS thread and not yet returned.
  queued: AtomicUsize,
  changed: Notify,
}

impl InFlight {
  /// Until JavaScript returned from every call handed over.
  async fn wait_idle(&self) {
    loop {
      let w = self.changed.notified();
      tokio::pin!(w);
      w.as_mut().enable();
      if self.queued.load(Ordering::Acquire) == 0 {
        return;
      }
      w.await;
    }
  }

  fn done(&self) {
    // the pump waits for the end of a batch: wake it only then
    if self.queued.fetch_sub(1, Ordering::AcqRel) == 1 {
      self.changed.notify_waiters();
    }
  }
}

/// A chunk ready to go.
enum Ready {
  Text(JsText),
  Bytes(Vec<u8>),
}

pub struct CallbackSink {
  callback: Option<Arc<Callback>>,
  decoder: Utf8Decoder,
  /// The chunk being filled (text callbacks).
  open: String,
  /// The chunk being filled (Buffer callbacks).
  open_bytes: Vec<u8>,
  /// Full chunks, converted for JavaScript, not yet handed over, with their
  /// length in bytes.
  full: VecDeque<(Ready, usize)>,
  full_bytes: usize,
  in_flight: Arc<InFlight>,
  last_sent: Option<Instant>,
  interval: Duration,
  /// Calls made (for tests and coalescing checks).
  pub calls: u64,
}

impl CallbackSink {
  pub fn new(callback: Option<Callback>, interval: Duration) -> Self {
    CallbackSink {
      callback: callback.map(Arc::new),
      decoder: Utf8Decoder::new(),
      open: String::new(),
      open_bytes: Vec::new(),
      full: VecDeque::new(),
      full_bytes: 0,
      in_flight: Arc::new(InFlight::default()),
      last_sent: None,
      interval,
      calls: 0,
    }
  }

  fn open_len(&self) -> usize {
    self.open.len() + self.open_bytes.len()
  }

  fn pending_len(&self) -> usize {
    self.full_bytes + self.open_len()
  }

  fn queued(&self) -> usize {
    self.in_flight.queued.load(Ordering::Acquire)
  }

  /// The open chunk becomes a full one (converted here, on the runtime's
  /// thread, so that the JS thread only copies).
  fn seal(&mut self) {
    if !self.open.is_empty() {
      // SAFETY: an empty buffer is a valid string
      let next = unsafe { String::from_utf8_unchecked(crate::text::chunk_buffer(CHUNK)) };
      let s = std::mem::replace(&mut self.open, next);
      self.full_bytes += s.len();
      let n = s.len();
      self.full.push_back((Ready::Text(JsText::new(s)), n));
    }
    if !self.open_bytes.is_empty() {
      let b = std::mem::replace(&mut self.open_bytes, crate::text::chunk_buffer(CHUNK));
      self.full_bytes += b.len();
      let n = b.len();
      self.full.push_back((Ready::Bytes(b), n));
    }
  }

  fn write_text(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      let take = (CHUNK - self.open.len()).min(data.len());
      if self.open.capacity() == 0 {
        // SAFETY: an empty buffer is a valid string
        self.open = unsafe { String::from_utf8_unchecked(crate::text::chunk_buffer(CHUNK)) };
      }
      self.decoder.decode_into(&data[..take], &mut self.open);
      data = &data[take..];
      if self.open.len() >= CHUNK {
        // a carried character may overshoot by up to 3 bytes: it starts the next chunk
        let mut cut = CHUNK;
        while !self.open.is_char_boundary(cut) {
          cut -= 1;
        }
        let tail = self.open.split_off(cut);
        self.seal();
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
        self.seal();
      }
    }
  }

  /// Hand over a batch: the full chunks (up to [`WINDOW`]), and the open
  /// chunk too when `partial` (its interval is over, or the stream ended).
  fn send(&mut self, partial: bool) {
    let Some(cb) = self.callback.clone() else {
      self.full.clear();
      self.full_bytes = 0;
      self.open.clear();
      self.open_bytes.clear();
      return;
    };
    if partial {
      self.seal();
    }
    let mut sent = false;
    for _ in 0..window() {
      let Some((chunk, n)) = self.full.pop_front() else {
        break;
      };
      self.full_bytes -= n;
      self.call(&cb, chunk);
      sent = true;
    }
    if sent {
      self.last_sent = Some(Instant::now());
    }
  }

  fn call(&mut self, cb: &Callback, chunk: Ready) {
    let flight = self.in_flight.clone();
    flight.queued.fetch_add(1, Ordering::AcqRel);
    self.calls += 1;
    let done = flight.clone();
    let settled = move |_ret: Result<Unknown<'static>>, _env: Env| {
      // a callback that threw lands here as Err: the run goes on
      done.done();
      Ok(())
    };
    let status = match (cb, chunk) {
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
      flight.done();
    }
  }

  fn partial_due(&self) -> bool {
    self.last_sent.is_none_or(|t| t.elapsed() >= self.interval)
  }

  fn maybe_send(&mut self) {
    if self.pending_len() != 0 && self.queued() == 0 {
      let partial = self.full.len() < window() && self.partial_due();
      self.send(partial);
    }
  }
}

impl OutputSink for CallbackSink {
  fn write(&mut self, data: &[u8]) {
    match self.callback.as_deref() {
      None => return,
      Some(Callback::Text(_)) => self.write_text(data),
      Some(Callback::Bytes(_)) => self.write_bytes(data),
    }
    self.maybe_send();
  }

  fn next_tick(&self) -> Option<Instant> {
    if self.pending_len() == 0 {
      return None;
    }
    if self.queued() != 0 {
      // look again shortly: JavaScript may be done with the batch by then
      return Some(Instant::now() + Duration::from_millis(2));
    }
    if !self.full.is_empty() {
      return Some(Instant::now());
    }
    Some(
      self
        .last_sent
        .map_or_else(Instant::now, |t| t + self.interval),
    )
  }

  fn tick(&mut self) {
    self.maybe_send();
  }

  async fn ready(&mut self) {
    // backpressure: stop reading while a window's worth waits to be handed over
    while self.pending_len() >= window() * CHUNK {
      self.in_flight.wait_idle().await;
      self.send(false);
    }
  }

  async fn finish(&mut self) {
    if self.callback.is_none() {
      return;
    }
    let rest = self.decoder.finish();
    if self.open.len() + rest.len() > CHUNK {
      self.seal();
    }
    self.open.push_str(&rest);
    self.seal();
    while !self.full.is_empty() {
      self.in_flight.wait_idle().await;
      self.send(true);
    }
    // every byte is delivered before the promise resolves
    self.in_flight.wait_idle().await;
  }
}
