//! Tail truncation: keep the last complete lines that fit within a line limit
//! and a byte limit, whichever is hit first. Errors and results are at the end
//! of a command's output, so the end is what a model needs. The head+tail
//! mode ([`TruncationMode::HeadTail`]) keeps the first lines too (a
//! compiler's first error is at the top), with a marker line of what was cut.

/// Which part of a long output is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TruncationMode {
  /// The last lines (the default).
  #[default]
  Tail,
  /// The first lines within half of each limit, the last lines within the
  /// rest, and between them a marker of what was cut.
  HeadTail,
}

impl TruncationMode {
  /// The name callers give: `tail`, `head_tail`.
  pub fn as_str(&self) -> &'static str {
    match self {
      TruncationMode::Tail => "tail",
      TruncationMode::HeadTail => "head_tail",
    }
  }
}

impl std::str::FromStr for TruncationMode {
  type Err = crate::error::ExecError;
  fn from_str(s: &str) -> Result<Self, Self::Err> {
    match s {
      "tail" => Ok(TruncationMode::Tail),
      "head_tail" => Ok(TruncationMode::HeadTail),
      other => Err(crate::error::ExecError::invalid(format!(
        "must be 'tail' or 'head_tail', got '{other}'"
      ))),
    }
  }
}

/// The two limits of what is shown, and which part is kept: what the
/// truncation takes (`truncateTail`, a command's answer, an interactive
/// command's). A command's spec holds the bytes as its `run.max_output_bytes`
/// and makes these with [`CommandSpec::limits`](super::CommandSpec::limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
  pub max_lines: usize,
  pub max_bytes: usize,
  pub mode: TruncationMode,
}

pub const DEFAULT_MAX_LINES: usize = 2000;
/// A command's answer ([`RunOptions::command`](crate::process::RunOptions::command)'s
/// cap), and `truncateTail`'s.
pub const DEFAULT_MAX_BYTES: usize = crate::process::RunOptions::COMMAND_OUTPUT_BYTES;

impl Default for OutputLimits {
  fn default() -> Self {
    OutputLimits {
      max_lines: DEFAULT_MAX_LINES,
      max_bytes: DEFAULT_MAX_BYTES,
      mode: TruncationMode::Tail,
    }
  }
}

/// Which limit cut the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
  Lines,
  Bytes,
}

impl TruncatedBy {
  pub fn as_str(&self) -> &'static str {
    match self {
      TruncatedBy::Lines => "lines",
      TruncatedBy::Bytes => "bytes",
    }
  }
}

/// What was kept of what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Truncation {
  /// Lines of the whole stream (a last line without `\n` counts).
  pub total_lines: u64,
  /// Bytes of the whole stream.
  pub total_bytes: u64,
  pub output_lines: u64,
  pub output_bytes: u64,
  /// `None` when nothing was cut.
  pub truncated_by: Option<TruncatedBy>,
  /// The first kept line is only the tail of a line longer than `max_bytes`.
  pub last_line_partial: bool,
  /// Head+tail: how many of `output_lines` are the first lines (0: only the
  /// tail was kept).
  pub head_lines: u64,
}

impl Truncation {
  pub fn truncated(&self) -> bool {
    self.truncated_by.is_some()
  }

  /// Nothing cut: the output is the whole input.
  pub fn whole(lines: u64, bytes: u64) -> Self {
    Truncation {
      total_lines: lines,
      total_bytes: bytes,
      output_lines: lines,
      output_bytes: bytes,
      truncated_by: None,
      last_line_partial: false,
      head_lines: 0,
    }
  }

  /// Lines cut between the head and the tail.
  pub fn omitted_lines(&self) -> u64 {
    self.total_lines.saturating_sub(self.output_lines)
  }
}

/// Number of `\n` in `bytes`. Counted a word at a time (SWAR), so that it
/// stays fast in unoptimized builds too: every byte of a command's output
/// passes through here.
pub fn count_newlines(bytes: &[u8]) -> u64 {
  const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
  const HIGH: u64 = 0x8080_8080_8080_8080;
  const NL: u64 = 0x0a0a_0a0a_0a0a_0a0a;
  let naive = |s: &[u8]| s.iter().filter(|&&b| b == b'\n').count() as u64;
  // SAFETY: every bit pattern is a valid u64
  let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
  let mut n = naive(head) + naive(tail);
  // plain indexing and `inline(always)` arithmetic: no calls in debug builds
  let mut i = 0;
  while i < words.len() {
    // a byte of `w` is zero where the input byte is '\n'
    let w = words[i] ^ NL;
    // high bit of each byte set iff that byte of `w` is non-zero
    let nonzero = (w & LOW7).wrapping_add(LOW7) | w;
    n += (!nonzero & HIGH).count_ones() as u64;
    i += 1;
  }
  n
}

