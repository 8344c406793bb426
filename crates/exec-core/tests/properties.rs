//! Property tests for the pieces every byte of output goes through: the
//! head+tail buffer, UTF-8 boundary cutting and decoding, sanitizing and tail
//! truncation.

use exec_core::buffer::{HeadTailBuffer, MARKER_ALLOWANCE, TRUNCATION_MARKER};
use exec_core::command::sanitize::{sanitize, sanitize_bytes};
use exec_core::command::truncate::{truncate_tail, OutputLimits};
use exec_core::utf8::{ceil_boundary, floor_boundary, Utf8Decoder};
use proptest::prelude::*;

/// Text that mixes ASCII, multi-byte characters, newlines and escapes.
fn texty() -> impl Strategy<Value = String> {
  prop::collection::vec(
    prop_oneof![
      "[a-z ]{0,8}",
      Just("\n".to_owned()),
      Just("\r\n".to_owned()),
      Just("\r".to_owned()),
      Just("é€😀".to_owned()),
      Just("\x1b[31m".to_owned()),
      Just("\x1b]0;title\x07".to_owned()),
      Just("\t".to_owned()),
      Just("\x00\x07\x08".to_owned()),
    ],
    0..60,
  )
  .prop_map(|v| v.concat())
}

proptest! {
  #![proptest_config(ProptestConfig::with_cases(512))]

  /// Whatever is pushed in whatever chunks, the buffer holds at most `cap`
  /// bytes, renders within cap + 50, counts every byte, and keeps the exact
  /// head and tail of the stream.
  #[test]
  fn head_tail_buffer(
    data in prop::collection::vec(any::<u8>(), 0..4000),
    cuts in prop::collection::vec(0usize..4000, 0..20),
    cap in 0usize..600,
  ) {
    let mut b = HeadTailBuffer::new(cap);
    let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
    cuts.sort_unstable();
    let mut last = 0;
    for c in cuts.into_iter().chain([data.len()]) {
      b.push(&data[last..c]);
      last = c;
      prop_assert!(b.held() <= cap);
    }
    prop_assert_eq!(b.total(), data.len() as u64);
    let r = b.render();
    prop_assert!(r.bytes.len() <= cap + MARKER_ALLOWANCE);
    if data.len() <= cap {
      prop_assert!(!r.truncated);
      prop_assert_eq!(&r.bytes, &data);
    } else {
      prop_assert!(r.truncated);
      let marker = HeadTailBuffer::marker(r.omitted);
      let at = r.bytes.windows(marker.len()).position(|w| w == marker.as_bytes());
      prop_assert!(at.is_some(), "marker present");
      let at = at.unwrap();
      let (head, tail) = (&r.bytes[..at], &r.bytes[at + marker.len()..]);
      prop_assert!(data.starts_with(head));
      prop_assert!(data.ends_with(tail));
      prop_assert_eq!(r.omitted, (data.len() - head.len() - tail.len()) as u64);
    }
  }

  /// Valid UTF-8 in, valid UTF-8 out, with the marker, whatever the cap.
  #[test]
  fn head_tail_buffer_keeps_utf8(text in texty(), cap in 0usize..200) {
    let mut b = HeadTailBuffer::new(cap);
    for chunk in text.as_bytes().chunks(7) {
      b.push(chunk);
    }
    let r = b.render();
    let s = String::from_utf8(r.bytes);
    prop_assert!(s.is_ok());
    if r.truncated {
      prop_assert!(s.unwrap().contains(TRUNCATION_MARKER));
    }
  }

  /// Boundaries are boundaries, and move at most 3 bytes.
  #[test]
  fn boundaries(text in texty(), i in 0usize..400) {
    let b = text.as_bytes();
    let f = floor_boundary(b, i);
    let c = ceil_boundary(b, i);
    prop_assert!(text.is_char_boundary(f));
    prop_assert!(text.is_char_boundary(c));
    prop_assert!(f <= i.min(b.len()) && i.min(b.len()) - f <= 3);
    prop_assert!(c >= i.min(b.len()) && c - i.min(b.len()) <= 3);
  }

  /// Any chunking decodes to the same string, never splitting a character.
  #[test]
  fn decoder_any_chunking(text in texty(), sizes in prop::collection::vec(1usize..9, 1..50)) {
    let bytes = text.as_bytes();
    let mut d = Utf8Decoder::new();
    let mut out = String::new();
    let mut at = 0;
    for s in sizes.iter().cycle() {
      if at >= bytes.len() { break; }
      let end = (at + s).min(bytes.len());
      out.push_str(&d.decode(&bytes[at..end]));
      at = end;
    }
    out.push_str(&d.finish());
    prop_assert_eq!(out, text);
    prop_assert!(!d.saw_invalid);
  }

  /// Sanitized text has no escapes and no control bytes but tab, newline and
  /// carriage return, no CRLF, and sanitizing twice changes nothing.
  #[test]
  fn sanitize_is_clean_and_idempotent(text in texty(), raw in prop::collection::vec(any::<u8>(), 0..300)) {
    for s in [sanitize(&text), sanitize_bytes(&raw)] {
      prop_assert!(!s.contains("\r\n"));
      prop_assert!(s.chars().all(|c| c >= ' ' || c == '\t' || c == '\n' || c == '\r'), "{:?}", s);
      prop_assert!(!s.contains('\x1b'));
      prop_assert_eq!(sanitize(&s), s.clone());
    }
    // plain printable text passes unchanged
    let plain: String = text.chars().filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '\n').collect();
    prop_assert_eq!(sanitize(&plain), plain);
  }

  /// Tail truncation keeps a suffix within both limits, reports it truly, and
  /// cuts on character boundaries.
  #[test]
  fn truncate_tail_properties(text in texty(), max_lines in 1usize..30, max_bytes in 1usize..300) {
    let (kept, t) = truncate_tail(&text, OutputLimits { max_lines, max_bytes, ..Default::default() });
    prop_assert!(text.ends_with(kept));
    // within the byte limit, except the documented floor: a line cut by
    // bytes keeps at least its last character (and its newline); a line of
    // one character is then kept whole, and nothing is reported cut
    let floor = {
      let body = kept.strip_suffix('\n').unwrap_or(kept);
      (t.last_line_partial || t.truncated_by.is_none()) && body.chars().count() == 1
    };
    prop_assert!(kept.len() <= max_bytes || floor, "{:?} max_bytes {}", kept, max_bytes);
    prop_assert_eq!(t.output_bytes, kept.len() as u64);
    prop_assert_eq!(t.total_bytes, text.len() as u64);
    prop_assert!(t.output_lines as usize <= max_lines);
    prop_assert!(t.output_lines <= t.total_lines);
    if t.truncated_by.is_none() {
      prop_assert_eq!(kept, text.as_str());
    } else {
      prop_assert!(kept.len() < text.len());
    }
  }
}
