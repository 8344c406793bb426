//! The `text` of a result: what the model reads. Both streams are always
//! labelled (`stdout:` / `stderr:`), the exit code closes a finished command,
//! and every cut names the file that holds the full output.

use std::time::Duration;

use super::offload::LogStatus;
use super::truncate::{format_size, TruncatedBy, Truncation};
use crate::process::supervise::format_duration;

/// How the model is told to manage a background process, in the tool's words.
pub const MANAGE_HINT: &str = "Use check_pid or kill_pid to manage.";
/// The same, in the JavaScript API's words.
pub const API_MANAGE_HINT: &str = "Use checkBackground(pid) or killBackground(pid) to manage.";

/// Whose words the texts use: the model's tool (`check_pid`, `kill_pid`,
/// `exec_command`) or the JavaScript API (`checkBackground`, `start()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vocabulary {
  /// The tool's parameters (`commandTool`, `runner.call`, MCP).
  Tool,
  /// `runner.run` / `runCommand` and the methods of `CommandRunner`.
  #[default]
  Api,
}

impl Vocabulary {
  pub fn manage_hint(self) -> &'static str {
    match self {
      Vocabulary::Tool => MANAGE_HINT,
      Vocabulary::Api => API_MANAGE_HINT,
    }
  }

  /// What to use instead for a command that wants input.
  pub fn interactive_hint(self) -> &'static str {
    match self {
      Vocabulary::Tool => "use the exec_command tool (and write_stdin) for interactive commands",
      Vocabulary::Api => "use start() for interactive commands",
    }
  }
}

/// One stream as shown.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
  pub name: &'a str,
  pub text: &'a str,
  pub truncation: &'a Truncation,
  /// Binary output: shown as `[binary output: N bytes, saved to <log>]`.
  pub binary: bool,
}

impl Shown<'_> {
  /// Nothing to show: the section is left out.
  fn is_empty(&self) -> bool {
    self.text.is_empty() && !self.binary && !self.truncation.truncated()
  }
}

/// What the model reads when a command printed nothing.
pub const NO_OUTPUT: &str = "(no output)";

/// `stdout: Showing last 2000 of 8500 lines.` or `None` when nothing was cut.
pub fn truncation_sentence(name: &str, t: &Truncation, max_bytes: usize) -> Option<String> {
  let by = t.truncated_by?;
  let limit = format_size(max_bytes);
  if t.head_lines > 0 {
    let tail = t.output_lines - t.head_lines;
    let why = match by {
      TruncatedBy::Lines => String::new(),
      TruncatedBy::Bytes => format!(" ({limit} limit)"),
    };
    return Some(format!(
      "{name}: Showing first {} and last {tail} of {} lines{why}.",
      t.head_lines, t.total_lines
    ));
  }
  Some(if t.last_line_partial {
    format!(
      "{name}: Showing last {} bytes of line {} of {} ({limit} limit).",
      t.output_bytes, t.total_lines, t.total_lines
    )
  } else if by == TruncatedBy::Lines {
    format!(
      "{name}: Showing last {} of {} lines.",
      t.output_lines, t.total_lines
    )
  } else {
    format!(
      "{name}: Showing last {} of {} lines ({limit} limit).",
      t.output_lines, t.total_lines
    )
  })
}

/// Where the full output is, as one sentence without a final period.
pub fn log_sentence(log: &LogStatus) -> Option<String> {
  match log {
    LogStatus::NotNeeded => None,
    LogStatus::Saved(p) => Some(format!("Full output: {}", p.display())),
    LogStatus::Incomplete(p, e) => Some(format!(
      "Full output file may be incomplete: {} ({e})",
      p.display()
    )),
    LogStatus::Failed(e) => Some(format!("Full output could not be saved: {e}")),
  }
}

/// `[stdout: Showing last 2000 of 8500 lines. Full output: /tmp/exec-native-….log]`
pub fn notice(s: &Shown, max_bytes: usize, log: &LogStatus) -> Option<String> {
  let sentence = truncation_sentence(s.name, s.truncation, max_bytes)?;
  Some(match log_sentence(log) {
    Some(l) => format!("[{sentence} {l}]"),
    None => format!("[{sentence}]"),
  })
}

fn body(text: &str) -> &str {
  text.strip_suffix('\n').unwrap_or(text)
}

/// `[binary output: 1000 bytes, saved to /tmp/exec-native-….log]`
pub fn binary_notice(bytes: u64, log: &LogStatus) -> String {
  match log {
    LogStatus::Saved(p) => format!("[binary output: {bytes} bytes, saved to {}]", p.display()),
    LogStatus::Incomplete(p, e) => format!(
      "[binary output: {bytes} bytes, saved to {} (may be incomplete: {e})]",
      p.display()
    ),
    LogStatus::Failed(e) => format!("[binary output: {bytes} bytes; it could not be saved: {e}]"),
    LogStatus::NotNeeded => format!("[binary output: {bytes} bytes]"),
  }
}

