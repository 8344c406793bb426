//! The output of one execution: each stream kept head+tail (bounded however
//! much the worker writes) and forwarded as it comes to a sink; for a driver
//! session also the order in which output and display bundles came.
//!
//! The order of a cell's outputs comes from the driver when its counts are
//! exact: its stdout and stderr count what they write, and the driver sends
//! where each bundle was made (`at`, bytes of stdout and stderr written by
//! then) and, at the end, the runs of its writes (`runs`: which stream, up to
//! which byte) and the totals (`wrote`). When a total equals what was read,
//! that stream's count is exact. Else (a child process or a raw
//! `write(1, …)` wrote beside the driver's streams) the order is the one the
//! output and the bundles were read in.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::buffer::HeadTailBuffer;
use crate::process::supervise::OutputSink;

/// stdout (0) or stderr (1).
pub(crate) type StreamIx = usize;

/// A cell's output in the order it came, as ranges of its `stdout` /
/// `stderr` text and indices into its `displays`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputPiece {
  Stdout(Range<usize>),
  Stderr(Range<usize>),
  Display(usize),
}

/// A piece in stream offsets.
enum Raw {
  Display(usize),
  Stream(StreamIx, Range<u64>),
}

#[derive(Default)]
struct OrderState {
  /// Runs of one stream, each up to an offset of that stream.
  runs: Vec<(StreamIx, u64)>,
  totals: [u64; 2],
  /// Per bundle: the stream offsets when it was read, and the driver's own.
  displays: Vec<([u64; 2], Option<[u64; 2]>)>,
  /// The driver's count of the bytes it wrote during the cell.
  wrote: Option<[u64; 2]>,
  /// The driver's runs of writes (stream, up to which byte of it).
  driver_runs: Option<Vec<(StreamIx, u64)>>,
}

/// The order of one cell's outputs, shared by its two captures and its
/// bundles.
#[derive(Clone, Default)]
pub(crate) struct Order(Arc<Mutex<OrderState>>);

impl Order {
  fn with<T>(&self, f: impl FnOnce(&mut OrderState) -> T) -> T {
    f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
  }

  fn stream(&self, s: StreamIx, total: u64) {
    self.with(|o| {
      o.totals[s] = total;
      match o.runs.last_mut() {
        Some((last, end)) if *last == s => *end = total,
        _ => o.runs.push((s, total)),
      }
    })
  }

  /// A bundle came; `at`: the driver's stream offsets when it was made.
  pub fn display(&self, at: Option<[u64; 2]>) {
    self.with(|o| {
      let arrived = o.totals;
      o.displays.push((arrived, at))
    })
  }

  /// The driver's count of what it wrote during the cell, and its runs.
  pub fn wrote(&self, wrote: Option<[u64; 2]>, runs: Option<Vec<(StreamIx, u64)>>) {
    self.with(|o| {
      o.wrote = wrote;
      o.driver_runs = runs.filter(|r| r.iter().all(|&(s, _)| s < 2));
    })
  }

  /// The pieces, in stream offsets.
  fn raw_pieces(&self, totals: [u64; 2]) -> Vec<Raw> {
    self.with(|o| {
      let exact = |s: usize| o.wrote.is_some_and(|w| w[s] == totals[s]);
      let targets: Vec<[u64; 2]> = o
        .displays
        .iter()
        .map(|&(arrived, at)| {
          let mut t = arrived;
          for s in 0..2 {
            if let (true, Some(at)) = (exact(s), at) {
              t[s] = at[s].min(totals[s]);
            }
          }
          t
        })
        .collect();
      let mut runs = match &o.driver_runs {
        Some(r) if exact(0) && exact(1) => r.clone(),
        _ => o.runs.clone(),
      };
      for (s, total) in totals.iter().enumerate() {
        runs.push((s, *total));
      }
      let mut pos = [0u64; 2];
      let mut out = Vec::new();
      let mut next = 0;
      for (s, end) in runs {
        let other = 1 - s;
        while next < targets.len() && targets[next][other] <= pos[other] && targets[next][s] <= end
        {
          let split = targets[next][s].max(pos[s]);
          if split > pos[s] {
            out.push(Raw::Stream(s, pos[s]..split));
            pos[s] = split;
          }
          out.push(Raw::Display(next));
          next += 1;
        }
        if end > pos[s] {
          out.push(Raw::Stream(s, pos[s]..end));
          pos[s] = end;
        }
      }
      out.extend((next..targets.len()).map(Raw::Display));
      out
    })
  }
}

