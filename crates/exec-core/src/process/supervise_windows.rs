//! Windows: a run of a pipe child, its tree in a Job Object. The same
//! contract as the POSIX [`super::Execution`]: pumps on the runtime, the
//! timeout and cancellation, the tree's end, the outcome after the exit plus
//! a bounded drain.
//!
//! - The child is created suspended in a new process group, assigned to a
//!   new job (`KILL_ON_JOB_CLOSE`, with the run's limits), then resumed: its
//!   whole tree is in the job from the first instruction.
//! - A timeout, `cancel` or `kill()` sends `CTRL_BREAK_EVENT` to its group,
//!   then ends the job (`TerminateJobObject`) after the grace; when the host
//!   cannot send the event (no console of its own), the job is ended at once.
//! - There are no signals: `signal` is always `None` and the exit code is
//!   the process's own (a timeout still reports 124).
//! - `.cmd` / `.bat` programs run through `cmd.exe` with every argument
//!   quoted for it; an argument cmd.exe would expand or split whatever the
//!   quoting (`"`, `%`, a line break) is refused with `EINVAL` (the class of
//!   CVE-2024-27980 and CVE-2024-24576). A program that *is* `cmd.exe` gets
//!   its arguments verbatim, as Node gives them.

use std::ffi::{OsStr, OsString};
use std::os::windows::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::drain::joined;
use super::exit::sleep_until_opt;
use super::sink::rearm_tick;
use super::{
  canceled_before_start, format_duration, Catchup, Finished, OutputSink, ProcessSpec, RunOutcome,
  RunPolicy,
};
use crate::error::{ErrorCode, ExecError};
use crate::platform::{self, Job, JobLimitHit, JobLimits, PseudoConsole};
use crate::process::limits::{cpu_error, memory_error, process_error, Limits};
use crate::process::registry::{self, TERMINATED_EXIT};

const READ_BUF: usize = 64 * 1024;

/// The two pump tasks of a run.
type Pumps<O, E> = (JoinHandle<(O, u64)>, JoinHandle<(E, u64)>);
/// Their catch-up barriers (polled pumps only).
type Catchups = [Option<Arc<Catchup>>; 2];

/// A spawned child whose output is being pumped.
pub struct Execution<O: OutputSink, E: OutputSink> {
  child: RunChild,
  /// The pseudo console a terminal child runs on, closed after its exit
  /// (its output reaches its EOF then).
  console: Option<Arc<PseudoConsole>>,
  pid: u32,
  job: Arc<Job>,
  started: Instant,
  stdin: Option<ChildStdin>,
  input_task: Option<JoinHandle<()>>,
  pumps: Option<Pumps<O, E>>,
  /// The pumps' catch-up barriers, when they read by polling
  /// ([`Reads::Polled`]).
  catchups: Catchups,
  stop: CancellationToken,
  mark: String,
  limits: Limits,
  /// The spec's timeout and kill grace (its input was handed to the feed).
  run: crate::process::RunOptions,
}

/// The limits a job can hold; the others have no Windows form.
pub(crate) fn job_limits(l: &Limits) -> Result<JobLimits, ExecError> {
  let none = |name: &str| {
    ExecError::invalid(format!(
      "limits.{name} has no Windows form (a Job Object limits memoryBytes, maxProcesses and cpuSeconds)"
    ))
  };
  if l.file_size_bytes.is_some() {
    return Err(none("fileSizeBytes"));
  }
  if l.open_files.is_some() {
    return Err(none("openFiles"));
  }
  Ok(JobLimits {
    memory_bytes: l.memory_bytes,
    max_processes: l.max_processes,
    cpu_seconds: l.cpu_seconds,
  })
}

fn is_named(p: &Path, name: &str) -> bool {
  p.file_name()
    .is_some_and(|f| f.to_string_lossy().eq_ignore_ascii_case(name))
}

fn is_batch(p: &Path) -> bool {
  p.extension().is_some_and(|e| {
    let e = e.to_string_lossy();
    e.eq_ignore_ascii_case("cmd") || e.eq_ignore_ascii_case("bat")
  })
}

/// `cmd.exe`, as the system names it.
fn cmd_exe() -> PathBuf {
  std::env::var_os("ComSpec")
    .map(PathBuf::from)
    .unwrap_or_else(|| PathBuf::from("cmd.exe"))
}

