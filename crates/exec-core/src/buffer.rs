//! A bounded buffer that keeps the head and the tail of a stream.
//!
//! Memory stays at `cap` bytes however much is pushed: the first `cap / 2` bytes
//! are kept as they come, the rest rolls through a ring of the remaining
//! capacity. Rendering cuts both sides on UTF-8 boundaries and puts a marker
//! naming the omitted byte count between them.

use std::collections::VecDeque;

use crate::utf8::{ceil_boundary, floor_boundary};

/// The text that always appears in a truncation marker.
pub const TRUNCATION_MARKER: &str = "[Output truncated]";
/// Upper bound on how far a rendered text may exceed the cap.
pub const MARKER_ALLOWANCE: usize = 50;

#[derive(Debug, Clone)]
pub struct HeadTailBuffer {
  head_cap: usize,
  tail_cap: usize,
  head: Vec<u8>,
  tail: VecDeque<u8>,
  total: u64,
}

/// The rendered content of a [`HeadTailBuffer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
  pub bytes: Vec<u8>,
  pub truncated: bool,
  /// Bytes of the stream that are not in `bytes`.
  pub omitted: u64,
  /// Bytes of `bytes` that are the stream's head (all of them when not
  /// truncated; then comes the marker, then the tail).
  pub head: usize,
}

impl Rendered {
  /// Where byte `offset` of the stream (of `total`) is in `bytes`: a byte
  /// that was omitted is placed after the marker.
  pub fn position(&self, total: u64, offset: u64) -> usize {
    let offset = offset.min(total);
    if !self.truncated || offset <= self.head as u64 {
      return (offset as usize).min(self.bytes.len());
    }
    let marker = HeadTailBuffer::marker(self.omitted).len();
    let tail = (self.bytes.len() - self.head - marker) as u64;
    (self.bytes.len() as u64 - tail.min(total - offset)) as usize
  }
}

impl HeadTailBuffer {
  /// A buffer that holds at most `cap` bytes.
  /// Bytes kept per stream when the caller does not say (1 MiB, the seeds').
  pub const DEFAULT_CAP: usize = 1024 * 1024;

  pub fn new(cap: usize) -> Self {
    let head_cap = cap / 2;
    HeadTailBuffer {
      head_cap,
      tail_cap: cap - head_cap,
      head: Vec::new(),
      tail: VecDeque::new(),
      total: 0,
    }
  }

  pub fn cap(&self) -> usize {
    self.head_cap + self.tail_cap
  }

  /// Total bytes ever pushed.
  pub fn total(&self) -> u64 {
    self.total
  }

  /// Bytes currently held.
  pub fn held(&self) -> usize {
    self.head.len() + self.tail.len()
  }

  /// Whether bytes have been dropped.
  pub fn is_truncated(&self) -> bool {
    self.total > self.held() as u64
  }

  pub fn push(&mut self, mut data: &[u8]) {
    self.total += data.len() as u64;
    if self.head.len() < self.head_cap {
      let n = (self.head_cap - self.head.len()).min(data.len());
      self.head.extend_from_slice(&data[..n]);
      data = &data[n..];
    }
    if data.is_empty() || self.tail_cap == 0 {
      return;
    }
    if data.len() >= self.tail_cap {
      self.tail.clear();
      self.tail.extend(&data[data.len() - self.tail_cap..]);
      return;
    }
    let overflow = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
    if overflow > 0 {
      self.tail.drain(..overflow);
    }
    self.tail.extend(data);
  }

  /// Once the head is full, only the last `tail_cap` bytes of what follows
  /// can still be kept: `Some(tail_cap)`. `None` while the head fills.
  pub fn tail_window(&self) -> Option<usize> {
    (self.head.len() == self.head_cap).then_some(self.tail_cap)
  }

  /// Count `n` bytes of the stream that were dropped unseen. The caller
  /// guarantees what [`Self::tail_window`] asks: the head is full and at
  /// least `tail_cap` more bytes follow them (they will be pushed), so
  /// neither these bytes nor what the tail holds now can be in the final tail.
  pub fn skip(&mut self, n: u64) {
    if n == 0 {
      return;
    }
    debug_assert_eq!(
      self.head.len(),
      self.head_cap,
      "skip before the head is full"
    );
    self.total += n;
    self.tail.clear();
  }

  /// Everything held, head then tail, without marker (contiguous only when not truncated).
  pub fn raw_parts(&self) -> (&[u8], Vec<u8>) {
    let (a, b) = self.tail.as_slices();
    let mut t = Vec::with_capacity(a.len() + b.len());
    t.extend_from_slice(a);
    t.extend_from_slice(b);
    (&self.head, t)
  }

  /// The marker put between head and tail.
  pub fn marker(omitted: u64) -> String {
    format!("\n{TRUNCATION_MARKER} {omitted} bytes omitted\n")
  }

