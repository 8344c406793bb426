//! The retained state of one managed process: head+tail buffers per stream,
//! the interleaved output log that `read` serves, the sequence counter shared
//! by all events, and the ordered outbox of events waiting for the consumer.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::buffer::HeadTailBuffer;
use crate::error::ExecError;

/// Which stream a chunk of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
  Stdout,
  Stderr,
  /// The single terminal stream of a PTY process.
  Pty,
}

impl Stream {
  pub fn as_str(&self) -> &'static str {
    match self {
      Stream::Stdout => "stdout",
      Stream::Stderr => "stderr",
      Stream::Pty => "pty",
    }
  }
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitInfo {
  /// The exit code; 128+N when signal N ended the process.
  pub exit_code: i32,
  /// The signal that ended the process (`SIGKILL`), if any.
  pub signal: Option<String>,
  /// Why it was stopped, when a resource limit stopped it (ELIMIT).
  pub error: Option<ExecError>,
  /// A sandboxed process: how it was applied, and whether a denial likely
  /// explains its failure (judged from the retained output).
  pub sandbox: Option<crate::process::sandbox::SandboxReport>,
}

/// What happened to a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
  Started {
    pid: u32,
  },
  Output {
    stream: Stream,
    data: Vec<u8>,
  },
  /// Boxed: it is far larger than the output events that make up most of
  /// the queue.
  Exited(Box<ExitInfo>),
  /// After the exit, once both streams reached EOF or the drain ran out: no
  /// more output will come.
  Closed,
  Failed {
    error: ExecError,
  },
}

impl EventKind {
  pub fn name(&self) -> &'static str {
    match self {
      EventKind::Started { .. } => "started",
      EventKind::Output { .. } => "output",
      EventKind::Exited(_) => "exited",
      EventKind::Closed => "closed",
      EventKind::Failed { .. } => "failed",
    }
  }
}

/// An event of one process. `seq` grows by one per event of that process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEvent {
  pub process_id: Arc<str>,
  pub seq: u64,
  pub kind: EventKind,
}

/// Where the events of a process go. Bounded: a slow consumer slows the
/// process down (its pipe fills) instead of growing memory.
pub type EventSender = mpsc::Sender<ProcessEvent>;

/// One chunk of the interleaved output log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogChunk {
  pub seq: u64,
  pub stream: Stream,
  pub data: Vec<u8>,
}

pub(crate) struct State {
  pub id: Arc<str>,
  pub next_seq: u64,
  pub stdout: HeadTailBuffer,
  pub stderr: HeadTailBuffer,
  pub terminal: HeadTailBuffer,
  log: VecDeque<LogChunk>,
  log_bytes: usize,
  log_cap: usize,
  /// The highest seq whose chunk was dropped (or cut) from the log.
  log_lost_seq: u64,
  outbox: VecDeque<ProcessEvent>,
  events: Option<EventSender>,
  /// Events are queued but not sent until the `started` event is in place.
  held: bool,
  pub exit: Option<ExitInfo>,
  pub closed: bool,
}

impl State {
  pub fn new(id: Arc<str>, pty: bool, cap: usize, events: Option<EventSender>) -> Self {
    let (pipe_cap, pty_cap) = if pty { (0, cap) } else { (cap, 0) };
    State {
      id,
      // seq 1 is the `started` event
      next_seq: 2,
      stdout: HeadTailBuffer::new(pipe_cap),
      stderr: HeadTailBuffer::new(pipe_cap),
      terminal: HeadTailBuffer::new(pty_cap),
      log: VecDeque::new(),
      log_bytes: 0,
      log_cap: cap,
      log_lost_seq: 0,
      outbox: VecDeque::new(),
      events,
      held: true,
      exit: None,
      closed: false,
    }
  }

  fn emit(&mut self, kind: EventKind) -> u64 {
    let seq = self.next_seq;
    self.next_seq += 1;
    if self.events.is_some() {
      self.outbox.push_back(ProcessEvent {
        process_id: self.id.clone(),
        seq,
        kind,
      });
      self.flush_nonblocking();
    }
    seq
  }

  /// Put the `started` event (seq 1) first and let events flow.
  pub fn release_started(&mut self, pid: u32) {
    if self.events.is_some() {
      self.outbox.push_front(ProcessEvent {
        process_id: self.id.clone(),
        seq: 1,
        kind: EventKind::Started { pid },
      });
    }
    self.held = false;
    self.flush_nonblocking();
  }

  pub fn record_output(&mut self, stream: Stream, data: &[u8]) {
    if data.is_empty() {
      return;
    }
    match stream {
      Stream::Stdout => self.stdout.push(data),
      Stream::Stderr => self.stderr.push(data),
      Stream::Pty => self.terminal.push(data),
    }
    let seq = if self.events.is_some() {
      self.emit(EventKind::Output {
        stream,
        data: data.to_vec(),
      })
    } else {
      self.next_seq += 1;
      self.next_seq - 1
    };
    let mut chunk = data.to_vec();
    if chunk.len() > self.log_cap {
      // keep the newest bytes of an oversized chunk
      chunk.drain(..chunk.len() - self.log_cap);
      self.log_lost_seq = self.log_lost_seq.max(seq);
    }
    self.log_bytes += chunk.len();
    self.log.push_back(LogChunk {
      seq,
      stream,
      data: chunk,
    });
    while self.log_bytes > self.log_cap {
      let Some(old) = self.log.pop_front() else {
        break;
      };
      self.log_bytes -= old.data.len();
      self.log_lost_seq = self.log_lost_seq.max(old.seq);
    }
  }