/// One argument of a `.cmd`/`.bat` file, quoted for cmd.exe. Inside double
/// quotes cmd.exe takes `& | < > ^ ( )` and spaces literally; what it would
/// still act on cannot be passed safely and is refused.
pub fn batch_quote(arg: &OsStr, what: &str) -> Result<String, ExecError> {
  let s = arg.to_str().ok_or_else(|| {
    ExecError::invalid(format!("{what} of a .cmd/.bat file is not valid Unicode"))
  })?;
  for bad in ['"', '%', '\r', '\n', '\0'] {
    if s.contains(bad) {
      return Err(ExecError::invalid(format!(
        "{what} of a .cmd/.bat file contains {bad:?}, which cmd.exe would act on whatever the quoting: refused (run it through cmd yourself if you mean it)"
      )));
    }
  }
  let plain = !s.is_empty()
    && s
      .chars()
      .all(|c| c.is_ascii_alphanumeric() || "-_.:/\\+@#$~[]{}'`*?".contains(c));
  Ok(if plain {
    s.to_owned()
  } else {
    format!("\"{s}\"")
  })
}

/// What runs for `spec`, and its arguments as one string, as they follow the
/// program's name on its command line: a `.cmd`/`.bat` through cmd.exe,
/// cmd.exe itself with verbatim arguments, anything else quoted as the C
/// runtime splits them back (std's rules).
fn launch(spec: &ProcessSpec) -> Result<(PathBuf, OsString), ExecError> {
  if is_batch(&spec.program) {
    let mut line = vec![batch_quote(spec.program.as_os_str(), "the path")?];
    for (i, a) in spec.args.iter().enumerate() {
      line.push(batch_quote(a, &format!("argument {}", i + 1))?);
    }
    // /d: no AutoRun; /e:ON /v:OFF: fixed expansion rules; /s /c "...": the
    // outer quotes are removed and the rest taken as typed
    let tail = format!("/d /e:ON /v:OFF /s /c \"{}\"", line.join(" "));
    return Ok((cmd_exe(), tail.into()));
  }
  let verbatim = is_named(&spec.program, "cmd.exe") || is_named(&spec.program, "cmd");
  let mut tail = OsString::new();
  for (i, a) in spec.args.iter().enumerate() {
    if i > 0 {
      tail.push(" ");
    }
    if verbatim {
      tail.push(a);
    } else {
      quote_arg(&mut tail, a, false);
    }
  }
  Ok((spec.program.clone(), tail))
}

/// Append `arg` to a command line, quoted (always with `force`, else when
/// empty or holding a space or tab) and its quotes escaped, as the C
/// runtime's argument splitting reads it back: std's `make_command_line`.
fn quote_arg(line: &mut OsString, arg: &OsStr, force: bool) {
  use std::os::windows::ffi::{OsStrExt, OsStringExt};
  const QUOTE: u16 = b'"' as u16;
  const BACKSLASH: u16 = b'\\' as u16;
  let wide: Vec<u16> = arg.encode_wide().collect();
  let quote =
    force || wide.is_empty() || wide.iter().any(|&c| c == b' ' as u16 || c == b'\t' as u16);
  let mut out = Vec::with_capacity(wide.len() + 2);
  if quote {
    out.push(QUOTE);
  }
  let mut backslashes = 0usize;
  for c in wide {
    if c == BACKSLASH {
      backslashes += 1;
    } else {
      if c == QUOTE {
        out.extend(std::iter::repeat_n(BACKSLASH, backslashes + 1));
      }
      backslashes = 0;
    }
    out.push(c);
  }
  if quote {
    out.extend(std::iter::repeat_n(BACKSLASH, backslashes));
    out.push(QUOTE);
  }
  line.push(OsString::from_wide(&out));
}

/// The command for `spec` ([`launch`]).
fn base_command(spec: &ProcessSpec) -> Result<std::process::Command, ExecError> {
  let (program, tail) = launch(spec)?;
  let mut cmd = std::process::Command::new(program);
  if !tail.is_empty() {
    cmd.raw_arg(tail);
  }
  Ok(cmd)
}

/// The whole command line of `spec` and the program it starts, for a child
/// created without std (one on a pseudo console).
fn command_line(spec: &ProcessSpec) -> Result<(PathBuf, OsString), ExecError> {
  let (program, tail) = launch(spec)?;
  if program.as_os_str().to_string_lossy().contains('"') {
    return Err(ExecError::invalid(
      "the program's path contains a double quote",
    ));
  }
  let mut line = OsString::new();
  quote_arg(&mut line, program.as_os_str(), true);
  if !tail.is_empty() {
    line.push(" ");
    line.push(tail);
  }
  Ok((program, line))
}

fn build_command(
  spec: &ProcessSpec,
  mark: &str,
  extra_env: &[(&str, &str)],
) -> Result<tokio::process::Command, ExecError> {
  let mut cmd = base_command(spec)?;
  if let Some(cwd) = &spec.process.cwd {
    cmd.current_dir(cwd);
  }
  if !spec.process.env.is_plain_inherit() {
    cmd.env_clear();
    cmd.envs(spec.process.env.build());
  }
  cmd.env(MARK_VAR, mark);
  for (k, v) in extra_env {
    cmd.env(k, v);
  }
  cmd.creation_flags(platform::CREATE_NEW_PROCESS_GROUP | platform::CREATE_SUSPENDED);
  cmd.stdin(if spec.stdin_piped() {
    Stdio::piped()
  } else {
    Stdio::null()
  });
  cmd.stdout(Stdio::piped());
  cmd.stderr(Stdio::piped());
  Ok(tokio::process::Command::from(cmd))
}

