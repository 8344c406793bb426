//! Streaming output to JavaScript callbacks: decoded on UTF-8 boundaries,
//! coalesced (at most one call per interval per stream), one call in flight at
//! a time, and backpressure on the pipe when JavaScript falls behind, so memory
//! stays bounded and nothing is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use exec_core::run::OutputSink;
use exec_core::utf8::Utf8Decoder;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::text::JsText;

/// A callback taking one string, weak (does not keep Node alive by itself: the
/// pending promise does), errors not passed as a first argument.
pub type StringCallback =
  ThreadsafeFunction<JsText, Unknown<'static>, JsText, Status, false, true, 0>;

/// The same, taking one Buffer (`encoding: 'buffer'`).
pub type BufferCallback =
  ThreadsafeFunction<Buffer, Unknown<'static>, Buffer, Status, false, true, 0>;

/// An output callback: strings decoded on UTF-8 boundaries, or raw Buffers.
pub enum Callback {
  Text(StringCallback),
  Bytes(BufferCallback),
}

/// Pending text above which the pump waits for JavaScript before reading more.
const HIGH_WATER: usize = 4 * 1024 * 1024;

#[derive(Default)]
struct InFlight {
  busy: AtomicBool,
  idle: Notify,
}

impl InFlight {
  async fn wait_idle(&self) {
    loop {
      let n = self.idle.notified();
      tokio::pin!(n);
      n.as_mut().enable();
      if !self.busy.load(Ordering::Acquire) {
        return;
      }
      n.await;
    }
  }
}

pub struct CallbackSink {
  callback: Option<Arc<Callback>>,
  decoder: Utf8Decoder,
  /// Decoded text not yet delivered (text callbacks).
  pending: String,
  /// Raw bytes not yet delivered (Buffer callbacks).
  pending_bytes: Vec<u8>,
  in_flight: Arc<InFlight>,
  last_sent: Option<Instant>,
  interval: Duration,
  /// Calls made (for tests and coalescing checks).
  pub calls: u64,
  _stream: Option<crate::text::StreamGuard>,
}

impl CallbackSink {
  pub fn new(callback: Option<Callback>, interval: Duration) -> Self {
    CallbackSink {
      _stream: callback.is_some().then(crate::text::StreamGuard::new),
      callback: callback.map(Arc::new),
      decoder: Utf8Decoder::new(),
      pending: String::new(),
      pending_bytes: Vec::new(),
      in_flight: Arc::new(InFlight::default()),
      last_sent: None,
      interval,
      calls: 0,
    }
  }

  fn due(&self) -> bool {
    self.last_sent.is_none_or(|t| t.elapsed() >= self.interval)
  }

  fn pending_len(&self) -> usize {
    self.pending.len() + self.pending_bytes.len()
  }

  fn send_now(&mut self) {
    let Some(cb) = &self.callback else {
      self.pending.clear();
      self.pending_bytes.clear();
      return;
    };
    if self.pending_len() == 0 {
      return;
    }
    let flight = self.in_flight.clone();
    flight.busy.store(true, Ordering::Release);
    self.last_sent = Some(Instant::now());
    self.calls += 1;
    let done = flight.clone();
    let settled = move |_ret: Result<Unknown<'static>>, _env: Env| {
      // a callback that threw lands here as Err: the run goes on
      done.busy.store(false, Ordering::Release);
      done.idle.notify_waiters();
      Ok(())
    };
    let status = match cb.as_ref() {
      Callback::Text(cb) => {
        // converted here, on the runtime's thread, so that the JS thread only copies
        let text = JsText::new(std::mem::replace(
          &mut self.pending,
          crate::text::recycled_string(),
        ));
        cb.call_with_return_value(text, ThreadsafeFunctionCallMode::NonBlocking, settled)
      }
      Callback::Bytes(cb) => {
        let bytes = Buffer::from(std::mem::take(&mut self.pending_bytes));
        cb.call_with_return_value(bytes, ThreadsafeFunctionCallMode::NonBlocking, settled)
      }
    };
    if status != Status::Ok {
      // the environment is closing: nobody is listening any more
      flight.busy.store(false, Ordering::Release);
      flight.idle.notify_waiters();
    }
  }

  fn maybe_send(&mut self) {
    if self.pending_len() != 0 && !self.in_flight.busy.load(Ordering::Acquire) && self.due() {
      self.send_now();
    }
  }
}

impl OutputSink for CallbackSink {
  fn write(&mut self, data: &[u8]) {
    match self.callback.as_deref() {
      None => return,
      Some(Callback::Text(_)) => self.decoder.decode_into(data, &mut self.pending),
      Some(Callback::Bytes(_)) => self.pending_bytes.extend_from_slice(data),
    }
    self.maybe_send();
  }

  fn next_tick(&self) -> Option<Instant> {
    if self.pending_len() == 0 {
      return None;
    }
    let at = self
      .last_sent
      .map_or_else(Instant::now, |t| t + self.interval);
    if self.in_flight.busy.load(Ordering::Acquire) {
      // look again shortly: the call in flight may be done by then
      return Some(at.max(Instant::now() + Duration::from_millis(2)));
    }
    Some(at)
  }

  fn tick(&mut self) {
    self.maybe_send();
  }

  async fn ready(&mut self) {
    while self.pending_len() >= HIGH_WATER {
      self.in_flight.wait_idle().await;
      self.send_now();
    }
  }

  async fn finish(&mut self) {
    if self.callback.is_none() {
      return;
    }
    let rest = self.decoder.finish();
    self.pending.push_str(&rest);
    self.in_flight.wait_idle().await;
    self.send_now();
    // every byte is delivered before the promise resolves
    self.in_flight.wait_idle().await;
  }
}
