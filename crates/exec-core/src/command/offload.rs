//! Where a command's output goes while it runs: per stream a rolling tail
//! window of at most 2 x `max_bytes` with counters over the whole stream, and
//! one log file per run that receives every byte of both streams, in the order
//! they were read (what a terminal would have shown).
//!
//! The log is written lazily: the first bytes stay in memory (at most
//! 4 x `max_bytes`) until the run either ends or outgrows that. A short command
//! never touches the disk; a long one gets its file created at that point with
//! the held bytes written first, so the log always starts at the first byte. At
//! the end the file is kept only if something was cut from what the model sees
//! (or the run went to the background, whose notice names it); an unneeded one
//! is deleted.

use std::fs::{File, OpenOptions};
use std::io::Write;
#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::process::supervise::OutputSink;
use crate::utf8::incomplete_suffix_len;

use super::sanitize::{sanitize_terminal_bytes, ERASE_LINE, ERASE_TO_END};
use super::truncate::{
  count_lines, count_newlines, omitted_marker, truncate, truncate_tail, OutputLimits, TruncatedBy,
  Truncation, TruncationMode,
};

/// Prefix and suffix of log file names: `exec-native-<16 hex>.log`.
pub const LOG_PREFIX: &str = "exec-native-";
pub const LOG_SUFFIX: &str = ".log";

/// The tail of one stream (and in head+tail mode its first bytes), and its
/// size since the last take.
#[derive(Debug)]
pub(crate) struct StreamTail {
  window: Vec<u8>,
  cap: usize,
  /// The first bytes since the last take, up to `head_cap` (0: none kept).
  head: Vec<u8>,
  head_cap: usize,
  dropped: bool,
  total_bytes: u64,
  newlines: u64,
  last_byte: Option<u8>,
}

/// What a take hands out: the window and the totals of the segment it ends.
#[derive(Debug, Default)]
pub struct Segment {
  pub bytes: Vec<u8>,
  /// Head+tail: the first bytes of the segment, when bytes between them and
  /// `bytes` were not kept (empty otherwise: `bytes` then starts the segment
  /// unless `dropped`).
  pub head: Vec<u8>,
  /// Bytes of the segment fell out of the window.
  pub dropped: bool,
  pub total_bytes: u64,
  pub total_lines: u64,
}

impl StreamTail {
  #[cfg(test)]
  pub fn new(cap: usize) -> Self {
    StreamTail::with_head(cap, 0)
  }

  /// A tail window of `cap` bytes that also keeps the first `head_cap`
  /// bytes of each segment.
  pub fn with_head(cap: usize, head_cap: usize) -> Self {
    StreamTail {
      window: Vec::new(),
      cap: cap.max(1),
      head: Vec::new(),
      head_cap,
      dropped: false,
      total_bytes: 0,
      newlines: 0,
      last_byte: None,
    }
  }

  pub fn push(&mut self, data: &[u8]) {
    if data.is_empty() {
      return;
    }
    if self.head.len() < self.head_cap {
      let n = (self.head_cap - self.head.len()).min(data.len());
      self.head.extend_from_slice(&data[..n]);
    }
    self.total_bytes += data.len() as u64;
    self.newlines += count_newlines(data);
    self.last_byte = data.last().copied();
    if data.len() >= self.cap {
      self.dropped |= !self.window.is_empty() || data.len() > self.cap;
      self.window.clear();
      self
        .window
        .extend_from_slice(&data[data.len() - self.cap..]);
      return;
    }
    let over = (self.window.len() + data.len()).saturating_sub(self.cap);
    if over > 0 {
      self.window.drain(..over);
      self.dropped = true;
    }
    self.window.extend_from_slice(data);
  }

