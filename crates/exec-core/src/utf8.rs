//! UTF-8 helpers: boundary cutting and a streaming decoder that never splits a character.

/// The largest index `<= i` that is a char boundary of `bytes` (treating invalid
/// bytes as single units). Used to cut the head of a buffer.
pub fn floor_boundary(bytes: &[u8], i: usize) -> usize {
  let mut i = i.min(bytes.len());
  if i == bytes.len() {
    // cutting at the end: step back over an incomplete trailing sequence
    return i - incomplete_suffix_len(&bytes[..i]);
  }
  // step back at most 3 continuation bytes
  let mut steps = 0;
  while i > 0 && steps < 3 && is_continuation(bytes[i]) {
    i -= 1;
    steps += 1;
  }
  if is_continuation(bytes[i]) {
    // not UTF-8 here; any cut is as good as another
    return i + steps;
  }
  i
}

/// The smallest index `>= i` that is a char boundary of `bytes`. Used to cut the
/// start of a tail.
pub fn ceil_boundary(bytes: &[u8], i: usize) -> usize {
  let mut i = i.min(bytes.len());
  let start = i;
  while i < bytes.len() && i - start < 3 && is_continuation(bytes[i]) {
    i += 1;
  }
  if i < bytes.len() && is_continuation(bytes[i]) {
    return start;
  }
  i
}

#[inline]
fn is_continuation(b: u8) -> bool {
  b & 0xC0 == 0x80
}

/// How many bytes at the end of `bytes` form the start of a multi-byte character
/// that is not complete yet (0 if the end is complete or not UTF-8 at all).
pub fn incomplete_suffix_len(bytes: &[u8]) -> usize {
  let n = bytes.len();
  // look back at most 3 bytes for a lead byte
  for back in 1..=3.min(n) {
    let b = bytes[n - back];
    if is_continuation(b) {
      continue;
    }
    let need = if b & 0xE0 == 0xC0 {
      2
    } else if b & 0xF0 == 0xE0 {
      3
    } else if b & 0xF8 == 0xF0 {
      4
    } else {
      return 0; // ASCII or invalid lead
    };
    return if back < need { back } else { 0 };
  }
  0
}

/// Decodes a byte stream into strings, carrying an incomplete trailing character
/// over to the next chunk so that no character is split between two strings.
#[derive(Default, Debug)]
pub struct Utf8Decoder {
  carry: Vec<u8>,
  /// Whether any invalid UTF-8 was seen (it is replaced by U+FFFD).
  pub saw_invalid: bool,
}

impl Utf8Decoder {
  pub fn new() -> Self {
    Self::default()
  }

  /// Decode `chunk`; an incomplete character at its end is kept for the next call.
  pub fn decode(&mut self, chunk: &[u8]) -> String {
    let mut text = String::new();
    self.decode_into(chunk, &mut text);
    text
  }

  /// [`Utf8Decoder::decode`], appending to `out` (no string of its own).
  pub fn decode_into(&mut self, chunk: &[u8], out: &mut String) {
    let owned;
    let data: &[u8] = if self.carry.is_empty() {
      chunk
    } else {
      self.carry.extend_from_slice(chunk);
      owned = std::mem::take(&mut self.carry);
      &owned
    };
    let keep = incomplete_suffix_len(data);
    let (now, later) = data.split_at(data.len() - keep);
    match std::str::from_utf8(now) {
      Ok(s) => out.push_str(s),
      Err(_) => {
        self.saw_invalid = true;
        out.push_str(&String::from_utf8_lossy(now));
      }
    }
    if !later.is_empty() {
      self.carry.extend_from_slice(later);
    }
  }

  /// Flush what is carried (an incomplete character at the very end becomes U+FFFD).
  pub fn finish(&mut self) -> String {
    let carry = std::mem::take(&mut self.carry);
    self.lossy(&carry)
  }

  fn lossy(&mut self, bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
      Ok(s) => s.to_owned(),
      Err(_) => {
        self.saw_invalid = true;
        String::from_utf8_lossy(bytes).into_owned()
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn decoder_carries_split_characters() {
    let s = "héllo €uro 😀!";
    let bytes = s.as_bytes();
    for split in 0..bytes.len() {
      let mut d = Utf8Decoder::new();
      let mut out = d.decode(&bytes[..split]);
      out.push_str(&d.decode(&bytes[split..]));
      out.push_str(&d.finish());
      assert_eq!(out, s, "split at {split}");
      assert!(!d.saw_invalid);
    }
  }

  #[test]
  fn decoder_byte_by_byte() {
    let s = "日本語テキスト😀";
    let mut d = Utf8Decoder::new();
    let mut out = String::new();
    for b in s.as_bytes() {
      let piece = d.decode(std::slice::from_ref(b));
      // every piece is whole characters
      out.push_str(&piece);
    }
    out.push_str(&d.finish());
    assert_eq!(out, s);
  }

  #[test]
  fn decoder_flags_invalid() {
    let mut d = Utf8Decoder::new();
    let out = d.decode(b"a\xffb");
    assert_eq!(out, "a\u{FFFD}b");
    assert!(d.saw_invalid);
  }

  #[test]
  fn boundaries() {
    let s = "a€b".as_bytes(); // a, e2 82 ac, b
    assert_eq!(floor_boundary(s, 2), 1);
    assert_eq!(floor_boundary(s, 3), 1);
    assert_eq!(floor_boundary(s, 4), 4);
    assert_eq!(ceil_boundary(s, 2), 4);
    assert_eq!(ceil_boundary(s, 1), 1);
    assert_eq!(floor_boundary(&s[..3], 3), 1);
  }
}
