//! A persistent bash: `cd`, `export`, aliases, functions and variables survive
//! from one command to the next.
//!
//! bash runs interactive (`-i --norc --noprofile --noediting`) with no
//! terminal, so it has no job control and every command runs in the shell's
//! process group, and SIGINT behaves as Ctrl+C does at a prompt: the running
//! line is abandoned (loops included), the shell and its state stay. Each
//! command is sent as one line, `eval $'<command>' </dev/null`, so it runs in
//! the main shell (state persists) with stdin at EOF (it cannot read the
//! channel the commands come from). Completion is reported by
//! `PROMPT_COMMAND`, which bash runs after every line, also after an
//! interrupted one: it writes the request id, the real `$?` and `$PWD` to the
//! control socket, NUL-terminated.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

use super::capture::{rendered_text, Capture, Streams};
use super::engine::{
  closed_error, exit_info, init_ended, init_timeout, Boot, Engine, Entered, Entry, Escalate,
  Followed, Outcome, Slot,
};
use super::lifecycle::{Kind, Session};
use super::queue::{Ticket, Turn};
use super::worker::{Worker, WorkerSpec};
use super::{CellOptions, SessionStatus};
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::{format_duration, Discard, OutputSink};
use crate::process::{ProcessOptions, RunOptions};

/// Sent once after bash starts. The completion report uses no variable (the
/// status comes as an argument, expanded from the read-only `PROMPT_COMMAND`)
/// and a read-only function, so a command can neither unset nor redefine
/// them. What a command can still do (redefine `builtin`, `enable -n printf`)
/// is detected: see [`ShellSession::run_request`].
const BOOTSTRAP: &str = concat!(
  "set +o history +H +m; unset HISTFILE; PS1=''; PS2=''; PS0=''; ",
  "__exec_done() { \\builtin printf 'D %d %s\\0' \"$1\" \"$PWD\" >&0; \\builtin return \"$1\"; }; ",
  "readonly -f __exec_done; PROMPT_COMMAND='__exec_done \"$?\"'; readonly PROMPT_COMMAND; ",
  "\\builtin printf 'R %d %s %s\\0' \"$$\" \"${BASH_VERSION:-}\" \"$PWD\" >&0\n"
);

/// A command still running after this long is checked for a shell that no
/// longer reports completion (then every [`PROBE_EVERY`]).
const PROBE_AFTER: Duration = Duration::from_millis(200);
const PROBE_EVERY: Duration = Duration::from_millis(100);

/// After the SIGINT of a timeout and the grace period: how long the
/// command's processes are killed (all but the shell) before the shell goes too.
const KILL_OTHERS_FOR: Duration = Duration::from_millis(1000);
const KILL_OTHERS_EVERY: Duration = Duration::from_millis(50);

/// How the session's shell is started.
#[derive(Debug, Clone)]
pub struct ShellOptions {
  /// bash: a name looked up in PATH or a path. Default `bash`.
  pub shell: String,
  /// cwd (`None`: the host's), environment, opt-in resource limits of the
  /// shell's whole tree (memory and processes watched; CPU time counts
  /// across commands, per process), `PR_SET_PDEATHSIG`, opt-in OS sandbox
  /// of the shell and every command.
  pub process: ProcessOptions,
  /// Run after every start of a shell (first start, restarts).
  pub init_script: Option<String>,
  pub owner: u64,
  /// The defaults of each command ([`RunOptions::session`]): its timeout
  /// (an interrupt, the shell's state kept), how long the command may take
  /// to stop after the SIGINT of its timeout before its processes are
  /// killed (`kill_grace`), the bytes kept per stream. A command's stdin is
  /// at EOF: an `input` is `EINVAL` at the start.
  pub run: RunOptions,
  /// Bound on starting the shell and running `init_script`.
  pub startup_timeout: Duration,
}