/// A stream of one execution: captured head+tail, and forwarded to a sink
/// (a streaming callback, or [`crate::process::supervise::Discard`]).
pub(crate) struct Capture<S: OutputSink> {
  pub buf: HeadTailBuffer,
  pub sink: S,
  /// The cell's order, and which stream this is.
  order: Option<(Order, StreamIx)>,
}

impl<S: OutputSink> Capture<S> {
  pub fn new(cap: usize, sink: S) -> Self {
    Capture {
      buf: HeadTailBuffer::new(cap),
      sink,
      order: None,
    }
  }

  /// Record in `order` when this stream (0 stdout, 1 stderr) had output.
  pub fn ordered(mut self, order: &Order, stream: StreamIx) -> Self {
    self.order = Some((order.clone(), stream));
    self
  }
}

impl<S: OutputSink> OutputSink for Capture<S> {
  fn write(&mut self, data: &[u8]) {
    self.buf.push(data);
    if let Some((order, s)) = &self.order {
      order.stream(*s, self.buf.total());
    }
    self.sink.write(data);
  }
  fn next_tick(&self) -> Option<Instant> {
    self.sink.next_tick()
  }
  fn tick(&mut self) {
    self.sink.tick()
  }
  async fn ready(&mut self) {
    self.sink.ready().await
  }
  async fn finish(&mut self) {
    self.sink.finish().await
  }
}

/// The captured streams of one execution.
pub(crate) struct Streams {
  pub stdout: String,
  pub stderr: String,
  pub truncated: bool,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// With an [`Order`]: the outputs in the order they came.
  pub pieces: Vec<OutputPiece>,
}

impl Streams {
  /// Finish both sinks (what they still hold is delivered), then render.
  pub async fn finish<O: OutputSink, E: OutputSink>(
    mut out: Capture<O>,
    mut err: Capture<E>,
  ) -> Streams {
    out.finish().await;
    err.finish().await;
    let bufs = [&out.buf, &err.buf];
    let (texts, pieces) = match &out.order {
      Some((order, _)) => ordered_texts(order, bufs),
      None => (bufs.map(|b| rendered_text(b).0), Vec::new()),
    };
    let [stdout, stderr] = texts;
    Streams {
      stdout,
      stderr,
      truncated: out.buf.is_truncated() || err.buf.is_truncated(),
      stdout_bytes: out.buf.total(),
      stderr_bytes: err.buf.total(),
      pieces,
    }
  }
}

/// Both texts, made piece by piece (each piece cut on a UTF-8 boundary), and
/// the pieces as ranges of them.
fn ordered_texts(order: &Order, bufs: [&HeadTailBuffer; 2]) -> ([String; 2], Vec<OutputPiece>) {
  let totals = bufs.map(|b| b.total());
  let rendered = bufs.map(|b| b.render());
  let mut texts = [String::new(), String::new()];
  let mut done = [0usize; 2];
  let mut pieces = Vec::new();
  for p in order.raw_pieces(totals) {
    let (s, range) = match p {
      Raw::Display(i) => {
        pieces.push(OutputPiece::Display(i));
        continue;
      }
      Raw::Stream(s, range) => (s, range),
    };
    let r = &rendered[s];
    let end = crate::utf8::floor_boundary(&r.bytes, r.position(totals[s], range.end));
    let end = if range.end == totals[s] {
      r.bytes.len()
    } else {
      end
    };
    if end <= done[s] {
      continue;
    }
    let from = texts[s].len();
    texts[s].push_str(&String::from_utf8_lossy(&r.bytes[done[s]..end]));
    done[s] = end;
    let at = from..texts[s].len();
    pieces.push(if s == 0 {
      OutputPiece::Stdout(at)
    } else {
      OutputPiece::Stderr(at)
    });
  }
  (texts, pieces)
}

/// Convert the captured streams.
pub(crate) fn rendered_text(buf: &HeadTailBuffer) -> (String, bool) {
  let r = buf.render();
  (String::from_utf8_lossy(&r.bytes).into_owned(), r.truncated)
}

/// Cap a result text at `cap` bytes, head and tail.
pub(crate) fn cap_text(text: String, cap: usize) -> String {
  if text.len() <= cap {
    return text;
  }
  let mut b = HeadTailBuffer::new(cap);
  b.push(text.as_bytes());
  rendered_text(&b).0
}
