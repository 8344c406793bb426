//! The output of one execution: each stream kept head+tail (bounded however
//! much the worker writes) and forwarded as it comes to a sink.

use tokio::time::Instant;

use crate::buffer::HeadTailBuffer;
use crate::process::supervise::OutputSink;

/// A stream of one execution: captured head+tail, and forwarded to a sink
/// (a streaming callback, or [`crate::process::supervise::Discard`]).
pub(crate) struct Capture<S: OutputSink> {
  pub buf: HeadTailBuffer,
  pub sink: S,
}

impl<S: OutputSink> Capture<S> {
  pub fn new(cap: usize, sink: S) -> Self {
    Capture {
      buf: HeadTailBuffer::new(cap),
      sink,
    }
  }
}

impl<S: OutputSink> OutputSink for Capture<S> {
  fn write(&mut self, data: &[u8]) {
    self.buf.push(data);
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
}

impl Streams {
  /// Finish both sinks (what they still hold is delivered), then render.
  pub async fn finish<O: OutputSink, E: OutputSink>(
    mut out: Capture<O>,
    mut err: Capture<E>,
  ) -> Streams {
    out.finish().await;
    err.finish().await;
    let (stdout, t1) = rendered_text(&out.buf);
    let (stderr, t2) = rendered_text(&err.buf);
    Streams {
      stdout,
      stderr,
      truncated: t1 || t2,
      stdout_bytes: out.buf.total(),
      stderr_bytes: err.buf.total(),
    }
  }
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