impl Default for ShellOptions {
  fn default() -> Self {
    ShellOptions {
      shell: "bash".into(),
      process: ProcessOptions::default(),
      init_script: None,
      owner: 0,
      run: RunOptions::session(),
      startup_timeout: Duration::from_secs(30),
    }
  }
}

/// The result of one command.
#[derive(Debug, Clone)]
pub struct ShellResult {
  pub status: SessionStatus,
  pub stdout: String,
  pub stderr: String,
  pub truncated: bool,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// The command's `$?`; 124 on timeout; with `Died`, the shell's exit code
  /// (128+N for signal N).
  pub exit_code: i32,
  /// The session's working directory after the command.
  pub cwd: String,
  pub execution_time: Duration,
  /// With `Died`: the signal that ended the shell.
  pub signal: Option<String>,
  /// The shell is gone, and its cwd, variables and functions with it; also
  /// set (with `restarted`) when the last one died between commands.
  pub state_lost: bool,
  /// This command ran in a new shell because the previous one was lost.
  pub restarted: bool,
  pub error: Option<ExecError>,
}

/// A command's request as it ended, with the shell that ran it.
struct Ran {
  w: Worker,
  outcome: Outcome<(i32, String)>,
  /// The timeout fired (and the shell's completion report still worked).
  timed_out: bool,
  /// `interrupt()` hit the command.
  interrupted: bool,
  /// The command switched off the shell's completion report.
  broken: bool,
}

impl ShellResult {
  /// A command that went well so far, in `cwd`: `settle` says how it ended.
  fn blank(entry: Entry, cwd: String, execution_time: Duration) -> ShellResult {
    ShellResult {
      status: SessionStatus::Ok,
      stdout: String::new(),
      stderr: String::new(),
      truncated: false,
      stdout_bytes: 0,
      stderr_bytes: 0,
      exit_code: 0,
      cwd,
      execution_time,
      signal: None,
      state_lost: entry.lost_idle,
      restarted: entry.restarted,
      error: None,
    }
  }

  fn with_streams(self, s: Streams) -> ShellResult {
    ShellResult {
      stdout: s.stdout,
      stderr: s.stderr,
      truncated: s.truncated,
      stdout_bytes: s.stdout_bytes,
      stderr_bytes: s.stderr_bytes,
      ..self
    }
  }
}

/// The shell's part of a session: its options.
pub struct Shell {
  opts: ShellOptions,
}

impl Kind for Shell {
  /// The shell's cwd.
  type State = String;
  fn fresh(&self) -> String {
    self.opts.process.cwd().display().to_string()
  }
}

/// A long-lived bash. Commands are queued (FIFO) and run one at a time.
pub type ShellSession = Session<Shell>;

pub use crate::language::ansi_c_quote;

impl ShellSession {
  /// Start bash and run `init_script`. Must be called within a tokio runtime.
  pub async fn start(mut opts: ShellOptions) -> Result<ShellSession, ExecError> {
    opts.run.refuse_input("a shell session")?;
    opts.process.resolve_cwd()?;
    let spec = WorkerSpec {
      program: PathBuf::from(&opts.shell),
      args: vec![
        "--norc".into(),
        "--noprofile".into(),
        "--noediting".into(),
        "-i".into(),
      ],
      separator: 0,
      process: opts.process.clone(),
    };
    let mut spec = spec;
    // bash logs itself out after TMOUT seconds at the prompt, which is where
    // a session's shell waits between commands
    spec.process.env.remove.push("TMOUT".into());
    let (owner, startup_timeout) = (opts.owner, opts.startup_timeout);
    Session::boot_new(Shell { opts }, spec, owner, startup_timeout).await
  }

