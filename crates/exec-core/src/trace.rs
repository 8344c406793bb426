//! Timestamps of the phases of a run, for the spawn profile of issue 28
//! (docs/PERFORMANCE.md, `benchmark/spawn-trace.mjs`). Compiled in only with
//! the `spawn-trace` feature (`napi build --release --features spawn-trace`);
//! without it [`at`] is an empty inline function and nothing is recorded.

/// Record that the phase `what` was reached, now, on this thread.
#[cfg(not(feature = "spawn-trace"))]
#[inline(always)]
pub fn at(_what: &'static str) {}

#[cfg(feature = "spawn-trace")]
pub use on::*;

#[cfg(feature = "spawn-trace")]
mod on {
  use std::sync::{Mutex, OnceLock};
  use std::time::Instant;

  static EPOCH: OnceLock<Instant> = OnceLock::new();
  static EVENTS: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());

  /// Record that the phase `what` was reached, now, on this thread.
  pub fn at(what: &'static str) {
    let now = Instant::now();
    EPOCH.get_or_init(|| now);
    EVENTS
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .push((what, now));
  }

  /// The events recorded so far (cleared): names and microseconds since the
  /// first event of the process.
  pub fn take() -> Vec<(&'static str, f64)> {
    let epoch = *EPOCH.get_or_init(Instant::now);
    std::mem::take(&mut *EVENTS.lock().unwrap_or_else(|e| e.into_inner()))
      .into_iter()
      .map(|(w, t)| (w, t.duration_since(epoch).as_secs_f64() * 1e6))
      .collect()
  }
}