/// How a run's pumps read its pipes.
#[derive(Clone, Copy)]
enum Reads {
  /// A read that waits for bytes, on tokio's blocking pool (anonymous pipes
  /// have no readiness on Windows): a byte is delivered as soon as it comes.
  Blocking,
  /// What `PeekNamedPipe` says the pipe holds, read without waiting, the pipe
  /// looked at again after a pause that grows while it stays empty
  /// ([`POLL_MIN`] to [`POLL_MAX`]), and at once when a catch-up is asked:
  /// "everything the pipe holds now" can then be read, which a read in
  /// flight on another thread cannot tell (a session's worker, whose output
  /// must be split exactly at each control message).
  Polled,
}

/// The first pause of a polled pump after the pipe was found empty.
const POLL_MIN: Duration = Duration::from_millis(1);
/// The longest pause of a polled pump (the delay of a byte that comes after
/// a quiet spell; a catch-up does not wait for it).
const POLL_MAX: Duration = Duration::from_millis(20);
/// At most this much is read in one look at a polled pipe (a writer that
/// never lets it empty still yields to the loop).
const POLL_READ_MAX: u64 = 8 * 1024 * 1024;

/// The process a run follows (one per run: its size does not matter).
#[allow(clippy::large_enum_variant)]
enum RunChild {
  /// A pipe child, as tokio holds it.
  Piped(Child),
  /// A child on a pseudo console ([`Execution::on_console`]).
  Console(ConsoleChild),
}

impl RunChild {
  async fn wait(&mut self) -> std::io::Result<ExitStatus> {
    match self {
      RunChild::Piped(c) => c.wait().await,
      RunChild::Console(c) => c.wait().await,
    }
  }
}

/// A child created on a pseudo console: its exit is waited for on a thread
/// of the blocking pool (the exit code then read), once, and told to every
/// `wait`.
struct ConsoleChild {
  exit: tokio::sync::watch::Receiver<Option<Result<u32, i32>>>,
}

impl ConsoleChild {
  fn follow(process: std::os::windows::io::OwnedHandle) -> ConsoleChild {
    let (tx, exit) = tokio::sync::watch::channel(None);
    tokio::task::spawn_blocking(move || {
      let r = platform::wait_exit(&process).map_err(|e| e.raw_os_error().unwrap_or(-1));
      let _ = tx.send(Some(r));
    });
    ConsoleChild { exit }
  }

  async fn wait(&mut self) -> std::io::Result<ExitStatus> {
    use std::os::windows::process::ExitStatusExt;
    let seen = self.exit.wait_for(Option::is_some).await.map(|v| *v);
    match seen {
      Ok(Some(Ok(code))) => Ok(ExitStatus::from_raw(code)),
      Ok(Some(Err(e))) => Err(std::io::Error::from_raw_os_error(e)),
      _ => Err(std::io::Error::other("the wait for the process was lost")),
    }
  }
}

/// Put a suspended child in `job` and let it run. On failure the child is
/// ended (it never ran a single instruction outside the job).
pub(crate) fn enter_job(child: &mut Child, job: &Job, pid: u32) -> Result<(), ExecError> {
  let handle = child.raw_handle().unwrap_or(std::ptr::null_mut());
  let r = job
    .assign(handle)
    .map_err(|e| format!("cannot put it in a Job Object: {e}"))
    .and_then(|_| platform::resume_process(pid).map_err(|e| format!("cannot resume it: {e}")));
  r.map(|_| ()).map_err(|why| {
    let _ = child.start_kill();
    ExecError::new(ErrorCode::ESPAWN, why)
  })
}

impl<O: OutputSink, E: OutputSink> Execution<O, E> {
  /// [`Execution::spawn`], for a caller that awaits `wait` at once (on
  /// POSIX its pumps are then polled by that wait; here they are tasks
  /// either way).
  pub fn spawn_waited(
    spec: &ProcessSpec,
    owner: u64,
    stdout: O,
    stderr: E,
  ) -> Result<Self, ExecError> {
    Self::spawn(spec, owner, stdout, stderr)
  }

  /// Start `spec`. Must be called within a tokio runtime.
  pub fn spawn(spec: &ProcessSpec, owner: u64, stdout: O, stderr: E) -> Result<Self, ExecError> {
    Self::start(spec, owner, (stdout, stderr), Reads::Blocking, &[])
  }