  /// Hand out the segment so far and start a new one. With `carry`, an
  /// incomplete UTF-8 character at the end stays for the next segment.
  pub fn take(&mut self, carry: bool) -> Segment {
    let keep = if carry {
      incomplete_suffix_len(&self.window)
    } else {
      0
    };
    let rest = self.window.split_off(self.window.len() - keep);
    let mut bytes = std::mem::replace(&mut self.window, rest);
    let total_bytes = self.total_bytes - keep as u64;
    let total_lines = self.newlines + u64::from(total_bytes > 0 && self.last_byte != Some(b'\n'));
    let mut dropped = self.dropped;
    let mut head = std::mem::take(&mut self.head);
    if self.head_cap > 0 {
      // the next segment starts with the bytes carried over
      self.head.extend_from_slice(&self.window);
    }
    head.truncate(total_bytes as usize);
    if !dropped {
      head.clear();
    } else if head.len() + bytes.len() >= total_bytes as usize {
      // head and window meet: together they are the whole segment
      let overlap = head.len() + bytes.len() - total_bytes as usize;
      head.extend_from_slice(&bytes[overlap..]);
      bytes = std::mem::take(&mut head);
      dropped = false;
    }
    let seg = Segment {
      bytes,
      head,
      dropped,
      total_bytes,
      total_lines,
    };
    self.dropped = false;
    self.total_bytes = keep as u64;
    self.newlines = 0;
    if keep == 0 {
      self.last_byte = None;
    }
    seg
  }
}

/// A segment made ready for the model: the whole-line window, sanitized,
/// with `\r` redraws collapsed; or the finding that it is binary.
struct Prepared {
  clean: String,
  /// Head+tail: the segment's first complete lines, made ready the same way
  /// (empty when the segment has no separate head).
  head: String,
  /// The window starts inside a line that has no end within it.
  partial: bool,
  binary: bool,
  /// What fell out of the window were only frames of its first line that a
  /// later `\r` redraws: nothing the model would see was cut.
  redraws_only: bool,
}

/// Binary output: more than 10% of the bytes are control bytes a text does
/// not hold (NUL, and C0 controls other than tab, newline, carriage return,
/// form feed, backspace, bell and escape) or outside valid UTF-8. One NUL in
/// a page of text is not binary: it is shown as `␀`.
pub fn looks_binary(bytes: &[u8]) -> bool {
  if bytes.is_empty() {
    return false;
  }
  let control = bytes
    .iter()
    .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x08 | 0x07 | 0x1b))
    .count();
  let invalid: usize = bytes.utf8_chunks().map(|c| c.invalid().len()).sum();
  (control + invalid) * 10 > bytes.len()
}

/// The symbol a NUL byte of text output is shown as.
pub const NUL_SYMBOL: &str = "\u{2400}";

/// Text output with each NUL byte made visible as [`NUL_SYMBOL`] (the
/// sanitizer drops control bytes, and a model must see that one was there).
fn show_nuls(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
  if !bytes.contains(&0) {
    return std::borrow::Cow::Borrowed(bytes);
  }
  let mut out = Vec::with_capacity(bytes.len() + 8);
  for &b in bytes {
    if b == 0 {
      out.extend_from_slice(NUL_SYMBOL.as_bytes());
    } else {
      out.push(b);
    }
  }
  std::borrow::Cow::Owned(out)
}

/// What a terminal shows of each line: `\r` moves to the start of the line
/// and what follows overwrites it character by character (`line1\rXX` shows
/// `XXne1`; a progress bar redrawn 20,000 times is one line); the erasures
/// [`ERASE_TO_END`] and [`ERASE_LINE`] clear what they would. A `\r` that
/// ends a line overwrites nothing.
pub fn collapse_redraws(text: &str) -> std::borrow::Cow<'_, str> {
  if !text.contains(['\r', ERASE_TO_END, ERASE_LINE]) {
    return std::borrow::Cow::Borrowed(text);
  }
  let mut out = String::with_capacity(text.len());
  let mut screen: Vec<char> = Vec::new();
  for line in text.split_inclusive('\n') {
    let (body, nl) = match line.strip_suffix('\n') {
      Some(b) => (b, "\n"),
      None => (line, ""),
    };
    if !body.contains(['\r', ERASE_TO_END, ERASE_LINE]) {
      out.push_str(body);
      out.push_str(nl);
      continue;
    }
    screen.clear();
    let mut cursor = 0;
    for c in body.chars() {
      match c {
        '\r' => cursor = 0,
        ERASE_TO_END => screen.truncate(cursor),
        ERASE_LINE => {
          screen.clear();
          screen.resize(cursor, ' ');
        }
        c => {
          match screen.get_mut(cursor) {
            Some(slot) => *slot = c,
            None => screen.push(c),
          }
          cursor += 1;
        }
      }
    }
    out.extend(screen.iter());
    out.push_str(nl);
  }
  std::borrow::Cow::Owned(out)
}

