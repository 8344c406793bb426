//! Where a stream's bytes go: the [`OutputSink`] a pump writes to (lending
//! room, ticks, backpressure, the head+tail window that allows skimming), the
//! sink that drops everything ([`Discard`]) and the bounded capture's
//! ([`crate::buffer::HeadTailBuffer`]).

use std::future::Future;
use std::mem::MaybeUninit;

use tokio::time::Instant;

/// Where a stream's bytes go. The pump calls `write` for each read (or reads
/// into the room the sink lends, then calls `filled`), `tick` when
/// `next_tick` is due (to flush coalesced data), and awaits `ready` before
/// reading on (backpressure).
pub trait OutputSink: Send + 'static {
  fn write(&mut self, data: &[u8]);
  /// Room for the next read, in the sink's own buffer: the pump reads into
  /// it in place (instead of into its buffer and then `write`, one copy
  /// less) and calls [`OutputSink::filled`]. A read fills at most the room,
  /// so a sink that coalesces lends what is left of its open chunk. `None`
  /// or empty: the pump reads into its own buffer and calls `write`.
  fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
    None
  }
  /// The pump read `n` (> 0) bytes into the start of the room `lend` gave.
  fn filled(&mut self, _n: usize) {}
  fn next_tick(&self) -> Option<Instant> {
    None
  }
  fn tick(&mut self) {}
  fn ready(&mut self) -> impl Future<Output = ()> + Send {
    async {}
  }
  fn finish(&mut self) -> impl Future<Output = ()> + Send {
    async {}
  }
  /// Whether this sink keeps only a head and a tail of what it is given (a
  /// bounded capture). Only such a sink lets the pump drop output it cannot
  /// keep without reading it (see [`OutputSink::tail_window`]); a sink that
  /// needs every byte (streaming, a log) keeps the default.
  fn keeps_head_tail(&self) -> bool {
    false
  }
  /// With [`OutputSink::keeps_head_tail`]: `Some(n)` once only the last `n`
  /// bytes of what follows can still be kept (the head is full).
  fn tail_window(&self) -> Option<usize> {
    None
  }
  /// With [`OutputSink::keeps_head_tail`]: `n` bytes the pump dropped unread,
  /// each followed by at least the `tail_window` bytes that will be written.
  fn skipped(&mut self, _n: u64) {}
}

/// A sink that drops everything (only counts, through the pump).
pub struct Discard;
impl OutputSink for Discard {
  fn write(&mut self, _: &[u8]) {}
}

impl OutputSink for crate::buffer::HeadTailBuffer {
  fn write(&mut self, data: &[u8]) {
    self.push(data);
  }
  fn keeps_head_tail(&self) -> bool {
    true
  }
  fn tail_window(&self) -> Option<usize> {
    crate::buffer::HeadTailBuffer::tail_window(self)
  }
  fn skipped(&mut self, n: u64) {
    self.skip(n);
  }
}

/// Move a pump's tick timer (every pump's, POSIX and Windows) to `next` only when the sink wants it sooner:
/// armed sooner, it fires then, and the sink is asked again.
pub(super) fn rearm_tick(
  next: Option<Instant>,
  ticker: std::pin::Pin<&mut tokio::time::Sleep>,
  tick_at: &mut Option<Instant>,
) {
  match next {
    None => *tick_at = None,
    Some(t) if tick_at.is_some_and(|a| a <= t) => {}
    Some(t) => {
      ticker.reset(t);
      *tick_at = Some(t);
    }
  }
}