  /// [`Execution::spawn`] for a child that lives through many requests (a
  /// session's worker): its pumps answer a catch-up barrier
  /// ([`Execution::catchups`]), so they read by polling what the pipe holds
  /// ([`Reads::Polled`]); `extra_env` is set over the spec's environment
  /// (the worker's control channel).
  pub(crate) fn spawn_with_catchup(
    spec: &ProcessSpec,
    owner: u64,
    stdout: O,
    stderr: E,
    extra_env: &[(&str, &str)],
  ) -> Result<Self, ExecError> {
    Self::start(spec, owner, (stdout, stderr), Reads::Polled, extra_env)
  }

  fn start(
    spec: &ProcessSpec,
    owner: u64,
    (stdout, stderr): (O, E),
    reads: Reads,
    extra_env: &[(&str, &str)],
  ) -> Result<Self, ExecError> {
    let (job, mark) = Self::prepare(spec, owner)?;
    let mut cmd = build_command(spec, &mark, extra_env)?;
    let started = Instant::now();
    let shown = spec.program.display().to_string();
    let mut child = cmd.spawn().map_err(|e| ExecError::from_spawn(&shown, &e))?;
    let pid = child.id().unwrap_or(0);
    enter_job(&mut child, &job, pid)?;
    registry::register(pid as i32, owner, job.clone());

    let stop = CancellationToken::new();
    let out = child.stdout.take().expect("stdout is piped");
    let err = child.stderr.take().expect("stderr is piped");
    let (pumps, catchups) = match start_pumps(reads, (out, err), (stdout, stderr), &stop) {
      Ok(p) => p,
      Err(e) => {
        job.terminate(TERMINATED_EXIT);
        registry::unregister(pid as i32);
        return Err(ExecError::new(
          ErrorCode::EIO,
          format!("cannot read the output pipes of process {pid}: {e}"),
        ));
      }
    };
    let mut stdin = child.stdin.take();
    let mut input_task = None;
    if let Some(bytes) = &spec.run.input {
      if let Some(mut w) = stdin.take() {
        let bytes = bytes.clone();
        input_task = Some(tokio::spawn(async move {
          // a child that did not read it all is not an error of the run
          let _ = w.write_all(&bytes).await;
          let _ = w.shutdown().await;
        }));
      }
    }
    Ok(Execution {
      child: RunChild::Piped(child),
      console: None,
      pid,
      job,
      started,
      stdin,
      input_task,
      pumps: Some(pumps),
      catchups,
      stop,
      mark,
      limits: spec.process.limits.clone(),
      run: spec.run.without_input(),
    })
  }

  /// What every start checks and makes first: the spec's environment and
  /// arguments checked, a sandbox refused (fail closed), the job with the
  /// run's limits, the host's leave checked, the run's mark.
  fn prepare(spec: &ProcessSpec, owner: u64) -> Result<(Arc<Job>, String), ExecError> {
    spec.process.env.validate()?;
    for a in &spec.args {
      if a.as_encoded_bytes().contains(&0) {
        return Err(ExecError::invalid("an argument contains a NUL byte"));
      }
    }
    if spec.process.sandbox.is_some() {
      // fail closed: nothing runs unconfined when confinement was asked for
      return Err(ExecError::new(
        ErrorCode::ESANDBOX,
        "the sandbox is not available on Windows yet: nothing ran",
      ));
    }
    // `die_with_parent` needs nothing more: every job ends with the host
    let limits = job_limits(&spec.process.limits)?;
    registry::begin_spawn(owner)?;
    let job = Arc::new(Job::new(limits).map_err(|e| {
      ExecError::new(
        ErrorCode::ESPAWN,
        format!("cannot create a Job Object: {e}"),
      )
    })?);
    Ok((job, registry::new_mark(owner)))
  }