fn prepare(seg: &Segment) -> Prepared {
  if looks_binary(&seg.bytes) {
    return Prepared {
      clean: String::new(),
      head: String::new(),
      partial: false,
      binary: true,
      redraws_only: false,
    };
  }
  let mut bytes: &[u8] = &seg.bytes;
  let mut partial = false;
  let mut redraws_only = false;
  if seg.dropped {
    let first_end = bytes.iter().position(|&b| b == b'\n');
    let first = &bytes[..first_end.unwrap_or(bytes.len())];
    // no newline fell out of the window, and the first line's fragment is
    // redrawn after a `\r`: what the terminal shows of it is all here
    if count_lines(bytes) == seg.total_lines && first.contains(&b'\r') {
      redraws_only = true;
    } else {
      // the window starts inside a line: drop that fragment if a whole line follows
      match first_end {
        Some(i) if i + 1 < bytes.len() => bytes = &bytes[i + 1..],
        _ => partial = true,
      }
    }
  }
  let clean = sanitize_terminal_bytes(&show_nuls(bytes));
  let clean = collapse_redraws(&clean).into_owned();
  Prepared {
    clean,
    head: prepare_head(&seg.head),
    partial,
    binary: false,
    redraws_only,
  }
}

/// The first complete lines of a segment's head, sanitized (a head that
/// looks binary shows nothing: the tail's notice names the log).
fn prepare_head(head: &[u8]) -> String {
  if head.is_empty() || looks_binary(head) {
    return String::new();
  }
  let whole = match head.iter().rposition(|&b| b == b'\n') {
    Some(i) => &head[..=i],
    None => return String::new(),
  };
  let clean = sanitize_terminal_bytes(&show_nuls(whole));
  collapse_redraws(&clean).into_owned()
}

/// Head+tail of a segment whose middle was not kept: the head's first lines
/// within half of each limit, the window's last lines within the rest, and
/// the marker of what lies between.
fn head_and_tail(seg: &Segment, p: &Prepared, limits: OutputLimits) -> (String, Truncation) {
  let half = OutputLimits {
    max_lines: limits.max_lines / 2,
    max_bytes: limits.max_bytes / 2,
    mode: TruncationMode::Tail,
  };
  let (mut head, mut n_head) = (String::new(), 0u64);
  for line in p.head.split_inclusive('\n') {
    if n_head >= half.max_lines as u64 || head.len() + line.len() > half.max_bytes {
      break;
    }
    head.push_str(line);
    n_head += 1;
  }
  let rest = OutputLimits {
    max_lines: limits.max_lines - n_head as usize,
    max_bytes: limits.max_bytes - head.len(),
    mode: TruncationMode::Tail,
  };
  let (tail, mut t) = truncate_tail(&p.clean, rest);
  let omitted_lines = seg
    .total_lines
    .saturating_sub(n_head + t.output_lines)
    .saturating_add(u64::from(t.last_line_partial));
  let omitted_bytes = seg
    .total_bytes
    .saturating_sub((head.len() + tail.len()) as u64);
  t.output_lines += n_head;
  t.output_bytes += head.len() as u64;
  t.head_lines = n_head;
  let mut out = head;
  out.push_str(&omitted_marker(omitted_lines, omitted_bytes));
  out.push_str(tail);
  t.truncated_by.get_or_insert(TruncatedBy::Bytes);
  (out, t)
}

fn finish_render(seg: &Segment, p: &Prepared, limits: OutputLimits) -> (String, Truncation) {
  if p.binary {
    let mut t = Truncation::whole(seg.total_lines, seg.total_bytes);
    t.output_lines = 0;
    t.output_bytes = 0;
    return (String::new(), t);
  }
  let (kept, mut t) = if limits.mode == TruncationMode::HeadTail && !seg.head.is_empty() {
    head_and_tail(seg, p, limits)
  } else {
    let (kept, t) = truncate(&p.clean, limits);
    (kept.into_owned(), t)
  };
  t.last_line_partial |= p.partial && t.output_lines <= 1;
  if seg.dropped && !p.redraws_only && t.truncated_by.is_none() {
    t.truncated_by = Some(TruncatedBy::Bytes);
  }
  t.total_bytes = seg.total_bytes;
  t.total_lines = seg.total_lines.max(t.output_lines);
  (kept, t)
}

