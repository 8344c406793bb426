//! The pump: a loop that reads a stream (a pipe, or a PTY's master) into its
//! sink until EOF or the stop, with its helpers: backpressure, the sink's
//! ticks, the heavy pipe's growth, skimming (a head+tail sink's surplus
//! dropped in the kernel), the bounded final drain, and the catch-up barrier
//! ([`Catchup`], `catchup.rs`).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::sink::rearm_tick;
use super::{Catchup, OutputSink};
use crate::platform;

#[cfg(unix)]
const READ_BUF: usize = 128 * 1024;
#[cfg(unix)]
/// Pipe size asked for once a stream proves heavy (a read filled the pipe).
const HEAVY_PIPE_SIZE: i32 = 1024 * 1024;
#[cfg(unix)]
/// A pipe a skimming pump leaves the tail in is asked for twice the tail,
/// at most this much (only a privileged host gets more than
/// `/proc/sys/fs/pipe-max-size`, 1 MiB by default).
const MAX_SKIM_PIPE: usize = 16 * 1024 * 1024;
#[cfg(unix)]
/// Skimming needs the pipe to hold the tail and this much more, so the
/// writer goes on while the tail waits in the pipe.
const SKIM_ROOM: usize = 64 * 1024;
#[cfg(unix)]
/// Bytes left in a pipe with no wake-up for this long are read.
const PARKED_RECHECK: Duration = Duration::from_millis(10);
#[cfg(unix)]
/// At most this much is read after the drain ran out.
const FINAL_DRAIN_MAX: usize = 8 * 1024 * 1024;

#[cfg(unix)]
/// The loop of one stream, not spawned (see [`Pump::Inline`]).
pub(super) type PumpLoop<S> = std::pin::Pin<Box<dyn std::future::Future<Output = (S, u64)> + Send>>;

#[cfg(unix)]
/// One output stream of a run: the task that pumps it and the catch-up it
/// answers; or the same loop not spawned, polled by the task that waits for
/// the run; or (the second stream of a child on a terminal, which has one)
/// only the sink, which then gets nothing.
pub(super) enum Pump<S> {
  Reading {
    task: tokio::task::JoinHandle<(S, u64)>,
    catchup: Arc<Catchup>,
  },
  /// Polled by [`Execution::wait`](super::Execution::wait) beside the exit
  /// phase, in the waiting task: the exit and the pipes' EOF, which come
  /// together, wake that one task (no pump task to spawn, to wake on
  /// another worker and to join: issue 28). Made only for a run whose wait
  /// starts at once in the task that spawned it.
  Inline {
    /// In a mutex only to make the run `Sync` (it is only ever taken by
    /// value: never locked)
    run: std::sync::Mutex<PumpLoop<S>>,
    catchup: Arc<Catchup>,
  },
  Idle(S),
}

#[cfg(unix)]
impl<S: OutputSink> Pump<S> {
  /// Start pumping `io` into `sink`.
  pub(super) fn start(
    io: impl std::borrow::Borrow<PipeIn> + Send + 'static,
    sink: S,
    stop: &CancellationToken,
  ) -> Self {
    let catchup = Arc::new(Catchup::default());
    let task = tokio::spawn(pump(io, sink, stop.clone(), catchup.clone()));
    Pump::Reading { task, catchup }
  }

  /// The same loop, to be polled by the run's wait ([`Pump::Inline`]).
  pub(super) fn inline(
    io: impl std::borrow::Borrow<PipeIn> + Send + 'static,
    sink: S,
    stop: &CancellationToken,
  ) -> Self {
    let catchup = Arc::new(Catchup::default());
    let run: PumpLoop<S> = Box::pin(pump(io, sink, stop.clone(), catchup.clone()));
    Pump::Inline {
      run: std::sync::Mutex::new(run),
      catchup,
    }
  }

  /// A pump that must go on by itself (a wait that is not the spawning
  /// task's, or that leaves the pumps running): an inline loop spawned.
  pub(super) fn detached(self) -> Self {
    match self {
      Pump::Inline { run, catchup } => Pump::Reading {
        task: tokio::spawn(run.into_inner().unwrap_or_else(|e| e.into_inner())),
        catchup,
      },
      other => other,
    }
  }