  /// Start `spec` on a new pseudo console of `rows` x `cols` (ConPTY): its
  /// stdin, stdout and stderr are the console's; what the console shows is
  /// read into `sink` (`none` gets nothing), until the console is closed
  /// after the child's exit. The child is in its job from its first
  /// instruction, as a pipe child is. Returns the run (its console:
  /// [`Execution::console`]) and the console's input pipe (what is written
  /// there is typed). Must be called within a tokio runtime.
  pub fn on_console(
    spec: &ProcessSpec,
    owner: u64,
    (rows, cols): (u16, u16),
    sink: O,
    none: E,
  ) -> Result<(Self, tokio::fs::File), ExecError> {
    let (job, mark) = Self::prepare(spec, owner)?;
    let (program, line) = command_line(spec)?;
    let mut env = spec.process.env.build();
    env.retain(|(k, _)| !platform::env_name_eq(k, MARK_VAR));
    env.push((MARK_VAR.into(), mark.clone().into()));
    let parts = PseudoConsole::open(rows, cols).map_err(|e| {
      let code = if e.kind() == std::io::ErrorKind::Unsupported {
        ErrorCode::ENOTSUP
      } else {
        ErrorCode::EIO
      };
      ExecError::new(code, format!("cannot open a pseudo console: {e}"))
    })?;
    let console = Arc::new(parts.console);
    let started = Instant::now();
    let shown = spec.program.display().to_string();
    let child =
      platform::spawn_on_console(&program, &line, &env, spec.process.cwd.as_deref(), &console)
        .map_err(|e| ExecError::from_spawn(&shown, &e))?;
    let pid = child.pid;
    let entered = job
      .assign(std::os::windows::io::AsRawHandle::as_raw_handle(
        &child.process,
      ))
      .map_err(|e| format!("cannot put it in a Job Object: {e}"))
      .and_then(|_| platform::resume(&child.thread).map_err(|e| format!("cannot resume it: {e}")));
    if let Err(why) = entered {
      platform::terminate_process(&child.process, TERMINATED_EXIT);
      return Err(ExecError::new(ErrorCode::ESPAWN, why));
    }
    registry::register(pid as i32, owner, job.clone());
    let stop = CancellationToken::new();
    let output = tokio::fs::File::from_std(std::fs::File::from(parts.output));
    let pumps = (
      tokio::spawn(pump(output, sink, stop.clone())),
      tokio::spawn(async move {
        let mut none = none;
        none.finish().await;
        (none, 0)
      }),
    );
    let exec = Execution {
      child: RunChild::Console(ConsoleChild::follow(child.process)),
      console: Some(console),
      pid,
      job,
      started,
      stdin: None,
      input_task: None,
      pumps: Some(pumps),
      catchups: [None, None],
      stop,
      mark,
      limits: spec.process.limits.clone(),
      run: spec.run.without_input(),
    };
    let input = tokio::fs::File::from_std(std::fs::File::from(parts.input));
    Ok((exec, input))
  }

  pub fn pid(&self) -> u32 {
    self.pid
  }

  /// The value of `EXEC_NATIVE_RUN_ID` this run's processes carry.
  pub fn mark(&self) -> &str {
    &self.mark
  }

  /// The pseudo console of a terminal child ([`Execution::on_console`]).
  pub(crate) fn console(&self) -> Option<Arc<PseudoConsole>> {
    self.console.clone()
  }

  /// The Job Object its tree is in (the process manager ends it).
  pub(crate) fn job(&self) -> Arc<Job> {
    self.job.clone()
  }

  /// The stdin pipe, with [`StdinMode::Piped`](super::StdinMode::Piped).
  pub fn take_stdin(&mut self) -> Option<ChildStdin> {
    self.stdin.take()
  }

  /// The catch-up barriers of the two streams (`None` unless spawned with
  /// [`Execution::spawn_with_catchup`]): asked and answered, everything the
  /// pipe held when it was asked is in the sink.
  pub(crate) fn catchups(&self) -> Catchups {
    self.catchups.clone()
  }

  /// [`Execution::wait`] for a child whose tree its owner ends and
  /// unregisters itself (a session's worker): its exit (or `cancel`, then the
  /// graceful end of its job), `reaped` told at once, then the drain (bounded
  /// by `drain`) and the outcome (the limit its job says was hit), with the
  /// status as the system gave it (`None`: it could not be had). As on
  /// POSIX; the job is not ended here.
  pub async fn follow_owned(
    mut self,
    drain: Duration,
    cancel: &CancellationToken,
    reaped: impl FnOnce(),
  ) -> (Option<ExitStatus>, Finished<O, E>) {
    let mut canceled = false;
    let status = tokio::select! {
      st = self.child.wait() => st,
      _ = cancel.cancelled() => {
        canceled = true;
        kill_sequence(&mut self.child, self.console.as_ref(), &self.job, self.pid, self.run.kill_grace).await
      }
    };
    reaped();
    let st = status.as_ref().ok().copied();
    (st, self.settle(status, (false, canceled), drain).await)
  }

  /// After the exit: the pumps drained (bounded by `drain`), their sinks
  /// handed back with the outcome.
  async fn settle(
    mut self,
    status: std::io::Result<ExitStatus>,
    ended: (bool, bool),
    drain: Duration,
  ) -> Finished<O, E> {
    if let Some(console) = self.console.take() {
      // its output's EOF
      platform::close_console_later(console);
    }
    let (out, err) = self.drain(drain).await;
    let (stdout, stdout_bytes) = joined(out).await;
    let (stderr, stderr_bytes) = joined(err).await;
    if let Some(t) = self.input_task.take() {
      t.abort();
    }
    let outcome = self.outcome(status, ended, (stdout_bytes, stderr_bytes));
    Finished {
      outcome,
      stdout,
      stderr,
    }
  }