/// The window of a segment, sanitized and tail-truncated, with the counts of
/// the whole segment.
#[cfg(test)]
pub(crate) fn render_segment(seg: &Segment, limits: OutputLimits) -> (String, Truncation) {
  finish_render(seg, &prepare(seg), limits)
}

/// One limit shared by two streams: each gets what it needs if both fit;
/// otherwise each keeps at least half (or all it needs, if less), and the
/// other takes the rest.
pub fn split_budget(total: usize, need_a: usize, need_b: usize) -> (usize, usize) {
  if need_a.saturating_add(need_b) <= total {
    return (total - need_b, total - need_a);
  }
  let a = need_a.min(total - need_b.min(total / 2));
  let b = total - a;
  (a.max(1), b.max(1))
}

/// Two captured byte strings (with the sizes of the whole streams) rendered
/// as [`render_pair`] does.
pub fn render_bytes(
  out: &[u8],
  out_total: u64,
  err: &[u8],
  err_total: u64,
  limits: OutputLimits,
) -> (Rendered, Rendered) {
  let seg = |b: &[u8], total: u64| Segment {
    bytes: b.to_vec(),
    head: Vec::new(),
    dropped: total > b.len() as u64,
    total_bytes: total,
    total_lines: count_lines(b),
  };
  render_pair(&seg(out, out_total), &seg(err, err_total), limits)
}

/// One stream rendered for the model.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
  pub text: String,
  pub truncation: Truncation,
  pub binary: bool,
}

/// Both streams rendered under one budget: `limits` covers what is shown of
/// stdout and stderr together (see [`split_budget`]).
pub fn render_pair(out: &Segment, err: &Segment, limits: OutputLimits) -> (Rendered, Rendered) {
  let (po, pe) = (prepare(out), prepare(err));
  let need = |p: &Prepared| {
    if p.binary {
      (0, 0)
    } else {
      let lines = count_lines(p.clean.as_bytes()) + count_lines(p.head.as_bytes());
      (lines as usize, p.clean.len() + p.head.len())
    }
  };
  let ((lo, bo), (le, be)) = (need(&po), need(&pe));
  let (lines_o, lines_e) = split_budget(limits.max_lines, lo, le);
  let (bytes_o, bytes_e) = split_budget(limits.max_bytes, bo, be);
  let render = |seg: &Segment, p: &Prepared, max_lines, max_bytes| {
    let (text, truncation) = finish_render(
      seg,
      p,
      OutputLimits {
        max_lines,
        max_bytes,
        mode: limits.mode,
      },
    );
    Rendered {
      text,
      truncation,
      binary: p.binary,
    }
  };
  (
    render(out, &po, lines_o, bytes_o),
    render(err, &pe, lines_e, bytes_e),
  )
}

/// What became of the full-output log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogStatus {
  /// Not written: nothing was cut.
  NotNeeded,
  /// Every byte is in this file.
  Saved(PathBuf),
  /// The file exists but a write failed.
  Incomplete(PathBuf, String),
  /// The file could not be created.
  Failed(String),
}

impl LogStatus {
  pub fn path(&self) -> Option<&Path> {
    match self {
      LogStatus::Saved(p) | LogStatus::Incomplete(p, _) => Some(p),
      _ => None,
    }
  }

  pub fn error(&self) -> Option<&str> {
    match self {
      LogStatus::Incomplete(_, e) | LogStatus::Failed(e) => Some(e),
      _ => None,
    }
  }
}

/// The log of one run.
#[derive(Debug)]
pub(crate) struct OffloadLog {
  dir: PathBuf,
  pending: Vec<u8>,
  pending_limit: usize,
  file: Option<File>,
  path: Option<PathBuf>,
  create_error: Option<String>,
  write_error: Option<String>,
}

