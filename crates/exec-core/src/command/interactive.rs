//! Interactive commands: codex's unified-exec pair. `start` runs `bash -c
//! <command>` on a pseudo-terminal (or pipes) of a [`ProcessManager`] and
//! returns what it printed within `yield_time`, and a session id while it
//! still runs; `write` sends keystrokes (Ctrl-C is `\u{3}`) and returns what
//! came back. Both stop waiting early when the command ends, or when it is
//! blocked reading its terminal and quiet ([`awaiting_input`]), so a prompt
//! is answered at once instead of after the whole yield time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{ErrorCode, ExecError};
use crate::manager::{
  ExitInfo, ManagerConfig, ProcessIo, ProcessManager, StartSpec, TerminateMode,
  DEFAULT_MAX_PROCESSES,
};
use crate::process::{ProcessOptions, RunOptions};
use crate::CancellationToken;

use super::format::{binary_notice, truncation_sentence, Vocabulary};
use super::offload::{render_pair, LogStatus, Segment};
use super::truncate::{count_lines, format_size, OutputLimits};
use super::{command_env, StreamOutput};

/// `start`'s default wait for output.
pub const DEFAULT_START_YIELD: Duration = Duration::from_millis(10_000);
/// `write`'s default wait for output.
pub const DEFAULT_WRITE_YIELD: Duration = Duration::from_millis(250);
/// Output must have stopped this long before a blocked read counts as a
/// prompt waiting for input.
pub const QUIET: Duration = Duration::from_millis(300);
/// The same, when the yield time is over anyway.
const QUIET_AT_DEADLINE: Duration = Duration::from_millis(100);
/// How long `collect` waits, once the program blocks on its terminal, for
/// output still in flight through the terminal's pump (the prompt).
const IN_FLIGHT: Duration = Duration::from_millis(30);
/// Bytes of output an interactive session holds between two calls.
const RETAINED: usize = 4 * 1024 * 1024;

/// Whether an interactive command gets a terminal unless told: on Windows
/// pipes, since a console's output (ConPTY) is a rendering of its screen,
/// lines wrapped at its width and redrawn, not what the command wrote.
pub const DEFAULT_TTY: bool = !crate::platform::WINDOWS;

/// Options of [`Interactive::start`]. No `run`: an interactive command has
/// no timeout (`yield_time` is the wait for an answer, not for its end), its
/// input is what [`Interactive::write`] sends, its kill is `kill`'s, and its
/// answer's bytes are `limits.max_bytes`; the managed process it starts gets
/// [`RunOptions::managed`].
#[derive(Debug, Clone)]
pub struct StartOptions {
  /// The session's cwd (always given), environment, opt-in resource limits,
  /// parent-death signal (pipes; a PTY's child gets the kernel's SIGHUP
  /// instead) and opt-in OS sandbox (see [`crate::process::sandbox`]).
  pub process: ProcessOptions,
  /// How long to collect output before answering.
  pub yield_time: Duration,
  /// A pseudo-terminal (default) or pipes (stdin open).
  pub tty: bool,
  pub rows: u16,
  pub cols: u16,
  /// The output window of each answer (tail kept).
  pub limits: OutputLimits,
  /// Whose words the answers use (`write(1, ...)` or `write_stdin`).
  pub vocabulary: Vocabulary,
  /// The call named its own directory (a `workdir`): in a stateful runner
  /// the command starts there instead of where the shared state is.
  pub cwd_given: bool,
  /// While `start` waits for its answer, this cancels it: the session's
  /// whole tree is killed (an MCP `notifications/cancelled`).
  pub cancel: Option<CancellationToken>,
}

impl StartOptions {
  pub fn new(cwd: impl Into<PathBuf>) -> Self {
    Self::with_process(ProcessOptions::in_dir(cwd))
  }

  /// The defaults, with `process` (its cwd given).
  pub fn with_process(process: ProcessOptions) -> Self {
    StartOptions {
      process,
      yield_time: DEFAULT_START_YIELD,
      tty: DEFAULT_TTY,
      rows: 24,
      cols: 200,
      limits: OutputLimits::default(),
      vocabulary: Vocabulary::Api,
      cwd_given: false,
      cancel: None,
    }
  }
}

/// The answer of `start` and `write`.
#[derive(Debug, Clone)]
pub struct InteractiveResult {
  /// Present while the command runs: pass it to `write`.
  pub session_id: Option<u32>,
  pub pid: u32,
  /// What the command printed since the last answer (a terminal merges both
  /// streams), sanitized and tail-truncated.
  pub output: StreamOutput,
  /// `None` while it runs.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// The command is blocked reading its terminal (or stdin) and quiet.
  pub awaiting_input: bool,
  /// Output was lost between two calls (more than 4 MiB unread).
  pub dropped: bool,
  pub text: String,
  pub is_error: bool,
  pub error: Option<ExecError>,
}

