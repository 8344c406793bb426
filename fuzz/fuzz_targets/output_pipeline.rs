//! Fuzz what every byte of a child's output goes through: the head+tail
//! buffer, the UTF-8 decoder, sanitizing and tail truncation. Any panic, or a
//! broken invariant, is a finding.
#![no_main]

use exec_core::buffer::{HeadTailBuffer, MARKER_ALLOWANCE};
use exec_core::command::sanitize::{sanitize, sanitize_bytes};
use exec_core::command::truncate::{truncate_head_tail, truncate_tail, OutputLimits, TruncationMode};
use exec_core::utf8::Utf8Decoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
  if data.len() < 3 {
    return;
  }
  let (params, body) = data.split_at(3);
  let cap = params[0] as usize * 4;
  let max_lines = params[1] as usize % 40 + 1;
  let max_bytes = params[2] as usize * 2 + 1;

  let mut buf = HeadTailBuffer::new(cap);
  let mut dec = Utf8Decoder::new();
  let mut decoded = String::new();
  for chunk in body.chunks(params[1] as usize % 13 + 1) {
    buf.push(chunk);
    decoded.push_str(&dec.decode(chunk));
  }
  decoded.push_str(&dec.finish());
  assert_eq!(buf.total(), body.len() as u64);
  assert!(buf.render().bytes.len() <= cap + MARKER_ALLOWANCE);
  assert_eq!(decoded, String::from_utf8_lossy(body));

  let clean = sanitize_bytes(body);
  assert!(!clean.contains('\x1b'));
  assert_eq!(sanitize(&clean), clean);

  let limits = OutputLimits {
    max_lines,
    max_bytes,
    mode: TruncationMode::Tail,
  };
  let (kept, t) = truncate_tail(&clean, limits);
  assert!(clean.ends_with(kept));
  // within the byte limit, except the documented floor: a line cut by bytes
  // keeps at least its last character (and its newline); a line of one
  // character is then kept whole, and nothing is reported cut
  let one_char = kept.strip_suffix('\n').unwrap_or(kept).chars().count() == 1;
  let floor = (t.last_line_partial || t.truncated_by.is_none()) && one_char;
  if t.truncated_by.is_some() {
    assert!(kept.len() < clean.len(), "reported cut, kept all: {kept:?}");
  }
  assert!(kept.len() <= max_bytes || floor, "{kept:?} max_bytes {max_bytes}");
  assert_eq!(t.total_bytes, clean.len() as u64);

  // head+tail: the kept head is a prefix, the kept tail a suffix, and the
  // counts add up to what was returned (the marker line is not counted)
  let (both, h) = truncate_head_tail(&clean, limits);
  assert_eq!(h.total_bytes, clean.len() as u64);
  if h.truncated_by.is_none() {
    assert_eq!(both, clean);
  } else {
    let head_len = clean
      .split_inclusive('\n')
      .take(h.head_lines as usize)
      .map(str::len)
      .sum::<usize>();
    assert!(both.starts_with(&clean[..head_len]));
    assert!(h.output_bytes as usize <= both.len());
    let tail_len = h.output_bytes as usize - head_len;
    assert!(clean.ends_with(&both[both.len() - tail_len..]));
    assert!(h.head_lines as usize <= max_lines / 2);
    assert!(head_len <= max_bytes / 2);
  }
});
