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
  callback: Option<Arc<StringCallback>>,
  decoder: Utf8Decoder,
  pending: String,
  in_flight: Arc<InFlight>,
  last_sent: Option<Instant>,
  interval: Duration,
  /// Calls made (for tests and coalescing checks).
  pub calls: u64,
  _stream: Option<crate::text::StreamGuard>,
}

impl CallbackSink {
  pub fn new(callback: Option<StringCallback>, interval: Duration) -> Self {
    CallbackSink {
      _stream: callback.is_some().then(crate::text::StreamGuard::new),
      callback: callback.map(Arc::new),
      decoder: Utf8Decoder::new(),
      pending: String::new(),
      in_flight: Arc::new(InFlight::default()),
      last_sent: None,
      interval,
      calls: 0,
    }
  }

  fn due(&self) -> bool {
    self.last_sent.is_none_or(|t| t.elapsed() >= self.interval)
  }

  fn send_now(&mut self) {
    let Some(cb) = &self.callback else {
      self.pending.clear();
      return;
    };
    if self.pending.is_empty() {
      return;
    }
    // converted here, on the runtime's thread, so that the JS thread only copies
    let text = JsText::new(std::mem::replace(
      &mut self.pending,
      crate::text::recycled_string(),
    ));
    let flight = self.in_flight.clone();
    flight.busy.store(true, Ordering::Release);
    self.last_sent = Some(Instant::now());
    self.calls += 1;
    let done = flight.clone();
    let status = cb.call_with_return_value(
      text,
      ThreadsafeFunctionCallMode::NonBlocking,
      move |_ret, _env| {
        // a callback that threw lands here as Err: the run goes on
        done.busy.store(false, Ordering::Release);
        done.idle.notify_waiters();
        Ok(())
      },
    );
    if status != Status::Ok {
      // the environment is closing: nobody is listening any more
      flight.busy.store(false, Ordering::Release);
      flight.idle.notify_waiters();
    }
  }

  fn maybe_send(&mut self) {
    if !self.pending.is_empty() && !self.in_flight.busy.load(Ordering::Acquire) && self.due() {
      self.send_now();
    }
  }
}

impl OutputSink for CallbackSink {
  fn write(&mut self, data: &[u8]) {
    if self.callback.is_none() {
      return;
    }
    self.decoder.decode_into(data, &mut self.pending);
    self.maybe_send();
  }

  fn next_tick(&self) -> Option<Instant> {
    if self.pending.is_empty() {
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
    while self.pending.len() >= HIGH_WATER {
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