impl InteractiveResult {
  pub(crate) fn failed(e: ExecError) -> Self {
    InteractiveResult {
      session_id: None,
      pid: 0,
      output: StreamOutput::default(),
      exit_code: None,
      signal: None,
      awaiting_input: false,
      dropped: false,
      text: e.message(),
      is_error: true,
      error: Some(e),
    }
  }
}

struct Session {
  process_id: String,
  tty: bool,
  pid: u32,
  after_seq: u64,
  limits: OutputLimits,
  vocabulary: Vocabulary,
  /// A long command's file (see [`super::bash_args`]), kept while it runs.
  _script: Option<tempfile::TempPath>,
  /// One caller at a time reads a session's output.
  busy: Arc<tokio::sync::Mutex<()>>,
}

/// The interactive sessions of one command runner.
pub struct Interactive {
  pm: ProcessManager,
  sessions: Mutex<HashMap<u32, Session>>,
  next: AtomicU32,
  shell: super::Shell,
}

impl Interactive {
  pub fn new(owner: u64, shell: super::Shell) -> Self {
    Interactive {
      pm: ProcessManager::new(ManagerConfig {
        retained_output_bytes: RETAINED,
        max_processes: DEFAULT_MAX_PROCESSES,
        exited_retention: Duration::from_secs(5),
        owner,
        ..Default::default()
      }),
      sessions: Mutex::new(HashMap::new()),
      next: AtomicU32::new(1),
      shell,
    }
  }

  fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Session>> {
    self.sessions.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Start `bash -c <command>` and collect its output for `yield_time`.
  /// Never fails: a command that cannot start gives `error` and `is_error`.
  pub async fn start(&self, command: &str, opts: StartOptions) -> InteractiveResult {
    let started = (|| -> Result<(u32, String, u32, Option<tempfile::TempPath>), ExecError> {
      if command.trim().is_empty() {
        return Err(ExecError::invalid("command is empty"));
      }
      if opts.rows == 0 || opts.cols == 0 {
        return Err(ExecError::invalid("rows and cols must be at least 1"));
      }
      let env = command_env(opts.process.env.clone());
      let (program, args, script) = self.shell.launch(command, &env, opts.process.cwd())?;
      let argv = std::iter::once(program.into_os_string())
        .chain(args)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
      let id = self.next.fetch_add(1, Ordering::Relaxed);
      let process_id = format!("session-{id}");
      let s = self.pm.start(
        StartSpec {
          process_id: Some(process_id.clone()),
          argv,
          arg0: None,
          io: if opts.tty {
            ProcessIo::Pty {
              rows: opts.rows,
              cols: opts.cols,
            }
          } else {
            ProcessIo::Pipe { stdin_open: true }
          },
          process: ProcessOptions {
            env,
            ..opts.process.clone()
          },
          // no timeout (it runs until it ends or is killed), its input is
          // what `write` sends, its output retained by the manager's config
          run: RunOptions::managed(),
        },
        None,
      )?;
      Ok((id, process_id, s.pid, script))
    })();
    let (id, process_id, pid, script) = match started {
      Ok(s) => s,
      Err(e) => return InteractiveResult::failed(e),
    };
    self.table().insert(
      id,
      Session {
        process_id,
        tty: opts.tty,
        pid,
        after_seq: 0,
        limits: opts.limits,
        vocabulary: opts.vocabulary,
        _script: script,
        busy: Arc::new(tokio::sync::Mutex::new(())),
      },
    );
    self
      .collect(id, opts.yield_time, opts.cancel.as_ref())
      .await
  }

  /// Send `chars` to session `id` and collect its output for `yield_time`.
  /// On pipes (no terminal to turn Ctrl-D into an end of file), a `\u{4}`
  /// in `chars` closes stdin after what comes before it, and so does
  /// `close_stdin`: the program reads EOF. `cancel` (while the answer is
  /// awaited) kills the session's whole tree.
  pub async fn write(
    &self,
    id: u32,
    chars: &[u8],
    yield_time: Duration,
    close_stdin: bool,
    cancel: Option<&CancellationToken>,
  ) -> InteractiveResult {
    let (process_id, tty) = match self.table().get(&id) {
      Some(s) => (s.process_id.clone(), s.tty),
      None => return InteractiveResult::failed(no_session(id)),
    };
    let eof_at = (!tty).then(|| chars.iter().position(|&b| b == 4)).flatten();
    let data = &chars[..eof_at.unwrap_or(chars.len())];
    let ended = |e: &ExecError| matches!(e.code, ErrorCode::EPIPE | ErrorCode::EIO);
    if !data.is_empty() {
      if let Err(e) = self.pm.write(&process_id, data).await {
        // a command that ended (EPIO/EIO): its last output and exit still count
        if !ended(&e) {
          return InteractiveResult::failed(e);
        }
      }
    }
    if tty && close_stdin {
      // a terminal has no stdin pipe: Ctrl-D at the start of a line is its EOF
      let _ = self.pm.write(&process_id, b"\x04").await;
    } else if eof_at.is_some() || close_stdin {
      if let Err(e) = self.pm.close_stdin(&process_id).await {
        if !ended(&e) {
          return InteractiveResult::failed(e);
        }
      }
    }
    self.collect(id, yield_time, cancel).await
  }

  /// Kill session `id`'s whole tree and answer with its last output.
  pub async fn kill(&self, id: u32) -> InteractiveResult {
    let process_id = match self.table().get(&id) {
      Some(s) => s.process_id.clone(),
      None => return InteractiveResult::failed(no_session(id)),
    };
    let _ = self
      .pm
      .terminate(
        &process_id,
        TerminateMode::Graceful {
          timeout: Duration::from_millis(500),
        },
      )
      .await;
    self.collect(id, Duration::from_secs(2), None).await
  }

  /// The caller gave up on an answer: the session's whole tree goes
  /// (SIGKILL, as a cancelled `bash` call), and no answer is made.
  async fn cancelled(&self, id: u32, process_id: &str) -> InteractiveResult {
    self.table().remove(&id);
    let _ = self.pm.terminate(process_id, TerminateMode::Force).await;
    InteractiveResult::failed(ExecError::new(
      ErrorCode::ECANCELED,
      format!("interactive session {id} was cancelled and killed"),
    ))
  }

  /// The ids of the sessions that still run.
  pub fn ids(&self) -> Vec<u32> {
    let mut v: Vec<u32> = self.table().keys().copied().collect();
    v.sort_unstable();
    v
  }

  /// Terminate every session.
  pub async fn close(&self) {
    self.table().clear();
    self.pm.close().await;
  }

  /// Read session `id`'s output after `after` until it ends, `yield_time`
  /// passes, or it waits for input; `Err` is the answer when the read was
  /// cancelled or failed.
  async fn gather(
    &self,
    id: u32,
    process_id: &str,
    pid: u32,
    mut after: u64,
    yield_time: Duration,
    cancel: &CancellationToken,
  ) -> Result<Gathered, InteractiveResult> {
    let deadline = Instant::now() + yield_time;
    let mut last_output = Instant::now();
    let mut bytes = Vec::new();
    let mut dropped = false;
    let mut awaiting = false;
    let mut exit = None;
    loop {
      let now = Instant::now();
      let step = deadline
        .saturating_duration_since(now)
        .min(Duration::from_millis(50));
      let read = tokio::select! {
        r = self.pm.read(process_id, after, usize::MAX, step) => r,
        _ = cancel.cancelled() => return Err(self.cancelled(id, process_id).await),
      };
      let r = match read {
        Ok(r) => r,
        Err(e) => {
          self.table().remove(&id);
          return Err(InteractiveResult::failed(e));
        }
      };
      dropped |= r.truncated;
      if !r.chunks.is_empty() {
        last_output = Instant::now();
      }
      for c in r.chunks {
        bytes.extend_from_slice(&c.data);
      }
      after = r.last_seq;
      if r.closed {
        exit = r.exit;
        break;
      }
      if Instant::now() >= deadline {
        // a short yield (a write's 250 ms) still tells a prompt that came back
        awaiting =
          last_output.elapsed() >= QUIET_AT_DEADLINE && crate::platform::awaiting_input(pid as i32);
        break;
      }
      if last_output.elapsed() >= QUIET && crate::platform::awaiting_input(pid as i32) {
        // the program blocks on its terminal, but what it wrote before (the
        // prompt) may still be on its way through the terminal's pump: one
        // more short read, and go on if it brought anything
        match self.pm.read(process_id, after, usize::MAX, IN_FLIGHT).await {
          Ok(r) if !r.chunks.is_empty() || r.closed => {
            dropped |= r.truncated;
            for c in r.chunks {
              bytes.extend_from_slice(&c.data);
            }
            after = r.last_seq;
            last_output = Instant::now();
            if r.closed {
              exit = r.exit;
              break;
            }
            continue;
          }
          _ => {}
        }
        awaiting = true;
        break;
      }
    }
    Ok(Gathered {
      bytes,
      after,
      dropped,
      awaiting,
      exit,
    })
  }

  async fn collect(
    &self,
    id: u32,
    yield_time: Duration,
    cancel: Option<&CancellationToken>,
  ) -> InteractiveResult {
    let never = CancellationToken::new();
    let cancel = cancel.unwrap_or(&never);
    let (process_id, pid, mut after, limits, busy, tty, vocabulary) = match self.table().get(&id) {
      Some(s) => (
        s.process_id.clone(),
        s.pid,
        s.after_seq,
        s.limits,
        s.busy.clone(),
        s.tty,
        s.vocabulary,
      ),
      None => return InteractiveResult::failed(no_session(id)),
    };
    let _turn = tokio::select! {
      t = busy.lock() => t,
      _ = cancel.cancelled() => return self.cancelled(id, &process_id).await,
    };
    // another caller may have read meanwhile
    if let Some(s) = self.table().get(&id) {
      after = s.after_seq;
    }
    let got = match self
      .gather(id, &process_id, pid, after, yield_time, cancel)
      .await
    {
      Ok(g) => g,
      Err(done) => return done,
    };
    let Gathered {
      bytes,
      after,
      dropped,
      awaiting,
      exit,
    } = got;
    let running = exit.is_none();
    if running {
      if let Some(s) = self.table().get_mut(&id) {
        s.after_seq = after;
      }
    } else {
      self.table().remove(&id);
    }
    let raw = bytes.len();
    let seg = Segment {
      total_bytes: raw as u64,
      total_lines: count_lines(&bytes),
      bytes,
      head: Vec::new(),
      dropped: false,
    };
    let (rendered, _) = render_pair(&seg, &Segment::default(), limits);
    let output = StreamOutput {
      text: rendered.text,
      truncation: rendered.truncation,
      binary: rendered.binary,
    };
    let (exit_code, signal) = match &exit {
      Some(x) => (Some(x.exit_code), x.signal.clone()),
      None => (None, None),
    };
    let mut r = InteractiveResult {
      session_id: running.then_some(id),
      pid,
      output,
      exit_code,
      signal,
      awaiting_input: awaiting,
      dropped,
      text: String::new(),
      is_error: exit_code.is_some_and(|c| c != 0),
      error: exit.and_then(|x| x.error),
    };
    r.text = format_interactive(&r, raw, limits, yield_time, tty, vocabulary);
    r
  }
}

/// What [`Interactive::collect`]'s read loop brought.
struct Gathered {
  bytes: Vec<u8>,
  after: u64,
  dropped: bool,
  awaiting: bool,
  exit: Option<ExitInfo>,
}

fn no_session(id: u32) -> ExecError {
  ExecError::new(
    ErrorCode::ESRCH,
    format!("no interactive session {id} in this runner (it ended, or never existed)"),
  )
}

/// The answer as the model reads it.
fn format_interactive(
  r: &InteractiveResult,
  raw: usize,
  limits: OutputLimits,
  yield_time: Duration,
  tty: bool,
  vocabulary: Vocabulary,
) -> String {
  let input = if tty { "its terminal" } else { "its stdin" };
  // a terminal's Ctrl-D needs no word; on pipes it is this runner's doing
  let eof = if tty {
    ""
  } else {
    "; \"\\u0004\" closes its stdin (EOF)"
  };
  let waited = if yield_time < Duration::from_secs(1) {
    format!("{} ms", yield_time.as_millis())
  } else {
    format!("{:.1} s", yield_time.as_secs_f64())
  };
  let mut parts = Vec::new();
  if r.output.binary {
    parts.push(binary_notice(raw as u64, &LogStatus::NotNeeded));
  } else if r.output.text.is_empty() {
    parts.push("(no output)".to_owned());
  } else {
    parts.push(r.output.text.trim_end_matches('\n').to_owned());
  }
  let mut notes = Vec::new();
  if let Some(s) = truncation_sentence("output", &r.output.truncation, limits.max_bytes) {
    notes.push(s);
  }
  if r.dropped {
    notes.push(format!(
      "more than {} were not read in time and are lost",
      format_size(RETAINED)
    ));
  }
  if !notes.is_empty() {
    parts.push(format!("[{}]", notes.join("; ")));
  }
  let send = |id: u32| match vocabulary {
    Vocabulary::Api => format!("write({id}, ...)"),
    Vocabulary::Tool => format!("write_stdin with session_id {id}"),
  };
  match (r.session_id, &r.signal, r.exit_code) {
    (Some(id), _, _) if r.awaiting_input => parts.push(format!(
      "[waiting for input: session {id} (pid {}) is reading {input}; send keys with {}{eof}]",
      r.pid,
      send(id)
    )),
    (Some(id), _, _) => parts.push(format!(
      "[still running after {waited}: session {id} (pid {}); {} sends input and returns new output, \"\\u0003\" is Ctrl-C{eof}]",
      r.pid,
      send(id)
    )),
    (None, Some(sig), _) => parts.push(format!("killed by {sig}")),
    (None, None, Some(code)) => parts.push(format!("exit code: {code}")),
    (None, None, None) => {}
  }
  if let Some(e) = &r.error {
    parts.push(e.message());
  }
  parts.join("\n\n")
}