/// Create `<dir>/exec-native-<16 hex>.log`, readable by the user only.
pub fn create_log_file(dir: &Path) -> std::io::Result<(PathBuf, File)> {
  loop {
    let name = format!("{LOG_PREFIX}{:016x}{LOG_SUFFIX}", fastrand::u64(..));
    let path = dir.join(name);
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    // the user's only: mode 0600 (on Windows, the temp folder's access list)
    #[cfg(unix)]
    o.mode(0o600);
    match o.open(&path) {
      Ok(f) => return Ok((path, f)),
      Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
      Err(e) => return Err(e),
    }
  }
}

impl OffloadLog {
  pub fn new(dir: PathBuf, pending_limit: usize) -> Self {
    OffloadLog {
      dir,
      pending: Vec::new(),
      pending_limit,
      file: None,
      path: None,
      create_error: None,
      write_error: None,
    }
  }

  pub fn write(&mut self, data: &[u8]) {
    if self.create_error.is_some() || self.write_error.is_some() {
      return;
    }
    if self.file.is_some() {
      self.write_file(data);
      return;
    }
    self.pending.extend_from_slice(data);
    if self.pending.len() > self.pending_limit {
      self.materialize();
    }
  }

  fn write_file(&mut self, data: &[u8]) {
    if let Some(f) = self.file.as_mut() {
      if let Err(e) = f.write_all(data) {
        self.write_error = Some(e.to_string());
        self.file = None;
      }
    }
  }

  /// Create the file now and write what is held.
  pub fn materialize(&mut self) {
    if self.path.is_some() || self.create_error.is_some() {
      return;
    }
    match create_log_file(&self.dir) {
      Ok((path, file)) => {
        self.path = Some(path);
        self.file = Some(file);
        let held = std::mem::take(&mut self.pending);
        self.write_file(&held);
      }
      Err(e) => {
        self.create_error = Some(format!(
          "cannot create a log file in {}: {e}",
          self.dir.display()
        ));
        self.pending = Vec::new();
      }
    }
  }

  /// The status as of now (the file is created first if `needed`).
  pub fn status(&mut self, needed: bool) -> LogStatus {
    if needed {
      self.materialize();
    }
    if let Some(e) = &self.create_error {
      return LogStatus::Failed(e.clone());
    }
    match (&self.path, &self.write_error) {
      (Some(p), Some(e)) => LogStatus::Incomplete(p.clone(), e.clone()),
      (Some(p), None) => LogStatus::Saved(p.clone()),
      (None, _) => LogStatus::NotNeeded,
    }
  }

  /// The run is over: close the file; keep it only if `needed`.
  pub fn finish(&mut self, needed: bool) -> LogStatus {
    let status = self.status(needed);
    self.file = None;
    self.pending = Vec::new();
    if !needed {
      if let Some(p) = self.path.take() {
        let _ = std::fs::remove_file(p);
      }
      return LogStatus::NotNeeded;
    }
    status
  }
}

/// Both streams of a run and its log, shared by the pumps and the runner.
#[derive(Debug)]
pub(crate) struct Capture {
  pub out: StreamTail,
  pub err: StreamTail,
  pub log: OffloadLog,
}

pub(crate) type SharedCapture = Arc<Mutex<Capture>>;

impl Capture {
  pub fn shared(limits: OutputLimits, dir: PathBuf) -> SharedCapture {
    let window = limits.max_bytes.saturating_mul(2).max(1);
    // head+tail: the head can show at most half the budget; a whole budget
    // leaves room for what sanitizing removes
    let head = match limits.mode {
      TruncationMode::Tail => 0,
      TruncationMode::HeadTail => limits.max_bytes.max(1),
    };
    Arc::new(Mutex::new(Capture {
      out: StreamTail::with_head(window, head),
      err: StreamTail::with_head(window, head),
      log: OffloadLog::new(dir, window.saturating_mul(2)),
    }))
  }
}

pub(crate) fn lock(c: &SharedCapture) -> MutexGuard<'_, Capture> {
  c.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
  Stdout,
  Stderr,
}

/// The [`OutputSink`] of one stream.
pub(crate) struct CaptureSink {
  pub capture: SharedCapture,
  pub stream: Stream,
}