  /// The sink and the bytes it was given, once the pump ended.
  pub(super) async fn join(self) -> Result<(S, u64), tokio::task::JoinError> {
    match self {
      Pump::Reading { task, .. } => task.await,
      Pump::Inline { run, .. } => Ok(run.into_inner().unwrap_or_else(|e| e.into_inner()).await),
      Pump::Idle(sink) => Ok((sink, 0)),
    }
  }

  /// The pump's catch-up barrier (`None`: nothing reads this stream).
  pub(super) fn catchup(&self) -> Option<&Catchup> {
    match self {
      Pump::Reading { catchup, .. } | Pump::Inline { catchup, .. } => Some(catchup),
      Pump::Idle(_) => None,
    }
  }

  /// [`Pump::catchup`], shared (a session's worker asks it at each control
  /// message, from the task that follows its requests).
  pub(super) fn catchup_arc(&self) -> Option<Arc<Catchup>> {
    match self {
      Pump::Reading { catchup, .. } | Pump::Inline { catchup, .. } => Some(catchup.clone()),
      Pump::Idle(_) => None,
    }
  }
}

#[cfg(unix)]
/// The read end of a child's output pipe (or a PTY's master): non-blocking,
/// watched by the runtime.
pub(crate) type PipeIn = AsyncFd<OwnedFd>;

#[cfg(unix)]
pub(super) fn watch_pipe(fd: std::io::Result<OwnedFd>) -> std::io::Result<PipeIn> {
  let fd = fd?;
  // tokio hands the descriptor over in blocking mode
  platform::set_nonblocking(fd.as_raw_fd())?;
  // SAFETY: an OwnedFd keeps its descriptor open and unchanged while owned
  unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
    .map_err(|e| e.into())
}

