//! Cleaning command output for a model: terminal escapes (CSI, OSC, DCS, ...)
//! go, control bytes below 0x20 other than tab, newline and carriage return
//! go, `\r\n` becomes `\n`. The escapes are recognised by `vte`, the parser of
//! Alacritty, so that every sequence a terminal would swallow is swallowed here
//! too (a regex misses OSC terminated by BEL or ST, DCS strings, charset
//! selections, and sequences split across reads).

use vte::{Params, Parser, Perform};

struct Clean {
  out: String,
  /// Keep `ESC [ K` (erase to the end of the line) and `ESC [ 2 K` (erase
  /// the line) as [`ERASE_TO_END`] / [`ERASE_LINE`] for the redraw step.
  erase_marks: bool,
}

/// Stands for `ESC [ K` in [`sanitize_terminal_bytes`]'s output.
pub const ERASE_TO_END: char = '\u{E000}';
/// Stands for `ESC [ 2 K` in [`sanitize_terminal_bytes`]'s output.
pub const ERASE_LINE: char = '\u{E001}';

impl Perform for Clean {
  fn print(&mut self, c: char) {
    // C1 controls can arrive as UTF-8 characters (U+0080..U+009F)
    if !c.is_control() && !(self.erase_marks && (c == ERASE_TO_END || c == ERASE_LINE)) {
      self.out.push(c);
    }
  }

  fn execute(&mut self, byte: u8) {
    match byte {
      b'\t' | b'\r' => self.out.push(byte as char),
      b'\n' => {
        // `\r\n` -> `\n`; a run of CRs before LF (`\r\r\n`, or `\r\0\r\n`
        // once the NUL is dropped) shows as nothing either, and leaving one
        // would put a CRLF in the output (found by fuzz/run.sh)
        while self.out.ends_with('\r') {
          self.out.pop();
        }
        self.out.push('\n');
      }
      _ => {}
    }
  }

  fn csi_dispatch(&mut self, params: &Params, inter: &[u8], _: bool, action: char) {
    if !self.erase_marks || action != 'K' || !inter.is_empty() {
      return;
    }
    match params
      .iter()
      .next()
      .and_then(|p| p.first().copied())
      .unwrap_or(0)
    {
      0 => self.out.push(ERASE_TO_END),
      2 => self.out.push(ERASE_LINE),
      _ => {}
    }
  }
  fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {}
  fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {}
}

/// Sanitize raw output bytes. Invalid UTF-8 becomes U+FFFD; an incomplete
/// character or escape sequence at the very end is dropped.
pub fn sanitize_bytes(bytes: &[u8]) -> String {
  clean(bytes, false)
}

/// [`sanitize_bytes`], keeping the line erasures (`ESC [ K`, `ESC [ 2 K`) as
/// [`ERASE_TO_END`] and [`ERASE_LINE`] for the redraw step, which needs them
/// to show a line as a terminal would.
pub fn sanitize_terminal_bytes(bytes: &[u8]) -> String {
  clean(bytes, true)
}

fn clean(bytes: &[u8], erase_marks: bool) -> String {
  let mut clean = Clean {
    out: String::with_capacity(bytes.len()),
    erase_marks,
  };
  let mut parser = Parser::new();
  parser.advance(&mut clean, bytes);
  clean.out
}

/// Sanitize text (see [`sanitize_bytes`]).
pub fn sanitize(text: &str) -> String {
  sanitize_bytes(text.as_bytes())
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn strips_sgr_colours() {
    assert_eq!(sanitize("\x1b[31mred\x1b[0m plain"), "red plain");
    assert_eq!(sanitize("\x1b[01;34mdir\x1b[0m\n"), "dir\n");
  }

  #[test]
  fn strips_osc_with_bel_and_st() {
    assert_eq!(sanitize("\x1b]0;title\x07after"), "after");
    assert_eq!(sanitize("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), "link");
  }

  #[test]
  fn strips_cursor_movement_and_private_modes() {
    assert_eq!(sanitize("a\x1b[2K\x1b[1Gb\x1b[?25l\x1b[?25h"), "ab");
    assert_eq!(sanitize("\x1b(Bx\x1b=y"), "xy");
  }

  #[test]
  fn strips_dcs() {
    assert_eq!(sanitize("\x1bPq#0;2;0;0;0\x1b\\ok"), "ok");
  }

  #[test]
  fn keeps_tab_newline_cr_and_drops_other_controls() {
    assert_eq!(sanitize("a\tb\x00c\x07d\x08e\x7f\n"), "a\tbcde\n");
    assert_eq!(sanitize("10%\r20%\r"), "10%\r20%\r");
  }

  #[test]
  fn normalizes_crlf() {
    assert_eq!(sanitize("one\r\ntwo\r\n"), "one\ntwo\n");
    assert_eq!(sanitize("a\r\0\r\n\n"), "a\n\n");
    assert_eq!(sanitize("b\r\r\r\n"), "b\n");
  }

  #[test]
  fn keeps_unicode_and_replaces_invalid_bytes() {
    assert_eq!(sanitize("héllo ✓ 日本"), "héllo ✓ 日本");
    assert_eq!(sanitize_bytes(b"a\xffb"), "a\u{fffd}b");
    assert_eq!(sanitize("x\u{85}y"), "xy");
  }
}