  /// Send one command and follow it to its end. Returns how it ended, whether
  /// a timeout fired, and whether the shell stopped reporting completion.
  ///
  /// bash says `S <id>` before the command and `D <status> <cwd>` from
  /// `PROMPT_COMMAND` after it (and after every line it reads, so only the
  /// first D after the S counts). A command that redefines or disables what
  /// the report needs leaves bash waiting for input without a D: a command
  /// that runs long is probed with empty lines, which bash reads only when
  /// it is back at its prompt (the socket tells how much it has not read);
  /// two probes read and still no D means the report is broken. `run`: its
  /// timeout and the grace after the timeout's SIGINT.
  #[allow(clippy::too_many_arguments)]
  async fn run_request<O: OutputSink, E: OutputSink>(
    &self,
    w: &mut Worker,
    gen: u64,
    id: u64,
    command: &str,
    out: &mut O,
    err: &mut E,
    run: &RunOptions,
  ) -> Result<(Followed<(i32, String)>, bool, bool), ExecError> {
    if command.contains('\0') {
      return Err(ExecError::invalid("command contains a NUL byte"));
    }
    let line = format!(
      "\\builtin printf 'S {id}\\0' >&0; \\builtin eval {} </dev/null\n",
      ansi_c_quote(command)
    );
    let (deadline, sent) = self
      .engine
      .send_request(w, gen, line.as_bytes(), run.timeout)
      .await;
    // 0: running, 1: interrupted by the timeout, 2..: killing the command's
    // processes; u32::MAX: the line could not be sent
    let mut phase = if sent { 0u32 } else { u32::MAX };
    let mut kill_until = None;
    // the timeout's schedule, and the probes'
    let mut escalate_at = deadline;
    let mut probe_at = sent.then(|| Instant::now() + PROBE_AFTER);
    let mut probes = 0u32;
    let mut broken = false;
    let first = match (deadline, probe_at) {
      (Some(a), Some(b)) => Some(a.min(b)),
      (a, b) => a.or(b),
    };
    let started = std::sync::atomic::AtomicBool::new(false);
    // `$?`, `$PWD`
    let on_message = |m: &[u8]| report(m, id, &started, || self.engine.queue.started());
    let on_deadline = |w: &mut Worker| {
      let now = Instant::now();
      if probe_at.is_some_and(|t| now >= t) {
        probe_at = match w.unread_by_worker() {
          // bash has not read everything yet: it is busy
          Some(n) if n > 0 => Some(now + PROBE_EVERY),
          Some(_) if probes < 2 => {
            probes += 1;
            w.try_send(b"\n").then(|| now + Duration::from_millis(20))
          }
          Some(_) => {
            if w.poll_messages() {
              // a report came meanwhile: it is handled first
              return Escalate::Until(Some(now));
            }
            // a timeout's SIGINT before the command started is a timeout
            broken = started.load(std::sync::atomic::Ordering::Relaxed) || phase == 0;
            return Escalate::Kill;
          }
          None => None,
        };
      }
      if escalate_at.is_some_and(|t| now >= t) {
        escalate_at = match phase {
          u32::MAX => return Escalate::Kill,
          0 => {
            phase = 1;
            w.signal(Signal::SIGINT);
            Some(now + run.kill_grace)
          }
          _ => {
            // SIGINT was not enough: kill the command's processes, keep the shell
            let until = *kill_until.get_or_insert_with(|| now + KILL_OTHERS_FOR);
            if now >= until {
              return Escalate::Kill;
            }
            phase += 1;
            w.kill_others();
            Some(now + KILL_OTHERS_EVERY)
          }
        };
      }
      Escalate::Until(match (escalate_at, probe_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
      })
    };
    let followed = self
      .engine
      .follow(w, out, err, first, None, on_message, on_deadline)
      .await;
    Ok((followed, phase > 0 && phase != u32::MAX, broken))
  }