#[cfg(unix)]
/// Read a stream into its sink until EOF, or until `stop` (then what the pipe
/// holds is drained, bounded). A PTY's master is pumped the same way (the
/// manager shares it with the writer, hence `Borrow`): its end of stream is
/// EIO once every slave is closed, which ends the pump as EOF does.
///
/// Skimming: once a sink that keeps only a head and a tail has its head full
/// (`tail_window() == Some(keep)`), only the last `keep` bytes of the rest can
/// matter. The pipe is enlarged past `keep`, the last `keep` bytes stay in it,
/// and whatever it holds beyond them is spliced to /dev/null, counted but
/// never copied to user space. At EOF, at the drain and at a catch-up the
/// bytes left in the pipe are read into the sink as usual.
pub(super) async fn pump<S>(
  io: impl std::borrow::Borrow<PipeIn>,
  mut sink: S,
  stop: CancellationToken,
  catchup: Arc<Catchup>,
) -> (S, u64)
where
  S: OutputSink,
{
  let io = io.borrow();
  let fd = io.get_ref().as_raw_fd();
  // not zeroed: `read_into` fills the spare capacity (zeroing it was most of
  // a short run's instructions: docs/PERFORMANCE.md)
  let mut buf: Vec<u8> = Vec::with_capacity(READ_BUF);
  let mut total = 0u64;
  let mut grown = false;
  // skimming is decided once, when the head is full
  let mut may_skim = sink.keeps_head_tail() && platform::ZERO_COPY_DISCARD;
  let mut skim: Option<usize> = None;
  let mut park = Parking::default();
  let mut recheck = std::pin::pin!(tokio::time::sleep(PARKED_RECHECK));
  // the sink's tick timer, likewise armed once and moved only when the sink
  // wants it sooner: a timer made per loop (per read) cost a timer-wheel
  // insertion and removal per read, and with another timer pending (a
  // run's timeout) a string stream ran 1.57 GB/s instead of 1.90
  // (docs/PERFORMANCE.md, streaming item 7)
  let mut ticker = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
  let mut tick_at: Option<Instant> = None;
  loop {
    if let Some(keep) = may_skim.then(|| sink.tail_window()).flatten() {
      may_skim = false;
      grown = true;
      skim = start_skim(fd, keep);
    }
    rearm_tick(sink.next_tick(), ticker.as_mut(), &mut tick_at);
    tokio::select! {
      biased;
      r = io.readable() => {
        let Ok(mut g) = r else { break };
        park.parked = false;
        if let Some(keep) = skim {
          match skim_pipe(fd, keep, &mut sink) {
            Ok(n) => total += n,
            Err(_) => skim = None,
          }
          if skim.is_some() && !g.ready().is_read_closed() {
            // the pipe holds the tail so far: it waits there until more
            // comes, the writers close, or the run ends
            g.clear_ready();
            park.park(recheck.as_mut());
            continue;
          }
          // the writers are gone: the rest is read, to EOF
        }
        match g.try_io(|_| read_to_sink(fd, &mut buf, &mut sink)) {
          // would block: the readiness was cleared
          Err(_) => continue,
          Ok(Ok(0)) => break,
          Ok(Ok(n)) => {
            total += n as u64;
            if !grown && n >= 65536 {
              grown = true;
              grow_pipe(fd);
            }
            // a writer that never lets the pipe empty would keep this
            // branch first (biased) and starve the catch-up's
            total += catchup.answer_if_asked(|| final_drain(fd, &mut buf, &mut sink, skim));
            if !ready_or_stopped(&mut sink, &stop).await {
              total += final_drain(fd, &mut buf, &mut sink, skim);
              break;
            }
          }
          Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
          Ok(Err(_)) => break,
        }
      },
      _ = &mut recheck, if park.armed => {
        let Recheck::Read { stop_skimming } = park.fired(recheck.as_mut()) else {
          continue;
        };
        if stop_skimming {
          skim = None;
        }
        total += final_drain(fd, &mut buf, &mut sink, None);
      }
      _ = &mut ticker, if tick_at.is_some() => {
        tick_at = None;
        sink.tick();
      }
      _ = catchup.asked() => {
        total += catchup.answer(|| final_drain(fd, &mut buf, &mut sink, skim));
        park.parked = false;
      }
      _ = stop.cancelled() => {
        total += final_drain(fd, &mut buf, &mut sink, skim);
        break;
      }
    }
  }
  sink.finish().await;
  (sink, total)
}

#[cfg(unix)]
/// Wait until `sink` can take more; false when `stop` fired first.
async fn ready_or_stopped<S: OutputSink>(sink: &mut S, stop: &CancellationToken) -> bool {
  tokio::select! {
    _ = sink.ready() => true,
    _ = stop.cancelled() => false,
  }
}

#[cfg(unix)]
/// Skim a stream past its kept head when its pipe can be enlarged to hold a
/// tail of `keep` bytes with room to spare: `Some(keep)`, else `None`.
fn start_skim(fd: i32, keep: usize) -> Option<usize> {
  grow_pipe_for_tail(fd, keep)
    .is_some_and(|size| size >= keep + SKIM_ROOM)
    .then_some(keep)
}

/// A skimming pump's bytes left in the pipe on purpose (`parked`). The
/// recheck timer is armed once and re-armed only when it fires (not one
/// timer per wake-up): the pipe is read if no wake-up came during a whole
/// period.
#[cfg(unix)]
#[derive(Default)]
struct Parking {
  parked: bool,
  stalls: u8,
  armed: bool,
  wakes: u64,
  wakes_at_arm: u64,
}

/// What to do when the recheck timer fires.
#[cfg(unix)]
enum Recheck {
  /// Nothing to read now.
  Wait,
  /// Read what the pipe holds; the second time, stop skimming this stream.
  Read { stop_skimming: bool },
}

#[cfg(unix)]
impl Parking {
  /// Bytes stay in the pipe until more come: arm the timer if it is not.
  fn park(&mut self, recheck: std::pin::Pin<&mut tokio::time::Sleep>) {
    self.parked = true;
    self.wakes += 1;
    if !self.armed {
      self.armed = true;
      self.wakes_at_arm = self.wakes;
      recheck.reset(Instant::now() + PARKED_RECHECK);
    }
  }