  /// Head + marker + tail, cut on UTF-8 boundaries, at most `cap + 50` bytes long.
  pub fn render(&self) -> Rendered {
    let (head, tail) = self.raw_parts();
    if !self.is_truncated() {
      let mut bytes = head.to_vec();
      bytes.extend_from_slice(&tail);
      return Rendered {
        head: bytes.len(),
        bytes,
        truncated: false,
        omitted: 0,
      };
    }
    let head_end = floor_boundary(head, head.len());
    let mut tail_start = ceil_boundary(&tail, 0);
    let kept = |ts: usize| (head_end + tail.len() - ts) as u64;
    let mut marker = Self::marker(self.total - kept(tail_start));
    // A huge omitted count makes the marker longer than the allowance: give up
    // tail bytes so the whole stays within cap + 50.
    let limit = self.cap() + MARKER_ALLOWANCE;
    while head_end + (tail.len() - tail_start) + marker.len() > limit && tail_start < tail.len() {
      let over = head_end + (tail.len() - tail_start) + marker.len() - limit;
      tail_start = ceil_boundary(&tail, tail_start + over);
      marker = Self::marker(self.total - kept(tail_start));
    }
    let mut bytes = Vec::with_capacity(head_end + marker.len() + tail.len() - tail_start);
    bytes.extend_from_slice(&head[..head_end]);
    bytes.extend_from_slice(marker.as_bytes());
    bytes.extend_from_slice(&tail[tail_start..]);
    Rendered {
      bytes,
      truncated: true,
      omitted: self.total - kept(tail_start),
      head: head_end,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn positions_map_stream_offsets_into_the_rendered_text() {
    let mut b = HeadTailBuffer::new(10);
    b.push(b"0123456789abcdefghij");
    let r = b.render();
    let text = String::from_utf8(r.bytes.clone()).unwrap();
    assert_eq!(r.head, 5);
    assert_eq!(r.position(20, 3), 3);
    // an omitted byte lands after the marker, a tail byte where it is
    let after_marker = text.find("fghij").unwrap();
    assert_eq!(r.position(20, 8), after_marker);
    assert_eq!(r.position(20, 17), after_marker + 2);
    assert_eq!(r.position(20, 20), text.len());
    let whole = HeadTailBuffer::new(100);
    assert_eq!(whole.render().position(0, 0), 0);
  }

  #[test]
  fn small_output_is_kept_whole() {
    let mut b = HeadTailBuffer::new(16);
    b.push(b"hello ");
    b.push(b"world");
    let r = b.render();
    assert_eq!(r.bytes, b"hello world");
    assert!(!r.truncated);
    assert_eq!(b.total(), 11);
  }

  #[test]
  fn exactly_cap_is_not_truncated() {
    let mut b = HeadTailBuffer::new(10);
    b.push(b"0123456789");
    let r = b.render();
    assert_eq!(r.bytes, b"0123456789");
    assert!(!r.truncated);
  }

  #[test]
  fn keeps_head_and_tail() {
    let mut b = HeadTailBuffer::new(10);
    for i in 0..100u8 {
      b.push(&[b'a' + (i % 26)]);
    }
    let r = b.render();
    assert!(r.truncated);
    assert_eq!(r.omitted, 90);
    let s = String::from_utf8(r.bytes).unwrap();
    assert!(s.starts_with("abcde\n[Output truncated] 90 bytes omitted\n"));
    // last five pushed: i = 95..99 -> 'r'..'v'
    assert!(s.ends_with("rstuv"), "{s}");
    assert_eq!(b.held(), 10);
  }

  #[test]
  fn big_chunk_replaces_tail() {
    let mut b = HeadTailBuffer::new(8);
    b.push(&[b'x'; 3]);
    b.push(&[b'y'; 100]);
    b.push(b"zz");
    let r = b.render();
    let s = String::from_utf8(r.bytes).unwrap();
    assert!(s.starts_with("xxxy\n"));
    assert!(s.ends_with("yyzz"));
    assert_eq!(r.omitted, 105 - 8);
  }

  #[test]
  fn skipped_bytes_are_counted_and_clear_the_tail() {
    let mut b = HeadTailBuffer::new(8);
    b.push(b"ab");
    assert_eq!(b.tail_window(), None);
    b.push(b"cdXY");
    assert_eq!(b.tail_window(), Some(4));
    b.skip(100);
    b.push(b"1234");
    let r = b.render();
    assert_eq!(b.total(), 110);
    assert_eq!(r.omitted, 110 - 8);
    assert_eq!(
      String::from_utf8(r.bytes).unwrap(),
      "abcd\n[Output truncated] 102 bytes omitted\n1234"
    );
  }

  #[test]
  fn cuts_on_char_boundaries() {
    let mut b = HeadTailBuffer::new(7);
    b.push("€€€€€€€€€€".as_bytes()); // 30 bytes
    let r = b.render();
    let s = String::from_utf8(r.bytes.clone()).expect("valid utf-8");
    assert!(s.starts_with("€\n"));
    assert!(s.ends_with("\n€"));
    assert_eq!(r.omitted, 30 - 6);
  }

  #[test]
  fn stays_within_cap_plus_allowance() {
    for cap in [0usize, 1, 2, 5, 20, 64, 1000] {
      let mut b = HeadTailBuffer::new(cap);
      for _ in 0..1000 {
        b.push(&[b'q'; 997]);
      }
      let r = b.render();
      assert!(
        r.bytes.len() <= cap + MARKER_ALLOWANCE,
        "cap {cap}: {}",
        r.bytes.len()
      );
      assert!(String::from_utf8_lossy(&r.bytes).contains(TRUNCATION_MARKER));
    }
  }
}