/// The labelled sections of the streams that have something to show, or
/// `(no output)` once. With `counts`, a cut stream's label says how many
/// lines it shows (`stdout (last 2000 lines):`).
fn sections(out: &mut String, streams: &[Shown], log: &LogStatus, counts: bool) {
  let mut first = true;
  for s in streams.iter().filter(|s| !s.is_empty()) {
    if !first {
      out.push_str("\n\n");
    }
    first = false;
    out.push_str(s.name);
    if counts && s.truncation.truncated() {
      out.push_str(&format!(" (last {} lines)", s.truncation.output_lines));
    }
    out.push_str(":\n");
    if s.binary {
      out.push_str(&binary_notice(s.truncation.total_bytes, log));
    } else {
      out.push_str(body(s.text));
    }
  }
  if first {
    out.push_str(NO_OUTPUT);
  }
}

fn exit_line(code: i32, signal: Option<&str>) -> String {
  match signal {
    Some(sig) => format!("exit code: {code} ({sig})"),
    None => format!("exit code: {code}"),
  }
}

/// A finished command:
///
/// ```text
/// stdout:
/// <out>
///
/// stderr:
/// <err>
///
/// exit code: 0
/// ```
///
/// followed by a notice per cut stream.
pub fn format_finished(
  streams: &[Shown],
  exit_code: i32,
  signal: Option<&str>,
  max_bytes: usize,
  log: &LogStatus,
) -> String {
  let mut out = String::new();
  sections(&mut out, streams, log, false);
  out.push_str("\n\n");
  out.push_str(&exit_line(exit_code, signal));
  let notices: Vec<String> = streams
    .iter()
    .filter_map(|s| notice(s, max_bytes, log))
    .collect();
  if !notices.is_empty() {
    out.push_str("\n\n");
    out.push_str(&notices.join("\n"));
  }
  out
}

/// The closing lines of a bracketed block: the cut sentences, the log, the hint.
fn closing(
  out: &mut String,
  streams: &[Shown],
  max_bytes: usize,
  log: &LogStatus,
  hint: Option<Vocabulary>,
) {
  let mut lines: Vec<String> = streams
    .iter()
    .filter_map(|s| truncation_sentence(s.name, s.truncation, max_bytes))
    .collect();
  lines.extend(log_sentence(log));
  if let Some(v) = hint {
    lines.push(v.manage_hint().to_owned());
  }
  if !lines.is_empty() {
    out.push_str("\n\n");
    out.push_str(&lines.join("\n"));
  }
  out.push(']');
}

fn any_output(streams: &[Shown]) -> bool {
  streams.iter().any(|s| !s.is_empty())
}

/// A command that went to the background, after its timeout (`after`) or at
/// once (`None`).
pub fn format_backgrounded(
  pid: u32,
  after: Option<Duration>,
  streams: &[Shown],
  max_bytes: usize,
  log: &LogStatus,
  vocabulary: Vocabulary,
) -> String {
  let mut out = match after {
    Some(d) => format!(
      "[Command backgrounded after {} timeout (pid {pid}). Partial output:\n\n",
      format_duration(d)
    ),
    None => format!("[Command started in the background (pid {pid})."),
  };
  if after.is_some() {
    sections(&mut out, streams, log, false);
  } else if any_output(streams) {
    out.push_str(" Output so far:\n\n");
    sections(&mut out, streams, log, false);
  }
  closing(&mut out, streams, max_bytes, log, Some(vocabulary));
  out
}

/// What a command left running, now background jobs of the runner:
///
/// ```text
/// [Left running in the background:
/// pid 4242: python3 -m http.server 8765
/// Full output: /tmp/exec-native-….log
/// Use check_pid or kill_pid to manage.]
/// ```
pub fn format_left_running(
  left: &[(u32, String)],
  log: &LogStatus,
  vocabulary: Vocabulary,
) -> String {
  let mut lines = vec!["[Left running in the background:".to_owned()];
  lines.extend(left.iter().map(|(pid, cmd)| format!("pid {pid}: {cmd}")));
  lines.extend(log_sentence(log));
  lines.push(format!("{}]", vocabulary.manage_hint()));
  lines.join("\n")
}