/// Lines of a text: its newlines, plus one for a last line without `\n`.
pub fn count_lines(bytes: &[u8]) -> u64 {
  count_newlines(bytes) + u64::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// Keep the tail of `text` within `limits`. Works backwards from the end,
/// collecting complete lines until one more would break a limit. If the very
/// last line alone is longer than `max_bytes`, its last `max_bytes` bytes are
/// kept, cut on a character boundary (`last_line_partial`).
pub fn truncate_tail(text: &str, limits: OutputLimits) -> (&str, Truncation) {
  let b = text.as_bytes();
  let total_bytes = b.len() as u64;
  let total_lines = count_lines(b);
  if total_lines <= limits.max_lines as u64 && b.len() <= limits.max_bytes {
    return (text, Truncation::whole(total_lines, total_bytes));
  }
  let mut start = b.len();
  let mut lines = 0u64;
  let mut partial = false;
  let by;
  loop {
    if lines >= limits.max_lines as u64 {
      by = TruncatedBy::Lines;
      break;
    }
    if start == 0 {
      // unreachable when a limit is exceeded; kept for safety
      by = TruncatedBy::Bytes;
      break;
    }
    // the line is [line_start, start), its `\n` (if any) included
    let content_end = if b[start - 1] == b'\n' {
      start - 1
    } else {
      start
    };
    let line_start = b[..content_end]
      .iter()
      .rposition(|&c| c == b'\n')
      .map_or(0, |i| i + 1);
    let kept = b.len() - start;
    if kept + (start - line_start) > limits.max_bytes {
      if lines == 0 && limits.max_bytes > 0 {
        // a single line longer than the byte limit: keep its tail
        let mut cut = b.len() - limits.max_bytes;
        while !text.is_char_boundary(cut) {
          cut += 1;
        }
        // however small the limit, the line keeps its last character
        if cut >= content_end && content_end > line_start {
          cut = content_end - 1;
          while !text.is_char_boundary(cut) {
            cut -= 1;
          }
        }
        start = cut;
        lines = 1;
        partial = true;
      }
      by = TruncatedBy::Bytes;
      break;
    }
    start = line_start;
    lines += 1;
  }
  if start == 0 {
    // the floor kept the only line whole (`"\t\n"` under a 1-byte limit):
    // nothing was cut, and the result says so
    return (text, Truncation::whole(total_lines, total_bytes));
  }
  let out = &text[start..];
  (
    out,
    Truncation {
      total_lines,
      total_bytes,
      output_lines: lines,
      output_bytes: out.len() as u64,
      truncated_by: Some(by),
      last_line_partial: partial,
      head_lines: 0,
    },
  )
}

/// The first complete lines of `text` within `max_lines` and `max_bytes`.
fn head_lines(text: &str, max_lines: usize, max_bytes: usize) -> (&str, u64) {
  let mut end = 0;
  let mut lines = 0u64;
  for line in text.split_inclusive('\n') {
    if lines >= max_lines as u64 || end + line.len() > max_bytes || !line.ends_with('\n') {
      break;
    }
    end += line.len();
    lines += 1;
  }
  (&text[..end], lines)
}

/// `51200` -> `50KB`, `1536` -> `1.5KB`, `512` -> `512B`.
pub fn format_size(bytes: usize) -> String {
  const KB: usize = 1024;
  const MB: usize = 1024 * 1024;
  let (unit, div) = if bytes >= MB {
    ("MB", MB)
  } else if bytes >= KB {
    ("KB", KB)
  } else {
    return format!("{bytes}B");
  };
  if bytes.is_multiple_of(div) {
    format!("{}{unit}", bytes / div)
  } else {
    let s = format!("{:.1}", bytes as f64 / div as f64);
    format!("{}{unit}", s.trim_end_matches(".0"))
  }
}

/// The marker line between a kept head and tail.
pub fn omitted_marker(lines: u64, bytes: u64) -> String {
  let size = format_size(bytes as usize);
  match lines {
    0 => format!("[... {size} omitted ...]\n"),
    1 => format!("[... 1 line ({size}) omitted ...]\n"),
    n => format!("[... {n} lines ({size}) omitted ...]\n"),
  }
}

/// Keep the head and the tail of `text`: the first complete lines within
/// half of each limit, then the last lines within what is left (as
/// [`truncate_tail`] keeps them), and between them a marker line of what was
/// cut (not counted in the limits, like the notices). What fits is returned
/// whole.
pub fn truncate_head_tail(text: &str, limits: OutputLimits) -> (String, Truncation) {
  let total_lines = count_lines(text.as_bytes());
  if total_lines <= limits.max_lines as u64 && text.len() <= limits.max_bytes {
    return (
      text.to_owned(),
      Truncation::whole(total_lines, text.len() as u64),
    );
  }
  let (head, n_head) = head_lines(text, limits.max_lines / 2, limits.max_bytes / 2);
  let rest = &text[head.len()..];
  let tail_limits = OutputLimits {
    max_lines: limits.max_lines - n_head as usize,
    max_bytes: limits.max_bytes - head.len(),
    mode: TruncationMode::Tail,
  };
  let (tail, t) = truncate_tail(rest, tail_limits);
  let cut = rest.len() - tail.len();
  let mut out = String::with_capacity(head.len() + tail.len() + 48);
  out.push_str(head);
  if cut > 0 {
    let lines = total_lines - n_head - t.output_lines + u64::from(t.last_line_partial);
    out.push_str(&omitted_marker(lines.min(total_lines), cut as u64));
  }
  out.push_str(tail);
  (
    out,
    Truncation {
      total_lines,
      total_bytes: text.len() as u64,
      output_lines: n_head + t.output_lines,
      output_bytes: (head.len() + tail.len()) as u64,
      truncated_by: t.truncated_by,
      last_line_partial: t.last_line_partial,
      head_lines: n_head,
    },
  )
}

/// [`truncate_tail`] or [`truncate_head_tail`], as `limits.mode` says.
pub fn truncate(text: &str, limits: OutputLimits) -> (std::borrow::Cow<'_, str>, Truncation) {
  match limits.mode {
    TruncationMode::Tail => {
      let (kept, t) = truncate_tail(text, limits);
      (std::borrow::Cow::Borrowed(kept), t)
    }
    TruncationMode::HeadTail => {
      let (kept, t) = truncate_head_tail(text, limits);
      (std::borrow::Cow::Owned(kept), t)
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn lim(max_lines: usize, max_bytes: usize) -> OutputLimits {
    OutputLimits {
      max_lines,
      max_bytes,
      mode: TruncationMode::Tail,
    }
  }

  #[test]
  fn head_tail_keeps_the_first_and_last_lines_with_a_marker() {
    let text = numbered(8500);
    let l = OutputLimits {
      mode: TruncationMode::HeadTail,
      ..lim(10, 1 << 20)
    };
    let (out, t) = truncate_head_tail(&text, l);
    let cut: usize = (6..=8495).map(|i| format!("{i}\n").len()).sum();
    assert_eq!(
      out,
      format!(
        "1\n2\n3\n4\n5\n[... 8490 lines ({}) omitted ...]\n8496\n8497\n8498\n8499\n8500\n",
        format_size(cut)
      )
    );
    assert_eq!((t.head_lines, t.output_lines, t.total_lines), (5, 10, 8500));
    assert_eq!(t.omitted_lines(), 8490);
    assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
    // the byte limit covers head and tail together, the marker aside
    let (out, t) = truncate_head_tail(
      &text,
      OutputLimits {
        mode: TruncationMode::HeadTail,
        ..lim(2000, 40)
      },
    );
    assert_eq!(
      t.output_bytes, 38,
      "whole lines: 9 of the head (18B), 4 of the tail (20B)"
    );
    assert!(
      out.starts_with("1\n2\n") && out.ends_with("8500\n"),
      "{out}"
    );
    assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
    // what fits is whole
    let (out, t) = truncate_head_tail(
      "a\nb\n",
      OutputLimits {
        mode: TruncationMode::HeadTail,
        ..lim(2, 100)
      },
    );
    assert_eq!(out, "a\nb\n");
    assert!(!t.truncated());
  }

  fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
  }

  #[test]
  fn a_one_character_line_over_the_byte_limit_is_kept_and_not_reported_cut() {
    // found by tests/properties.rs: the floor (a cut line keeps its last
    // character and its newline) kept all of "\t\n" under a 1-byte limit
    // while the result said it was truncated by bytes
    let (kept, t) = truncate_tail("\t\n", lim(1, 1));
    assert_eq!(kept, "\t\n");
    assert!(!t.truncated());
    assert!(!t.last_line_partial);
    assert_eq!((t.output_lines, t.output_bytes), (1, 2));
    // a longer line is still cut to its last character
    let (kept, t) = truncate_tail("ab\n", lim(1, 1));
    assert_eq!(kept, "b\n");
    assert!(t.truncated() && t.last_line_partial);
  }

  #[test]
  fn counts_newlines_word_at_a_time() {
    let mut data = vec![0u8; 1000];
    for (i, b) in data.iter_mut().enumerate() {
      *b = match i % 7 {
        0 => b'\n',
        1 => 0x8a, // '\n' with the high bit: not a newline
        2 => 0x0b,
        3 => 0xff,
        _ => b'a',
      };
    }
    for start in 0..9 {
      let s = &data[start..];
      let naive = s.iter().filter(|&&b| b == b'\n').count() as u64;
      assert_eq!(count_newlines(s), naive);
    }
    assert_eq!(count_newlines(b"\n\n\n\n\n\n\n\n\n"), 9);
  }

  #[test]
  fn counts_lines() {
    assert_eq!(count_lines(b""), 0);
    assert_eq!(count_lines(b"a"), 1);
    assert_eq!(count_lines(b"a\n"), 1);
    assert_eq!(count_lines(b"a\nb"), 2);
    assert_eq!(count_lines(b"\n\n"), 2);
  }

  #[test]
  fn untouched_within_limits() {
    let (out, t) = truncate_tail("a\nb\n", lim(2, 100));
    assert_eq!(out, "a\nb\n");
    assert!(!t.truncated());
    assert_eq!((t.total_lines, t.output_lines, t.output_bytes), (2, 2, 4));
  }

  #[test]
  fn line_limit_keeps_last_lines() {
    let text = numbered(8500);
    let (out, t) = truncate_tail(&text, lim(2000, 1 << 30));
    assert_eq!(
      out,
      (6501..=8500).map(|i| format!("{i}\n")).collect::<String>()
    );
    assert_eq!(t.truncated_by, Some(TruncatedBy::Lines));
    assert_eq!((t.total_lines, t.output_lines), (8500, 2000));
    assert_eq!(t.output_bytes, out.len() as u64);
    assert!(!t.last_line_partial);
  }

  #[test]
  fn byte_limit_keeps_complete_lines() {
    // 10 lines of 10 bytes; 35 bytes fit 3 complete lines
    let text: String = (0..10).map(|i| format!("line{i:04}.\n")).collect();
    let (out, t) = truncate_tail(&text, lim(100, 35));
    assert_eq!(out, "line0007.\nline0008.\nline0009.\n");
    assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
    assert_eq!(
      (t.output_lines, t.output_bytes, t.total_bytes),
      (3, 30, 100)
    );
  }

  #[test]
  fn whichever_limit_hits_first() {
    let text: String = (0..10).map(|i| format!("line{i:04}.\n")).collect();
    assert_eq!(
      truncate_tail(&text, lim(2, 35)).1.truncated_by,
      Some(TruncatedBy::Lines)
    );
    assert_eq!(
      truncate_tail(&text, lim(5, 35)).1.truncated_by,
      Some(TruncatedBy::Bytes)
    );
  }

  #[test]
  fn last_line_without_newline_counts() {
    let (out, t) = truncate_tail("a\nb\nc", lim(2, 100));
    assert_eq!(out, "b\nc");
    assert_eq!((t.total_lines, t.output_lines), (3, 2));
  }

  #[test]
  fn single_long_line_keeps_tail_on_char_boundary() {
    // 'é' is 2 bytes: an odd limit must not split one
    let text = "é".repeat(100);
    let (out, t) = truncate_tail(&text, lim(10, 51));
    assert_eq!(out, "é".repeat(25));
    assert!(t.last_line_partial);
    assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
    assert_eq!(
      (t.output_lines, t.output_bytes, t.total_bytes),
      (1, 50, 200)
    );
  }

  #[test]
  fn long_last_line_after_short_ones() {
    let text = format!("short\n{}\n", "x".repeat(200));
    let (out, t) = truncate_tail(&text, lim(10, 100));
    assert_eq!(out.len(), 100);
    assert!(out.ends_with("x\n"));
    assert!(t.last_line_partial);
    assert_eq!(t.total_lines, 2);
  }

  #[test]
  fn long_earlier_line_is_dropped_whole() {
    let text = format!("{}\nend\n", "x".repeat(200));
    let (out, t) = truncate_tail(&text, lim(10, 100));
    assert_eq!(out, "end\n");
    assert!(!t.last_line_partial);
    assert_eq!(t.truncated_by, Some(TruncatedBy::Bytes));
  }

  #[test]
  fn tiny_byte_limit_keeps_the_last_character() {
    let (out, t) = truncate_tail("abc\n", lim(10, 1));
    assert_eq!(out, "c\n");
    assert!(t.last_line_partial);
    let (out, _) = truncate_tail("✓✓", lim(10, 2));
    assert_eq!(out, "✓");
    let (out, _) = truncate_tail("ab", lim(10, 1));
    assert_eq!(out, "b");
  }
}