  /// The child's exit, or the timeout or `cancel` and then the kill
  /// sequence: (status, timed out, canceled).
  async fn exit(
    &mut self,
    cancel: &CancellationToken,
  ) -> (std::io::Result<ExitStatus>, bool, bool) {
    let deadline = self.run.timeout.map(|t| self.started + t);
    let (mut timed_out, mut canceled) = (false, false);
    let status = tokio::select! {
      st = self.child.wait() => st,
      _ = sleep_until_opt(deadline) => {
        timed_out = true;
        kill_sequence(&mut self.child, self.console.as_ref(), &self.job, self.pid, self.run.kill_grace).await
      }
      _ = cancel.cancelled() => {
        canceled = true;
        kill_sequence(&mut self.child, self.console.as_ref(), &self.job, self.pid, self.run.kill_grace).await
      }
    };
    // an exit caused by `kill('SIGKILL')` (cancel, then the job ended) may
    // be seen before the cancel: it is still the cancel's
    canceled |= !timed_out && cancel.is_cancelled();
    (status, timed_out, canceled)
  }

  /// Wait for the end: the child's exit (or the timeout, or `cancel`), then
  /// the end of what is left in its job, and the drain.
  pub async fn wait(mut self, policy: &RunPolicy, cancel: &CancellationToken) -> Finished<O, E> {
    let (status, timed_out, canceled) = self.exit(cancel).await;
    // what is left of the tree goes the same way (graceful, then ended)
    if policy.cleanup_group_on_exit || timed_out || canceled {
      end_later(self.job.clone(), self.pid, self.run.kill_grace);
    } else {
      registry::unregister(self.pid as i32);
    }
    self
      .settle(status, (timed_out, canceled), policy.drain)
      .await
  }

  /// Like [`Execution::wait`], except that when the child exits on its own
  /// and processes of its job still run, they are left running and returned
  /// (`left`, with the job that holds them: dropping its last handle ends
  /// them): the pumps keep reading what they write until the last one
  /// closes the pipes (`pumps` ends then). A run that was killed (timeout,
  /// `cancel`) takes its whole job down as `wait` does. As on POSIX, where
  /// the leftovers are the processes carrying the run's mark.
  pub async fn wait_leaving_tree(
    mut self,
    policy: &RunPolicy,
    cancel: &CancellationToken,
  ) -> super::LeftRunning {
    let (status, timed_out, canceled) = self.exit(cancel).await;
    let left: Vec<i32> = if timed_out || canceled {
      Vec::new()
    } else {
      // a process of the job is created in it: there is no moment when a
      // child of the shell is not listed yet
      self
        .job
        .pids()
        .into_iter()
        .filter(|&p| p != self.pid)
        .map(|p| p as i32)
        .collect()
    };
    let mark = self.mark.clone();
    if left.is_empty() {
      end_later(self.job.clone(), self.pid, self.run.kill_grace);
      let f = self
        .settle(status, (timed_out, canceled), policy.drain)
        .await;
      return super::LeftRunning::ended(f.outcome, mark);
    }
    // what the shell wrote before it exited is in the pipes (which the
    // leftovers keep open: no EOF to wait for): the pumps read it before
    // the result is made
    self.catch_up(policy.drain).await;
    // the leftovers are the caller's now, in the job it is handed
    registry::unregister(self.pid as i32);
    let (out, err) = self.pumps.take().expect("the pumps are handed out once");
    let outcome = self.outcome(status, (false, false), (0, 0));
    let pumps = tokio::spawn(async move {
      let _ = out.await;
      let _ = err.await;
    });
    super::LeftRunning {
      outcome,
      mark,
      left,
      pumps: Some(pumps),
      job: Some(self.job.clone()),
    }
  }

  /// Have both pumps read what their pipes hold now (bounded by `within`;
  /// nothing to do for pumps that do not read by polling).
  async fn catch_up(&self, within: Duration) {
    Catchup::all_within(self.catchups.each_ref().map(|c| c.as_deref()), within).await;
  }

  fn outcome(
    &self,
    status: std::io::Result<ExitStatus>,
    (timed_out, canceled): (bool, bool),
    (stdout_bytes, stderr_bytes): (u64, u64),
  ) -> RunOutcome {
    let (mut exit_code, signal) = match status {
      Ok(st) => decode_status(st),
      Err(_) => (-1, None),
    };
    let error = if let Some(e) = self.limit_error(exit_code) {
      Some(e)
    } else if timed_out {
      exit_code = 124;
      let label = self.run.timeout.map(format_duration).unwrap_or_default();
      Some(ExecError::new(
        ErrorCode::TIMEOUT,
        format!("Process timeout after {label}"),
      ))
    } else if canceled {
      Some(ExecError::new(ErrorCode::ECANCELED, "Process canceled"))
    } else {
      None
    };
    RunOutcome {
      pid: self.pid,
      exit_code,
      signal,
      timed_out,
      canceled,
      duration: self.started.elapsed(),
      stdout_bytes,
      stderr_bytes,
      error,
      sandbox: None,
    }
  }