  /// Run a command. Output goes to `out`/`err` as it comes (and is captured).
  /// Errors only for bad input, a closed session, or a shell that cannot be
  /// restarted.
  pub fn execute<O: OutputSink, E: OutputSink>(
    self: &Arc<Self>,
    command: String,
    opts: CellOptions,
    out: O,
    err: E,
  ) -> impl Future<Output = Result<ShellResult, ExecError>> + Send + 'static {
    let (ticket, run) = self.execute_ticketed(command, opts, out, err);
    async move {
      let r = run.await;
      drop(ticket);
      r
    }
  }

  /// [`Self::execute`], with the command's [`Ticket`]: `interrupt()` targets
  /// the command until the caller drops it (once it has taken the result).
  pub fn execute_ticketed<O: OutputSink, E: OutputSink>(
    self: &Arc<Self>,
    command: String,
    opts: CellOptions,
    out: O,
    err: E,
  ) -> (
    Ticket,
    impl Future<Output = Result<ShellResult, ExecError>> + Send + 'static,
  ) {
    // the place in the queue is taken now, in call order
    self.in_turn(move |this, turn| async move {
      this.execute_in_turn(turn, &command, &opts, out, err).await
    })
  }

  async fn execute_in_turn<O: OutputSink, E: OutputSink>(
    &self,
    mut turn: Turn,
    command: &str,
    opts: &CellOptions,
    out: O,
    err: E,
  ) -> Result<ShellResult, ExecError> {
    if command.contains('\0') {
      return Err(ExecError::invalid("command contains a NUL byte"));
    }
    let run = opts.run_over(&self.opts.run)?;
    let entered = self.engine.enter(&mut turn, self).await?;
    let mut out = Capture::new(run.max_output_bytes, out);
    let mut err = TtyNoise::new(Capture::new(run.max_output_bytes, err), &self.engine.shown);
    let started = Instant::now();
    let (mut slot, entry, ran) = self
      .run_command(entered, &turn, command, &run, &mut out, &mut err)
      .await?;
    let mut result = ShellResult::blank(entry, slot.state.clone(), started.elapsed());
    self.settle(&mut slot, ran, &run, &mut result).await;
    let streams = Engine::finish(slot, turn, out, err.into_inner()).await;
    Ok(result.with_streams(streams))
  }

  /// Run the command's request in the slot's shell; in a new one if that one
  /// turns out to have died before it started the command.
  async fn run_command<'a, O: OutputSink, E: OutputSink>(
    &self,
    entered: Entered<'a, String>,
    turn: &Turn,
    command: &str,
    run: &RunOptions,
    out: &mut O,
    err: &mut TtyNoise<E>,
  ) -> Result<(MutexGuard<'a, Slot<String>>, Entry, Ran), ExecError> {
    let (mut slot, mut entry) = entered;
    let mut retried = false;
    loop {
      let id = slot.take_id();
      let mut w = slot.worker.take().expect("a shell was started");
      err.pid = w.pid;
      let (run, timed_out, broken) = self
        .run_request(&mut w, turn.gen(), id, command, out, err, run)
        .await?;
      // the shell died before it started the command (between commands, and
      // the death was not seen yet): the command runs in a new one
      if let (Outcome::Died(st), false, false) = (&run.outcome, run.started, retried) {
        let st = *st;
        let cwd = self.opts.process.cwd().display().to_string();
        (slot, entry) = self
          .engine
          .replace_dead(slot, w, st, self, |s| *s = cwd, entry)
          .await?;
        retried = true;
        continue;
      }
      let ran = Ran {
        w,
        outcome: run.outcome,
        timed_out: timed_out && !broken,
        interrupted: run.interrupted,
        broken,
      };
      return Ok((slot, entry, ran));
    }
  }

  /// Fill `result` from how the command ended (`run`: its timeout); the
  /// shell goes back into the slot, or is cleared away when it was lost.
  async fn settle(
    &self,
    slot: &mut Slot<String>,
    ran: Ran,
    run: &RunOptions,
    result: &mut ShellResult,
  ) {
    let Ran {
      mut w,
      outcome,
      timed_out,
      interrupted,
      broken,
    } = ran;
    let timeout_label = run.timeout.map(format_duration).unwrap_or_default();
    // a watched limit passed by the end of the command (processes it left, a
    // fork the kernel refused) is this command's, not the next one's
    let outcome = match outcome {
      Outcome::Done(_) if w.over_limit_now() => Outcome::Died(None),
      o => o,
    };
    match outcome {
      Outcome::Done((code, cwd)) => {
        slot.state = cwd.clone();
        result.cwd = cwd;
        result.exit_code = code;
        result.status = if timed_out {
          result.exit_code = 124;
          result.error = Some(ExecError::new(
            ErrorCode::TIMEOUT,
            format!("Shell command timeout after {timeout_label}; it was stopped and the shell's state is kept"),
          ));
          SessionStatus::Timeout
        } else if interrupted {
          SessionStatus::Interrupted
        } else if code == 0 {
          SessionStatus::Ok
        } else {
          // a command killed by SIGXCPU/SIGXFSZ under the limits (the shell
          // reports 128+N): say which limit
          result.error = w.explain_exit_code(code);
          SessionStatus::Error
        };
        slot.worker = Some(w);
      }
      Outcome::Died(st) | Outcome::Killed(st) => {
        let killed = matches!(outcome, Outcome::Killed(_));
        // a kill for a broken completion report is not a timeout
        let timed_out = (killed && !broken) || timed_out;
        self
          .settle_lost(slot, w, st, timed_out, broken, &timeout_label, result)
          .await;
      }
      Outcome::Canceled => {
        result.status = SessionStatus::Died;
        result.exit_code = -1;
        result.state_lost = true;
        result.error = Some(closed_error());
        self.engine.gone();
        drop(w);
      }
    }
  }

  /// The shell died or was killed (`timed_out`: by the timeout; `broken`:
  /// because the command switched off its completion report): its state is
  /// lost.
  #[allow(clippy::too_many_arguments)]
  async fn settle_lost(
    &self,
    slot: &mut Slot<String>,
    w: Worker,
    st: Option<ExitStatus>,
    timed_out: bool,
    broken: bool,
    timeout_label: &str,
    result: &mut ShellResult,
  ) {
    let lost = self
      .engine
      .lost(slot, w, st, timed_out, || {
        ExecError::new(
          ErrorCode::TIMEOUT,
          format!("Shell command timeout after {timeout_label}; it could not be stopped, so the shell was killed and its state lost"),
        )
      })
      .await;
    result.exit_code = lost.exit_code.unwrap_or(-1);
    result.signal = lost.signal;
    result.state_lost = true;
    if lost.status == SessionStatus::Timeout {
      result.exit_code = 124;
    }
    result.status = lost.status;
    result.error = lost.error;
    if broken && result.error.is_none() {
      result.error = Some(ExecError::new(
        ErrorCode::EIO,
        "the command switched off the shell session's completion report (it redefined or disabled a builtin the session needs, such as `builtin` or `printf`), so the shell was killed and its state lost; the next command starts a new shell",
      ));
    }
    slot.state = self.opts.process.cwd().display().to_string();
  }
}