/// How a background process stands at a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessState {
  Running,
  /// An adopted process (not our child) is gone: its exit code is unknown.
  Gone {
    signal: Option<String>,
    killed: bool,
  },
  Exited {
    code: i32,
    signal: Option<String>,
    /// Ended by `kill_pid` (or the runner's close).
    killed: bool,
  },
}

/// `check_pid` / `kill_pid`: the state and the output since the last check.
pub fn format_check(
  pid: u32,
  state: &ProcessState,
  streams: &[Shown],
  max_bytes: usize,
  log: &LogStatus,
  vocabulary: Vocabulary,
) -> String {
  let mut out = match state {
    ProcessState::Running => format!("[Process {pid} still running."),
    ProcessState::Gone {
      killed: true,
      signal,
    } => format!(
      "[Process {pid} killed ({}).",
      signal.as_deref().unwrap_or("SIGTERM")
    ),
    ProcessState::Gone { .. } => {
      format!("[Process {pid} is no longer running (exit code unknown: it was not started by this runner).")
    }
    ProcessState::Exited {
      code,
      signal,
      killed: true,
    } => match signal {
      Some(s) => format!("[Process {pid} killed ({s}, exit code {code})."),
      None => format!("[Process {pid} was asked to stop and exited with code {code}."),
    },
    ProcessState::Exited {
      code,
      signal: Some(s),
      ..
    } => format!("[Process {pid} was terminated by {s} (exit code {code})."),
    ProcessState::Exited { code, .. } => format!("[Process {pid} exited with code {code}."),
  };
  let running = *state == ProcessState::Running;
  if !any_output(streams) {
    out.push_str("\n\nNo new output since last check.");
  } else {
    if running {
      let lines: u64 = streams.iter().map(|s| s.truncation.total_lines).sum();
      let unit = if lines == 1 { "line" } else { "lines" };
      out.push_str(&format!(
        "\n\nNew output since last check ({lines} {unit}):"
      ));
    }
    out.push_str("\n\n");
    sections(&mut out, streams, log, !running);
  }
  closing(
    &mut out,
    streams,
    max_bytes,
    log,
    running.then_some(vocabulary),
  );
  out
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::path::PathBuf;

  fn whole(text: &str) -> Truncation {
    let n = super::super::truncate::count_lines(text.as_bytes());
    Truncation::whole(n, text.len() as u64)
  }

  #[test]
  fn sizes() {
    assert_eq!(format_size(51200), "50KB");
    assert_eq!(format_size(1536), "1.5KB");
    assert_eq!(format_size(100), "100B");
    assert_eq!(format_size(3 * 1024 * 1024), "3MB");
  }

  #[test]
  fn finished_has_the_seed_shape() {
    let (o, e) = (whole("hello\n"), whole(""));
    let text = format_finished(
      &[
        Shown {
          name: "stdout",
          text: "hello\n",
          truncation: &o,
          binary: false,
        },
        Shown {
          name: "stderr",
          text: "",
          truncation: &e,
          binary: false,
        },
      ],
      0,
      None,
      51200,
      &LogStatus::NotNeeded,
    );
    assert_eq!(text, "stdout:\nhello\n\nexit code: 0");
  }

  #[test]
  fn truncation_notice_exact() {
    let t = Truncation {
      total_lines: 8500,
      total_bytes: 38894,
      output_lines: 2000,
      output_bytes: 10000,
      truncated_by: Some(TruncatedBy::Lines),
      last_line_partial: false,
      head_lines: 0,
    };
    let s = Shown {
      name: "stdout",
      text: "",
      truncation: &t,
      binary: false,
    };
    let log = LogStatus::Saved(PathBuf::from("/tmp/exec-native-a1b2c3d4.log"));
    assert_eq!(
      notice(&s, 51200, &log).unwrap(),
      "[stdout: Showing last 2000 of 8500 lines. Full output: /tmp/exec-native-a1b2c3d4.log]"
    );
    let failed = LogStatus::Failed("disk full".into());
    assert_eq!(
      notice(&s, 51200, &failed).unwrap(),
      "[stdout: Showing last 2000 of 8500 lines. Full output could not be saved: disk full]"
    );
    let inc = LogStatus::Incomplete(PathBuf::from("/tmp/x.log"), "No space left".into());
    assert_eq!(
      notice(&s, 51200, &inc).unwrap(),
      "[stdout: Showing last 2000 of 8500 lines. Full output file may be incomplete: /tmp/x.log (No space left)]"
    );
  }

  #[test]
  fn byte_and_partial_notices() {
    let mut t = Truncation {
      total_lines: 900,
      total_bytes: 100_000,
      output_lines: 450,
      output_bytes: 51000,
      truncated_by: Some(TruncatedBy::Bytes),
      last_line_partial: false,
      head_lines: 0,
    };
    assert_eq!(
      truncation_sentence("stderr", &t, 51200).unwrap(),
      "stderr: Showing last 450 of 900 lines (50KB limit)."
    );
    t.last_line_partial = true;
    t.total_lines = 1;
    t.output_bytes = 51200;
    assert_eq!(
      truncation_sentence("stdout", &t, 51200).unwrap(),
      "stdout: Showing last 51200 bytes of line 1 of 1 (50KB limit)."
    );
  }

  #[test]
  fn backgrounded_and_checks() {
    let (o, e) = (whole("tick\n"), whole(""));
    let streams = [
      Shown {
        name: "stdout",
        text: "tick\n",
        truncation: &o,
        binary: false,
      },
      Shown {
        name: "stderr",
        text: "",
        truncation: &e,
        binary: false,
      },
    ];
    let log = LogStatus::Saved(PathBuf::from("/tmp/l.log"));
    assert_eq!(
      format_backgrounded(42, Some(Duration::from_millis(500)), &streams, 51200, &log, Vocabulary::Tool),
      "[Command backgrounded after 0.5s timeout (pid 42). Partial output:\n\nstdout:\ntick\n\nFull output: /tmp/l.log\nUse check_pid or kill_pid to manage.]"
    );
    assert_eq!(
      format_check(42, &ProcessState::Running, &streams, 51200, &log, Vocabulary::Tool),
      "[Process 42 still running.\n\nNew output since last check (1 line):\n\nstdout:\ntick\n\nFull output: /tmp/l.log\nUse check_pid or kill_pid to manage.]"
    );
    let none = [
      Shown {
        name: "stdout",
        text: "",
        truncation: &e,
        binary: false,
      },
      Shown {
        name: "stderr",
        text: "",
        truncation: &e,
        binary: false,
      },
    ];
    let exited = ProcessState::Exited {
      code: 0,
      signal: None,
      killed: false,
    };
    assert_eq!(
      format_check(42, &exited, &none, 51200, &log, Vocabulary::Tool),
      "[Process 42 exited with code 0.\n\nNo new output since last check.\n\nFull output: /tmp/l.log]"
    );
  }

  #[test]
  fn empty_sections_print_no_output_once() {
    let e = whole("");
    let none = [
      Shown {
        name: "stdout",
        text: "",
        truncation: &e,
        binary: false,
      },
      Shown {
        name: "stderr",
        text: "",
        truncation: &e,
        binary: false,
      },
    ];
    assert_eq!(
      format_finished(&none, 0, None, 51200, &LogStatus::NotNeeded),
      "(no output)\n\nexit code: 0"
    );
  }

  #[test]
  fn binary_says_size_and_log() {
    let t = Truncation::whole(3, 1000);
    let e = whole("");
    let streams = [
      Shown {
        name: "stdout",
        text: "",
        truncation: &t,
        binary: true,
      },
      Shown {
        name: "stderr",
        text: "",
        truncation: &e,
        binary: false,
      },
    ];
    let log = LogStatus::Saved(PathBuf::from("/tmp/b.log"));
    assert_eq!(
      format_finished(&streams, 0, None, 51200, &log),
      "stdout:\n[binary output: 1000 bytes, saved to /tmp/b.log]\n\nexit code: 0"
    );
  }

  #[test]
  fn exited_check_labels_cut_streams_with_their_line_count() {
    let t = Truncation {
      total_lines: 8500,
      total_bytes: 38894,
      output_lines: 2000,
      output_bytes: 10000,
      truncated_by: Some(TruncatedBy::Lines),
      last_line_partial: false,
      head_lines: 0,
    };
    let e = whole("x\n");
    let streams = [
      Shown {
        name: "stdout",
        text: "…\n",
        truncation: &t,
        binary: false,
      },
      Shown {
        name: "stderr",
        text: "x\n",
        truncation: &e,
        binary: false,
      },
    ];
    let log = LogStatus::Saved(PathBuf::from("/tmp/l.log"));
    let exited = ProcessState::Exited {
      code: 0,
      signal: None,
      killed: false,
    };
    assert_eq!(
      format_check(7, &exited, &streams, 51200, &log, Vocabulary::Tool),
      "[Process 7 exited with code 0.\n\nstdout (last 2000 lines):\n…\n\nstderr:\nx\n\nstdout: Showing last 2000 of 8500 lines.\nFull output: /tmp/l.log]"
    );
    assert!(format_check(
      7,
      &ProcessState::Running,
      &streams,
      51200,
      &log,
      Vocabulary::Tool
    )
    .contains("New output since last check (8501 lines):"));
  }
}