  pub fn record_exit(&mut self, exit: ExitInfo) {
    self.exit = Some(exit.clone());
    self.emit(EventKind::Exited(Box::new(exit)));
    self.emit(EventKind::Closed);
    self.closed = true;
  }

  /// Send what the channel takes now, in order; keep the rest.
  fn flush_nonblocking(&mut self) {
    if self.held {
      return;
    }
    let Some(tx) = &self.events else {
      self.outbox.clear();
      return;
    };
    while let Some(ev) = self.outbox.pop_front() {
      match tx.try_send(ev) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(ev)) => {
          self.outbox.push_front(ev);
          break;
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {
          self.events = None;
          self.outbox.clear();
          break;
        }
      }
    }
  }

  /// The sender to wait on when events are pending.
  pub fn pending_sender(&self) -> Option<EventSender> {
    if self.held || self.outbox.is_empty() {
      return None;
    }
    self.events.clone()
  }

  /// Called with a reserved slot: send the first pending event through it.
  pub fn send_with(&mut self, permit: mpsc::OwnedPermit<ProcessEvent>) {
    if let Some(ev) = self.outbox.pop_front() {
      permit.send(ev);
    }
    self.flush_nonblocking();
  }

  /// The consumer is gone: drop pending and future events.
  pub fn consumer_gone(&mut self) {
    self.events = None;
    self.outbox.clear();
  }

  /// Chunks after `after_seq`, at most `max_bytes` (the first chunk is always
  /// whole), and the seq to pass next time.
  pub fn read(&self, after_seq: u64, max_bytes: usize) -> ReadResult {
    let mut chunks = Vec::new();
    let mut bytes = 0usize;
    let mut last_seq = self.next_seq - 1;
    for c in self.log.iter().filter(|c| c.seq > after_seq) {
      if !chunks.is_empty() && bytes + c.data.len() > max_bytes {
        last_seq = chunks.last().map_or(after_seq, |c: &LogChunk| c.seq);
        break;
      }
      bytes += c.data.len();
      chunks.push(c.clone());
    }
    ReadResult {
      chunks,
      last_seq: last_seq.max(after_seq),
      truncated: self.log_lost_seq > after_seq,
      exit: self.exit.clone(),
      closed: self.closed,
    }
  }

  /// The retained output as text, stderr first (for the sandbox's judge).
  pub fn retained_text(&self) -> [String; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for c in &self.log {
      out[(c.stream != Stream::Stderr) as usize].extend_from_slice(&c.data);
    }
    out.map(|b| String::from_utf8_lossy(&b).into_owned())
  }

  /// Whether a `read(after_seq)` has anything to return right now.
  pub fn has_news(&self, after_seq: u64) -> bool {
    self.closed || self.exit.is_some() || self.log.back().is_some_and(|c| c.seq > after_seq)
  }
}

/// The answer to `read`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
  /// Output chunks after `afterSeq`, in order.
  pub chunks: Vec<LogChunk>,
  /// Pass this as `afterSeq` next time.
  pub last_seq: u64,
  /// Some output after `afterSeq` was dropped from the log (over the cap)
  /// before it was read.
  pub truncated: bool,
  pub exit: Option<ExitInfo>,
  pub closed: bool,
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn log_is_bounded_and_ordered() {
    let mut s = State::new("p".into(), false, 10, None);
    s.release_started(1);
    for i in 0..5u8 {
      s.record_output(Stream::Stdout, &[b'a' + i; 4]);
    }
    // 20 bytes pushed, 10 kept as the last whole chunks: 2 chunks of 4
    let r = s.read(0, usize::MAX);
    assert_eq!(r.chunks.len(), 2);
    assert!(r.truncated);
    assert_eq!(r.chunks[0].data, b"dddd");
    assert_eq!(r.chunks[1].data, b"eeee");
    let r2 = s.read(r.chunks[0].seq, usize::MAX);
    assert_eq!(r2.chunks.len(), 1);
    assert!(!r2.truncated);
    assert_eq!(r2.last_seq, r.last_seq);
  }

  #[test]
  fn oversized_chunk_keeps_its_tail() {
    let mut s = State::new("p".into(), true, 4, None);
    s.record_output(Stream::Pty, b"0123456789");
    let r = s.read(0, usize::MAX);
    assert_eq!(r.chunks[0].data, b"6789");
    assert!(r.truncated);
  }

  #[test]
  fn max_bytes_stops_early_but_returns_one() {
    let mut s = State::new("p".into(), false, 100, None);
    s.record_output(Stream::Stdout, b"aaaa");
    s.record_output(Stream::Stderr, b"bbbb");
    let r = s.read(0, 2);
    assert_eq!(r.chunks.len(), 1);
    assert_eq!(r.last_seq, r.chunks[0].seq);
    let r = s.read(r.last_seq, 2);
    assert_eq!(r.chunks[0].data, b"bbbb");
    assert_eq!(r.chunks[0].stream, Stream::Stderr);
  }

  #[tokio::test]
  async fn events_keep_order_with_started_first() {
    let (tx, mut rx) = mpsc::channel(16);
    let mut s = State::new("p".into(), false, 100, Some(tx));
    s.record_output(Stream::Stdout, b"early");
    s.release_started(42);
    s.record_exit(ExitInfo {
      sandbox: None,
      exit_code: 0,
      signal: None,
      error: None,
    });
    let mut seqs = Vec::new();
    let mut names = Vec::new();
    while let Ok(ev) = rx.try_recv() {
      seqs.push(ev.seq);
      names.push(ev.kind.name());
    }
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert_eq!(names, vec!["started", "output", "exited", "closed"]);
  }
}