impl Boot<String> for ShellSession {
  /// Start bash, send it the bootstrap and run `init_script`.
  async fn boot(&self, slot: &mut Slot<String>) -> Result<(), ExecError> {
    let shown = &self.engine.shown;
    let cwd = &mut slot.state;
    let on_message = |m: &[u8]| {
      let text = String::from_utf8_lossy(m).into_owned();
      let mut parts = text.splitn(4, ' ');
      if parts.next() != Some("R") {
        return None;
      }
      let _pid = parts.next();
      if parts.next().unwrap_or("").is_empty() {
        return Some(Err(ExecError::invalid(format!(
          "{shown} is not bash (BASH_VERSION is not set)"
        ))));
      }
      if let Some(c) = parts.next() {
        *cwd = c.to_owned();
      }
      Some(Ok(()))
    };
    let mut w = self
      .engine
      .spawn_ready(Some(BOOTSTRAP.as_bytes()), on_message)
      .await?;
    if let Some(init) = self.opts.init_script.clone() {
      let id = slot.take_id();
      let mut out = Capture::new(4096, Discard);
      let mut err = Capture::new(4096, Discard);
      let run = RunOptions {
        timeout: Some(self.opts.startup_timeout),
        ..self.opts.run.without_input()
      };
      match self
        .run_request(&mut w, 0, id, &init, &mut out, &mut err, &run)
        .await
      {
        Ok((
          Followed {
            outcome: Outcome::Done((_, cwd)),
            ..
          },
          false,
          _,
        )) => slot.state = cwd,
        Ok((
          Followed {
            outcome: Outcome::Canceled,
            ..
          },
          _,
          _,
        )) => return Err(closed_error()),
        Ok((Followed { outcome, .. }, timed_out, _)) => {
          let st = match outcome {
            Outcome::Died(st) | Outcome::Killed(st) => st,
            _ => None,
          };
          let st = init_ended(&mut w, st, "initScript").await?;
          if timed_out {
            return Err(init_timeout("initScript", self.opts.startup_timeout));
          }
          let (code, _) = exit_info(st);
          let (text, _) = rendered_text(&err.buf);
          return Err(ExecError::invalid(format!(
            "initScript did not complete (exit code {}): {}",
            code.unwrap_or(-1),
            text.trim()
          )));
        }
        Err(e) => {
          w.kill().await;
          return Err(e);
        }
      }
    }
    self.engine.install(slot, w);
    Ok(())
  }
}