  /// The timer fired.
  fn fired(&mut self, recheck: std::pin::Pin<&mut tokio::time::Sleep>) -> Recheck {
    if self.parked && self.wakes != self.wakes_at_arm {
      // the writer is moving: look again a period later
      self.wakes_at_arm = self.wakes;
      recheck.reset(Instant::now() + PARKED_RECHECK);
      return Recheck::Wait;
    }
    self.armed = false;
    if !self.parked {
      return Recheck::Wait;
    }
    // no wake-up while bytes wait in the pipe: a writer that paused (the
    // bytes are read, as without skimming), or a writer blocked on a pipe
    // whose slots are full of small buffers before it holds `keep` bytes
    // (spliced writes), or a kernel that wakes an edge-triggered reader
    // only on an empty pipe (5.5 to 5.13). The second time, this stream is
    // read as any other.
    self.parked = false;
    self.stalls += 1;
    Recheck::Read {
      stop_skimming: self.stalls >= 2,
    }
  }
}

#[cfg(unix)]
fn grow_pipe(fd: i32) {
  // best effort: a larger pipe means fewer wake-ups for a heavy writer
  platform::grow_pipe(fd, HEAVY_PIPE_SIZE);
}

#[cfg(unix)]
/// Enlarge a pipe to hold a tail of `keep` bytes with room to spare (twice
/// `keep`, at least [`HEAVY_PIPE_SIZE`]); an unprivileged host that may not
/// go that far gets the heavy size. Returns the pipe's size.
fn grow_pipe_for_tail(fd: i32, keep: usize) -> Option<usize> {
  let want = keep
    .saturating_mul(2)
    .clamp(HEAVY_PIPE_SIZE as usize, MAX_SKIM_PIPE);
  match platform::grow_pipe(fd, want as i32) {
    Some(size) if size >= want => Some(size),
    _ => platform::grow_pipe(fd, HEAVY_PIPE_SIZE),
  }
}

#[cfg(unix)]
/// Drop, in the kernel, what pipe `fd` holds beyond its last `keep` bytes;
/// the sink counts them. Returns how many were dropped.
fn skim_pipe<S: OutputSink>(fd: i32, keep: usize, sink: &mut S) -> std::io::Result<u64> {
  let held = platform::pipe_pending(fd)?;
  if held <= keep {
    return Ok(0);
  }
  let n = match platform::discard_from_pipe(fd, held - keep) {
    Ok(n) => n as u64,
    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
    Err(e) => return Err(e),
  };
  sink.skipped(n);
  Ok(n)
}

#[cfg(unix)]
/// Read what is in the pipe right now (non-blocking), bounded; a skimming
/// pump (`skim`: the tail it keeps) first drops what cannot be in the tail.
fn final_drain<S: OutputSink>(
  fd: i32,
  buf: &mut Vec<u8>,
  sink: &mut S,
  skim: Option<usize>,
) -> u64 {
  let mut dropped = 0;
  if let Some(keep) = skim {
    dropped = skim_pipe(fd, keep, sink).unwrap_or(0);
  }
  let mut got = 0usize;
  while got < FINAL_DRAIN_MAX {
    match read_to_sink(fd, buf, sink) {
      Ok(0) | Err(_) => break,
      Ok(n) => got += n,
    }
  }
  dropped + got as u64
}

#[cfg(unix)]
/// One read of `fd` into `sink`: in place when it lends room, else into
/// `buf` and then `write`. Returns the count (`Ok(0)`: end of file).
fn read_to_sink<S: OutputSink>(fd: i32, buf: &mut Vec<u8>, sink: &mut S) -> std::io::Result<usize> {
  if let Some(room) = sink.lend().filter(|r| !r.is_empty()) {
    let n = platform::read_uninit(fd, room)?;
    if n > 0 {
      sink.filled(n);
    }
    return Ok(n);
  }
  buf.clear();
  let n = platform::read_into(fd, buf)?;
  if n > 0 {
    sink.write(&buf[..n]);
  }
  Ok(n)
}