  /// The limit the job says was hit (the CPU limit also by the exit code
  /// the system gives a job it ends at it).
  fn limit_error(&self, exit_code: i32) -> Option<ExecError> {
    job_limit_error(&self.job, &self.limits, Some(exit_code))
  }

  /// Read until EOF, but no longer than `drain` after the exit.
  async fn drain(
    &mut self,
    drain: Duration,
  ) -> (
    Result<(O, u64), tokio::task::JoinError>,
    Result<(E, u64), tokio::task::JoinError>,
  ) {
    let (out_task, err_task) = self.pumps.take().expect("the pumps are drained once");
    let pumps = async { (out_task.await, err_task.await) };
    tokio::pin!(pumps);
    tokio::select! {
      r = &mut pumps => r,
      _ = tokio::time::sleep(drain) => {
        self.stop.cancel();
        pumps.await
      }
    }
  }
}

/// Spawn and wait; a `cancel` already cancelled spawns nothing
/// ([`canceled_before_start`]).
pub async fn run<O: OutputSink, E: OutputSink>(
  spec: &ProcessSpec,
  policy: &RunPolicy,
  stdout: O,
  stderr: E,
  cancel: &CancellationToken,
) -> Result<Finished<O, E>, ExecError> {
  if cancel.is_cancelled() {
    return Err(canceled_before_start());
  }
  let exec = Execution::spawn(spec, policy.owner, stdout, stderr)?;
  Ok(exec.wait(policy, cancel).await)
}

/// The limit `job` says was hit (the CPU limit also by the exit code the
/// system gives a job it ends at it).
pub(crate) fn job_limit_error(job: &Job, l: &Limits, exit_code: Option<i32>) -> Option<ExecError> {
  match job.limit_hit() {
    Some(JobLimitHit::Memory) => l.memory_bytes.map(memory_error),
    Some(JobLimitHit::Processes) => l.max_processes.map(process_error),
    Some(JobLimitHit::Cpu) => l.cpu_seconds.map(cpu_error),
    None if exit_code == Some(platform::CPU_LIMIT_EXIT) => l.cpu_seconds.map(cpu_error),
    None => None,
  }
}

/// `CTRL_BREAK_EVENT` to the group; the job ended after `grace` (at once
/// when the event could not be sent, or with no grace).
async fn kill_sequence(
  child: &mut RunChild,
  console: Option<&Arc<PseudoConsole>>,
  job: &Job,
  pid: u32,
  grace: Duration,
) -> std::io::Result<ExitStatus> {
  if !grace.is_zero() && ask_to_end(pid, console) {
    if let Ok(st) = tokio::time::timeout(grace, child.wait()).await {
      return st;
    }
  }
  job.terminate(TERMINATED_EXIT);
  child.wait().await
}

/// The graceful stop of the tree `pid` leads (a run's, or a managed
/// process's); false when there is none to give. On a pseudo console
/// (`console`): that console closed, which gives every process on it
/// `CTRL_CLOSE_EVENT` (what closing a terminal window does; the host's own
/// console events cannot reach another console). Else `CTRL_BREAK_EVENT` to
/// its process group, which fails when the host has no console.
pub(crate) fn ask_to_end(pid: u32, console: Option<&Arc<PseudoConsole>>) -> bool {
  match console {
    Some(c) => {
      platform::close_console_later(c.clone());
      true
    }
    None => platform::ctrl_break(pid),
  }
}

/// End what is left in a run's job: nothing when it is empty, else the
/// graceful event and the end after `grace`, on the runtime. The run is
/// unregistered once its job is empty.
fn end_later(job: Arc<Job>, pid: u32, grace: Duration) {
  if job.active_processes() == 0 {
    registry::unregister(pid as i32);
    return;
  }
  let graceful = !grace.is_zero() && platform::ctrl_break(pid);
  tokio::spawn(async move {
    if graceful {
      let until = Instant::now() + grace;
      while Instant::now() < until && job.active_processes() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
      }
    }
    job.terminate(TERMINATED_EXIT);
    registry::unregister(pid as i32);
  });
}

/// (exit code, signal name): Windows has no signals, so the code is the
/// process's own (as a signed 32-bit number: `0xC000013A`, the end by
/// `CTRL_BREAK_EVENT`, is -1073741510) and the signal is always `None`.
pub fn decode_status(st: ExitStatus) -> (i32, Option<String>) {
  (st.code().unwrap_or(-1), None)
}