impl OutputSink for CaptureSink {
  fn write(&mut self, data: &[u8]) {
    let mut c = lock(&self.capture);
    match self.stream {
      Stream::Stdout => c.out.push(data),
      Stream::Stderr => c.err.push(data),
    }
    c.log.write(data);
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
  fn head_tail_keeps_the_first_lines_of_a_stream_whose_middle_fell_out() {
    let limits = OutputLimits {
      mode: TruncationMode::HeadTail,
      ..lim(20, 200)
    };
    let mut t = StreamTail::with_head(400, 200);
    t.push(b"error: first\n");
    for i in 0..10_000 {
      t.push(format!("line {i}\n").as_bytes());
    }
    t.push(b"error: last\n");
    let seg = t.take(false);
    assert!(seg.dropped && !seg.head.is_empty());
    let (text, tr) = render_segment(&seg, limits);
    assert!(text.starts_with("error: first\nline 0\n"), "{text}");
    assert!(text.ends_with("line 9999\nerror: last\n"), "{text}");
    assert!(text.contains(" lines ("), "{text}");
    assert_eq!(tr.total_lines, 10_002);
    assert_eq!(tr.output_lines + tr.omitted_lines(), 10_002);
    assert!(tr.head_lines > 0 && tr.output_bytes <= 200);
    // head and window meet: the segment is whole, cut as one text
    let mut t = StreamTail::with_head(20, 20);
    t.push(b"0123456789\nabcdefghij\nxyz\n");
    let seg = t.take(false);
    assert_eq!(seg.bytes, b"0123456789\nabcdefghij\nxyz\n");
    assert!(!seg.dropped && seg.head.is_empty());
  }

  #[test]
  fn window_is_bounded_and_counts_everything() {
    let mut t = StreamTail::new(10);
    for _ in 0..1000 {
      t.push(b"abc\n");
    }
    assert!(t.window.len() <= 10);
    let seg = t.take(false);
    assert_eq!(seg.total_bytes, 4000);
    assert_eq!(seg.total_lines, 1000);
    assert!(seg.dropped);
    // a big chunk replaces the window
    t.push(&[b'x'; 100]);
    assert_eq!(t.window.len(), 10);
  }

  #[test]
  fn take_carries_incomplete_char() {
    let mut t = StreamTail::new(100);
    t.push(b"ab\xc3");
    let seg = t.take(true);
    assert_eq!(seg.bytes, b"ab");
    assert_eq!(seg.total_bytes, 2);
    t.push(b"\xa9\n");
    let seg = t.take(true);
    assert_eq!(seg.bytes, "é\n".as_bytes());
    assert_eq!((seg.total_bytes, seg.total_lines), (3, 1));
  }

  #[test]
  fn render_of_dropped_window_skips_the_fragment() {
    let mut t = StreamTail::new(12);
    t.push(b"0123456789\nabcdef\nxyz\n");
    let (text, tr) = render_segment(&t.take(false), lim(100, 6));
    // window "bcdef\nxyz\n": fragment dropped, 6-byte limit keeps one line
    assert_eq!(text, "xyz\n");
    assert_eq!(tr.truncated_by, Some(TruncatedBy::Bytes));
    assert_eq!((tr.total_lines, tr.total_bytes), (3, 22));
  }

  #[test]
  fn render_totals_are_raw_outputs_are_sanitized() {
    let mut t = StreamTail::new(100);
    t.push(b"\x1b[31mred\x1b[0m\r\n");
    let (text, tr) = render_segment(&t.take(false), lim(100, 100));
    assert_eq!(text, "red\n");
    assert!(!tr.truncated());
    assert_eq!((tr.total_lines, tr.total_bytes), (1, 14));
    assert_eq!((tr.output_lines, tr.output_bytes), (1, 4));
  }

  #[test]
  fn log_is_lazy_and_starts_at_first_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = OffloadLog::new(dir.path().to_owned(), 8);
    log.write(b"12345");
    assert!(log.path.is_none());
    log.write(b"6789");
    let path = log.path.clone().unwrap();
    log.write(b"ab");
    let st = log.finish(true);
    assert_eq!(st, LogStatus::Saved(path.clone()));
    assert_eq!(std::fs::read(&path).unwrap(), b"123456789ab");
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("exec-native-") && name.ends_with(".log"));
    assert_eq!(name.len(), "exec-native-".len() + 16 + 4);
  }

  #[test]
  fn unneeded_log_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = OffloadLog::new(dir.path().to_owned(), 4);
    log.write(b"123456");
    let path = log.path.clone().unwrap();
    assert_eq!(log.finish(false), LogStatus::NotNeeded);
    assert!(!path.exists());
    let mut small = OffloadLog::new(dir.path().to_owned(), 100);
    small.write(b"12");
    let st = small.finish(true);
    assert_eq!(std::fs::read(st.path().unwrap()).unwrap(), b"12");
  }

  #[test]
  fn log_creation_failure_is_reported() {
    let mut log = OffloadLog::new(PathBuf::from("/nonexistent/dir"), 100);
    log.write(b"x");
    match log.finish(true) {
      LogStatus::Failed(e) => assert!(e.contains("/nonexistent/dir"), "{e}"),
      other => panic!("{other:?}"),
    }
  }

  #[test]
  fn redraws_collapse_to_the_last_frame() {
    assert_eq!(collapse_redraws("10%\r20%\r30%\ndone\n"), "30%\ndone\n");
    assert_eq!(collapse_redraws("10%\r20%\r"), "20%");
    assert_eq!(collapse_redraws("plain\n"), "plain\n");
    let mut t = StreamTail::new(2 * 51200);
    for i in 0..=20000 {
      t.push(format!("\r[{:<50}] {i}/20000", "#".repeat(i * 50 / 20000)).as_bytes());
    }
    t.push(b"\n");
    let (text, tr) = render_segment(&t.take(false), lim(2000, 51200));
    assert_eq!(text, format!("[{}] 20000/20000\n", "#".repeat(50)));
    assert!(!tr.truncated());
  }

  #[test]
  fn a_carriage_return_overwrites_as_a_terminal_does() {
    assert_eq!(collapse_redraws("line1\rXX\n"), "XXne1\n");
    assert_eq!(
      collapse_redraws("downloading 100%\rdone\n"),
      "doneloading 100%\n"
    );
    assert_eq!(collapse_redraws("a\rbc\rd"), "dc");
    let erased = sanitize_terminal_bytes(b"Downloading 100%\r\x1b[KDone\nab\r\x1b[2Kc\n");
    assert_eq!(collapse_redraws(&erased), "Done\nc\n");
  }

  #[test]
  fn one_nul_in_text_is_shown_not_binary() {
    let bytes = b"1\n2\n3\n4\n5\na\0b\n6\n7\n8\n";
    assert!(!looks_binary(bytes));
    let seg = Segment {
      bytes: bytes.to_vec(),
      head: Vec::new(),
      dropped: false,
      total_bytes: bytes.len() as u64,
      total_lines: 9,
    };
    let (text, _) = render_segment(&seg, lim(2000, 51200));
    assert_eq!(text, "1\n2\n3\n4\n5\na\u{2400}b\n6\n7\n8\n");
    assert!(looks_binary(&[0u8; 64]));
  }

  #[test]
  fn binary_is_detected() {
    assert!(looks_binary(b"ab\0cd"));
    let noise: Vec<u8> = (0..1000u32).map(|i| (i * 131 % 256) as u8).collect();
    assert!(looks_binary(&noise));
    assert!(!looks_binary("héllo wörld, plain text\n".as_bytes()));
    assert!(!looks_binary(
      b"one stray \xff byte in a long enough line of text\n"
    ));
  }

  #[test]
  fn budget_is_split_fairly() {
    assert_eq!(split_budget(100, 30, 40), (60, 70));
    assert_eq!(split_budget(100, 500, 500), (50, 50));
    assert_eq!(split_budget(100, 10, 500), (10, 90));
    assert_eq!(split_budget(100, 500, 10), (90, 10));
    let mut o = StreamTail::new(1 << 20);
    let mut e = StreamTail::new(1 << 20);
    for i in 0..3000 {
      o.push(format!("out {i}\n").as_bytes());
      e.push(format!("err {i}\n").as_bytes());
    }
    let (ro, re) = render_pair(&o.take(false), &e.take(false), lim(2000, 51200));
    assert_eq!(
      ro.truncation.output_lines + re.truncation.output_lines,
      2000
    );
    assert_eq!(ro.truncation.output_lines, 1000);
    assert!(ro.text.ends_with("out 2999\n") && re.text.ends_with("err 2999\n"));
  }
}