/// Drops the line an interactive bash without a terminal prints when a
/// command dies by a signal (it tries to restore the terminal's modes on its
/// stderr): `bash: [<pid>: 2 (255)] tcsetattr: Inappropriate ioctl for
/// device`. Only that exact line of that shell, with its pid, is dropped;
/// a partial line is held back only while it can still be that line.
struct TtyNoise<E: OutputSink> {
  inner: E,
  /// The shell's name as bash prints it in its errors.
  name: String,
  /// The shell's pid.
  pid: i32,
  /// The start of the current line, while it may be the noise.
  held: Vec<u8>,
  /// Inside a line that is not the noise (passed through up to its end).
  passing: bool,
}

enum Noise {
  Yes,
  Maybe,
  No,
}

impl<E: OutputSink> TtyNoise<E> {
  fn new(inner: E, shown: &str) -> Self {
    let name = std::path::Path::new(shown)
      .file_name()
      .map(|n| n.to_string_lossy().into_owned())
      .unwrap_or_else(|| shown.to_owned());
    TtyNoise {
      inner,
      name,
      pid: 0,
      held: Vec::new(),
      passing: false,
    }
  }

  /// Whether `line` (from a line start) is, may become, or is not the noise.
  fn classify(&self, line: &[u8]) -> Noise {
    let head = format!("{}: [{}: ", self.name, self.pid);
    let head = head.as_bytes();
    let n = line.len().min(head.len());
    if line[..n] != head[..n] || line.len() > 512 {
      return Noise::No;
    }
    // `<digits> (<digits>)] tcsetattr: <text>\n`
    let mut rest = &line[n..];
    if line.len() < head.len() {
      return Noise::Maybe;
    }
    for part in [None, Some(&b" ("[..]), None, Some(&b")] tcsetattr: "[..])] {
      match part {
        None => {
          let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
          if digits == rest.len() {
            return Noise::Maybe;
          }
          if digits == 0 {
            return Noise::No;
          }
          rest = &rest[digits..];
        }
        Some(lit) => {
          let k = rest.len().min(lit.len());
          if rest[..k] != lit[..k] {
            return Noise::No;
          }
          if k < lit.len() {
            return Noise::Maybe;
          }
          rest = &rest[k..];
        }
      }
    }
    if rest.ends_with(b"\n") {
      Noise::Yes
    } else {
      Noise::Maybe
    }
  }