/// Read a stream into its sink until EOF, or until `stop`. The reads run on
/// tokio's blocking pool (anonymous pipes have no readiness on Windows); a
/// read in flight when `stop` comes keeps its bytes for the reader, which is
/// dropped with the pump.
async fn pump<S: OutputSink>(
  mut io: impl AsyncRead + Unpin,
  mut sink: S,
  stop: CancellationToken,
) -> (S, u64) {
  let mut buf = vec![0u8; READ_BUF];
  let mut total = 0u64;
  let ticker = tokio::time::sleep(Duration::ZERO);
  tokio::pin!(ticker);
  let mut tick_at: Option<Instant> = None;
  loop {
    rearm_tick(sink.next_tick(), ticker.as_mut(), &mut tick_at);
    tokio::select! {
      biased;
      r = io.read(&mut buf) => match r {
        Ok(0) | Err(_) => break,
        Ok(n) => {
          total += n as u64;
          sink.write(&buf[..n]);
          tokio::select! {
            _ = sink.ready() => {}
            _ = stop.cancelled() => break,
          }
        }
      },
      _ = &mut ticker, if tick_at.is_some() => {
        tick_at = None;
        sink.tick();
      }
      _ = stop.cancelled() => break,
    }
  }
  sink.finish().await;
  (sink, total)
}

/// The two pumps of a run, reading as `reads` says, and their catch-up
/// barriers (polled pumps only).
fn start_pumps<O: OutputSink, E: OutputSink>(
  reads: Reads,
  (out, err): (tokio::process::ChildStdout, tokio::process::ChildStderr),
  (stdout, stderr): (O, E),
  stop: &CancellationToken,
) -> std::io::Result<(Pumps<O, E>, Catchups)> {
  Ok(match reads {
    Reads::Blocking => (
      (
        tokio::spawn(pump(out, stdout, stop.clone())),
        tokio::spawn(pump(err, stderr, stop.clone())),
      ),
      [None, None],
    ),
    Reads::Polled => {
      let (out, err) = (out.into_owned_handle()?, err.into_owned_handle()?);
      let (co, ce) = (Arc::new(Catchup::default()), Arc::new(Catchup::default()));
      (
        (
          tokio::spawn(pump_polled(out, stdout, stop.clone(), co.clone())),
          tokio::spawn(pump_polled(err, stderr, stop.clone(), ce.clone())),
        ),
        [Some(co), Some(ce)],
      )
    }
  })
}

/// Read what `pipe` holds now into `sink`, up to [`POLL_READ_MAX`]: the
/// bytes, and whether the pipe is at its EOF (or failed).
fn read_now<S: OutputSink>(
  pipe: &std::os::windows::io::OwnedHandle,
  buf: &mut [u8],
  sink: &mut S,
) -> (u64, bool) {
  let mut total = 0u64;
  while total < POLL_READ_MAX {
    match platform::read_available(pipe, buf) {
      Ok(None) => return (total, false),
      Ok(Some(0)) | Err(_) => return (total, true),
      Ok(Some(n)) => {
        total += n as u64;
        sink.write(&buf[..n]);
      }
    }
  }
  (total, false)
}

/// [`Reads::Polled`]: read `pipe` into its sink until EOF, or until `stop`
/// (then what it holds is read), answering its catch-up barrier: a round
/// asked is answered once the pipe was read empty after it.
async fn pump_polled<S: OutputSink>(
  pipe: std::os::windows::io::OwnedHandle,
  mut sink: S,
  stop: CancellationToken,
  catchup: Arc<Catchup>,
) -> (S, u64) {
  let mut buf = vec![0u8; READ_BUF];
  let mut total = 0u64;
  let mut pause = POLL_MIN;
  let ticker = tokio::time::sleep(Duration::ZERO);
  tokio::pin!(ticker);
  let mut tick_at: Option<Instant> = None;
  loop {
    total += catchup.answer_if_asked(|| read_now(&pipe, &mut buf, &mut sink).0);
    let (n, eof) = read_now(&pipe, &mut buf, &mut sink);
    total += n;
    if eof {
      break;
    }
    if n > 0 {
      pause = POLL_MIN;
      tokio::select! {
        _ = sink.ready() => continue,
        _ = stop.cancelled() => {
          total += read_now(&pipe, &mut buf, &mut sink).0;
          break;
        }
      }
    }
    rearm_tick(sink.next_tick(), ticker.as_mut(), &mut tick_at);
    tokio::select! {
      biased;
      _ = stop.cancelled() => {
        total += read_now(&pipe, &mut buf, &mut sink).0;
        break;
      }
      _ = catchup.asked() => {}
      _ = &mut ticker, if tick_at.is_some() => {
        tick_at = None;
        sink.tick();
      }
      _ = tokio::time::sleep(pause) => pause = (pause * 2).min(POLL_MAX),
    }
  }
  sink.finish().await;
  (sink, total)
}

/// The environment variable every run's processes carry, as on POSIX.
pub const MARK_VAR: &str = "EXEC_NATIVE_RUN_ID";
