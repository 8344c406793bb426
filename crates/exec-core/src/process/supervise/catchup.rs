//! The catch-up barrier of a pump ([`Catchup`]): shared by the POSIX pump
//! (`pump.rs`, a non-blocking read to `EAGAIN`) and the Windows one that a
//! session's worker uses (`../supervise_windows.rs`, reads of what
//! `PeekNamedPipe` says the pipe holds).

use std::sync::atomic::Ordering;

/// A request to a pump to read everything its pipe holds at that moment
/// (without waiting for more: POSIX bounds it like the final drain) and say so. The exit of a
/// process whose pipe stays open elsewhere has no EOF to wait for; this is
/// the barrier that still delivers what it wrote before it exited.
#[derive(Default)]
pub(crate) struct Catchup {
  asked_gen: std::sync::atomic::AtomicU64,
  answered_gen: std::sync::atomic::AtomicU64,
  asked: tokio::sync::Notify,
  answered: tokio::sync::Notify,
}

impl Catchup {
  /// The pump's side: `drain` what the pipe holds, then tell the askers.
  /// (The generation is read before the drain: a request made during it is
  /// answered only by the next round.)
  pub(super) fn answer(&self, drain: impl FnOnce() -> u64) -> u64 {
    let g = self.asked_gen.load(Ordering::SeqCst);
    let n = drain();
    self.answered_gen.store(g, Ordering::SeqCst);
    self.answered.notify_waiters();
    n
  }

  /// [`Catchup::answer`] if a round was asked that is not answered yet
  /// (else nothing is drained: 0).
  pub(super) fn answer_if_asked(&self, drain: impl FnOnce() -> u64) -> u64 {
    if self.asked_gen.load(Ordering::SeqCst) > self.answered_gen.load(Ordering::SeqCst) {
      self.answer(drain)
    } else {
      0
    }
  }

  /// The pump's side: resolves when a round is asked (a permit is stored
  /// if the pump was busy, so it is seen next time round).
  pub(super) fn asked(&self) -> tokio::sync::futures::Notified<'_> {
    self.asked.notified()
  }

  /// Ask for a round: the generation to wait for with
  /// [`Catchup::answered_from`].
  pub(crate) fn ask(&self) -> u64 {
    let g = self.asked_gen.fetch_add(1, Ordering::SeqCst) + 1;
    // a stored permit if the pump is busy: it sees the request next time round
    self.asked.notify_one();
    g
  }

  /// Ask each of `catchups` for a round, then wait until each answered it,
  /// at most `within` (a run's pumps before its result is made, when what
  /// it left running keeps the pipes open).
  pub(crate) async fn all_within(catchups: [Option<&Catchup>; 2], within: std::time::Duration) {
    let asks = catchups.map(|c| c.map(|c| (c, c.ask())));
    let all = async {
      for (c, g) in asks.into_iter().flatten() {
        c.answered_from(g).await;
      }
    };
    let _ = tokio::time::timeout(within, all).await;
  }

  /// The round `g` (or a later one) was answered. Never, once the pump has
  /// ended: then everything it read is in its sink.
  pub(crate) async fn answered_from(&self, g: u64) {
    loop {
      let n = self.answered.notified();
      tokio::pin!(n);
      n.as_mut().enable();
      if self.answered_gen.load(Ordering::SeqCst) >= g {
        return;
      }
      n.await;
    }
  }
}