  /// What was held goes out, and the sink itself.
  fn into_inner(mut self) -> E {
    let held = std::mem::take(&mut self.held);
    self.inner.write(&held);
    self.inner
  }
}

impl<E: OutputSink> OutputSink for TtyNoise<E> {
  fn write(&mut self, mut data: &[u8]) {
    while !data.is_empty() {
      let end = data.iter().position(|&b| b == b'\n').map(|i| i + 1);
      let (piece, rest) = data.split_at(end.unwrap_or(data.len()));
      data = rest;
      if self.passing {
        self.inner.write(piece);
        self.passing = end.is_none();
        continue;
      }
      self.held.extend_from_slice(piece);
      match self.classify(&self.held) {
        Noise::Yes => self.held.clear(),
        Noise::Maybe => {}
        Noise::No => {
          let held = std::mem::take(&mut self.held);
          self.inner.write(&held);
          self.passing = end.is_none();
        }
      }
    }
  }
  fn next_tick(&self) -> Option<Instant> {
    self.inner.next_tick()
  }
  fn tick(&mut self) {
    self.inner.tick()
  }
  async fn ready(&mut self) {
    self.inner.ready().await
  }
  async fn finish(&mut self) {
    self.inner.finish().await
  }
}

/// What bash's control message `m` says of request `id`: `S <id>` (it
/// started: `started` is set and `on_start` runs) or, once started,
/// `D <status> <cwd>` (it is done: `$?` and `$PWD`).
fn report(
  m: &[u8],
  id: u64,
  started: &std::sync::atomic::AtomicBool,
  on_start: impl FnOnce(),
) -> Option<(i32, String)> {
  let text = String::from_utf8_lossy(m).into_owned();
  let mut parts = text.splitn(3, ' ');
  match parts.next().unwrap_or("") {
    "S" if parts.next().and_then(|s| s.parse::<u64>().ok()) == Some(id) => {
      started.store(true, std::sync::atomic::Ordering::Relaxed);
      on_start();
    }
    "D" if started.load(std::sync::atomic::Ordering::Relaxed) => {
      let status = parts.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
      let cwd = parts.next().unwrap_or("").to_owned();
      return Some((status, cwd));
    }
    _ => {}
  }
  None
}

#[cfg(test)]
mod tests {
  use super::*;

  fn filtered(chunks: &[&str]) -> String {
    let mut f = TtyNoise::new(crate::buffer::HeadTailBuffer::new(1 << 16), "/usr/bin/bash");
    f.pid = 42;
    for c in chunks {
      f.write(c.as_bytes());
    }
    let b = f.into_inner();
    String::from_utf8(b.render().bytes).unwrap()
  }

  #[test]
  fn drops_only_the_shells_own_tcsetattr_line() {
    let noise = "bash: [42: 2 (255)] tcsetattr: Inappropriate ioctl for device\n";
    assert_eq!(filtered(&[noise]), "");
    assert_eq!(filtered(&["a\n", noise, "b\n"]), "a\nb\n");
    // split anywhere
    let all = format!("x\n{noise}y");
    for i in 0..all.len() {
      assert_eq!(filtered(&[&all[..i], &all[i..]]), "x\ny", "split at {i}");
    }
    // another pid, another message, or not at a line start: kept
    for kept in [
      "bash: [43: 2 (255)] tcsetattr: Inappropriate ioctl for device\n",
      "bash: [42: 2 (255)] tcgetattr: x\n",
      "> bash: [42: 2 (255)] tcsetattr: x\n",
      "bash: [42: \n",
      "bash: [4",
    ] {
      assert_eq!(filtered(&[kept]), kept);
    }
  }
}
