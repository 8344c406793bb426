//! [`CommandRunner`]: a session of the command tool. It runs commands, and
//! keeps the ones that outlived their timeout (or were started in the
//! background) in a registry keyed by pid, where the model can check on them
//! (new output since the last check) or kill them. Closing the runner kills
//! what it still runs; log files older than the retention age are swept.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, ExecError};
use crate::process::marks;
use crate::process::spec::{check_cwd, resolve_program, EnvSpec};
use crate::process::supervise::{
  Execution, LeftRunning, ProcessSpec, RunOutcome, RunPolicy, StdinMode,
};

use super::format::{
  format_backgrounded, format_check, format_finished, format_left_running, ProcessState, Shown,
  Vocabulary,
};
use super::offload::{
  lock, render_pair, Capture, CaptureSink, LogStatus, Rendered, SharedCapture, Stream, LOG_PREFIX,
  LOG_SUFFIX,
};
use super::stateful::{ShellState, StatefulRun};
use super::truncate::OutputLimits;
use super::{
  command_env, BackgroundRef, CommandOptions, CommandResult, StreamOutput, DEFAULT_RETENTION,
};

/// Settings of a runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
  /// Id of the host environment (see [`crate::process::registry::kill_all`]).
  pub owner: u64,
  /// Where logs go unless a command says otherwise.
  pub output_dir: PathBuf,
  /// Logs older than this are swept (`None`: never).
  pub retention: Option<Duration>,
  /// Between SIGTERM and SIGKILL when a process is killed.
  pub kill_grace: Duration,
  /// The commands share one shell state: `cd`, `export`, variables,
  /// functions, aliases and options carry over (see [`super::stateful`]).
  pub stateful: bool,
  /// The shell that runs the commands (bash unless the host chose PowerShell).
  pub shell: super::Shell,
}

impl Default for RunnerConfig {
  fn default() -> Self {
    RunnerConfig {
      owner: 0,
      output_dir: std::env::temp_dir(),
      retention: Some(DEFAULT_RETENTION),
      kill_grace: Duration::from_millis(500),
      stateful: false,
      shell: super::Shell::Bash,
    }
  }
}

/// The state of a background process at a check or a kill.
#[derive(Debug, Clone)]
pub struct CheckResult {
  pub pid: u32,
  pub running: bool,
  /// `None` while running.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// Ended by a kill of the runner.
  pub killed: bool,
  /// Output since the last check (bounded by the same limits).
  pub stdout: StreamOutput,
  pub stderr: StreamOutput,
  pub log: LogStatus,
  pub text: String,
  /// Exited with a non-zero code on its own.
  pub is_error: bool,
  /// ELIMIT when a resource limit stopped it.
  pub error: Option<ExecError>,
  /// It runs and is blocked reading a terminal or a pipe (see
  /// [`crate::platform::awaiting_input`]).
  pub awaiting_input: bool,
}

/// One entry of [`CommandRunner::list`].
#[derive(Debug, Clone)]
pub struct BackgroundInfo {
  pub pid: u32,
  pub command: String,
  pub running: bool,
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  pub killed: bool,
  pub log: LogStatus,
  pub started: SystemTime,
  /// How long it ran (so far).
  pub runtime: Duration,
}

struct BgProc {
  pid: u32,
  command: String,
  started: SystemTime,
  started_at: Instant,
  capture: SharedCapture,
  limits: OutputLimits,
  cancel: CancellationToken,
  done: watch::Receiver<Option<(RunOutcome, Instant)>>,
  /// Left running by a command and adopted: its exit code cannot be known.
  adopted: bool,
  /// What this (background) command left running when it exited, reported
  /// once by the next check: (pid, command line).
  left: Mutex<Vec<(u32, String)>>,
  /// Whose words its texts use.
  vocabulary: Vocabulary,
}

impl BgProc {
  fn outcome(&self) -> Option<(RunOutcome, Instant)> {
    self.done.borrow().clone()
  }
}

struct Inner {
  config: RunnerConfig,
  closed: AtomicBool,
  procs: Mutex<BTreeMap<u32, Arc<BgProc>>>,
  /// Commands running in the foreground: pid -> cancel.
  foreground: Mutex<HashMap<u32, CancellationToken>>,
  /// Directories logs were written to (swept on close).
  dirs: Mutex<BTreeSet<PathBuf>>,
  /// Interactive sessions (`start` / `write`).
  interactive: super::interactive::Interactive,
  /// Stateful mode: the shared shell state, made at the first command.
  state: Mutex<Option<Arc<ShellState>>>,
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
  m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Inner {
  fn drop(&mut self) {
    // nobody can reach these processes any more
    for p in guard(&self.procs).values() {
      p.cancel.cancel();
    }
    for c in guard(&self.foreground).values() {
      c.cancel();
    }
    if let Some(s) = guard(&self.state).take() {
      s.remove();
    }
  }
}

/// A session of the command tool. Cheap to clone (shared state).
#[derive(Clone)]
pub struct CommandRunner {
  inner: Arc<Inner>,
}

fn no_such_process(pid: u32) -> ExecError {
  ExecError::new(
    ErrorCode::ESRCH,
    format!("no background process with pid {pid} in this runner"),
  )
}

/// `bash` as the child would find it, else `/bin/bash`.
fn find_bash(env: &EnvSpec, cwd: &Path) -> Result<PathBuf, ExecError> {
  match resolve_program("bash", env.path_var().as_ref(), cwd) {
    Ok(p) => Ok(p),
    Err(e) => {
      let fallback = Path::new("/bin/bash");
      if fallback.is_file() {
        Ok(fallback.to_owned())
      } else {
        Err(e)
      }
    }
  }
}

fn joined(r: Result<LeftRunning, tokio::task::JoinError>, pid: u32) -> LeftRunning {
  r.unwrap_or_else(|e| LeftRunning {
    outcome: failed_outcome(pid, e),
    mark: String::new(),
    left: Vec::new(),
    pumps: None,
  })
}

fn failed_outcome(pid: u32, e: tokio::task::JoinError) -> RunOutcome {
  RunOutcome {
    pid,
    exit_code: -1,
    signal: None,
    timed_out: false,
    canceled: false,
    duration: Duration::ZERO,
    stdout_bytes: 0,
    stderr_bytes: 0,
    error: Some(ExecError::new(
      ErrorCode::EIO,
      format!("the supervisor of pid {pid} failed: {e}"),
    )),
    sandbox: None,
  }
}

/// Take what both streams hold since the last take, rendered.
fn take_streams(
  capture: &SharedCapture,
  limits: OutputLimits,
  carry: bool,
) -> (StreamOutput, StreamOutput) {
  let (o, e) = {
    let mut c = lock(capture);
    (c.out.take(carry), c.err.take(carry))
  };
  let (o, e) = render_pair(&o, &e, limits);
  let wrap = |r: Rendered| StreamOutput {
    text: r.text,
    truncation: r.truncation,
    binary: r.binary,
  };
  (wrap(o), wrap(e))
}

fn shown<'a>(out: &'a StreamOutput, err: &'a StreamOutput) -> [Shown<'a>; 2] {
  [
    Shown {
      name: "stdout",
      text: &out.text,
      truncation: &out.truncation,
      binary: out.binary,
    },
    Shown {
      name: "stderr",
      text: &err.text,
      truncation: &err.truncation,
      binary: err.binary,
    },
  ]
}

/// A command started by [`CommandRunner::run`], supervised on its own task.
struct Started {
  pid: u32,
  cancel: CancellationToken,
  handle: JoinHandle<LeftRunning>,
  at: Instant,
  wall: SystemTime,
}

/// `bash -c <command>` (or PowerShell's `-Command <command>`) with the
/// options' cwd, environment (over the non-interactive defaults), limits and
/// sandbox; stdin at EOF.
fn bash_spec(
  command: &str,
  opts: &CommandOptions,
  shell: super::Shell,
) -> Result<(ProcessSpec, Option<tempfile::TempPath>), ExecError> {
  if command.trim().is_empty() {
    return Err(ExecError::invalid("command is empty"));
  }
  check_cwd(&opts.cwd)?;
  let env = command_env(opts.env.clone());
  env.validate()?;
  let (program, args, script) = match shell {
    super::Shell::Bash => {
      let (args, script) = super::bash_args(command)?;
      (find_bash(&env, &opts.cwd)?, args, script)
    }
    super::Shell::PowerShell => (
      crate::language::find_powershell(&env, &opts.cwd)?,
      super::powershell_args(command),
      None,
    ),
  };
  let mut spec = ProcessSpec::new(program);
  for a in args {
    spec = spec.arg(a);
  }
  spec.cwd = Some(opts.cwd.clone());
  spec.env = env;
  spec.stdin = StdinMode::Null;
  spec.limits = opts.resource_limits.clone();
  spec.die_with_parent = opts.die_with_parent;
  spec.sandbox = opts.sandbox.clone();
  Ok((spec, script))
}

impl CommandRunner {
  /// A new session. Sweeps old logs from `config.output_dir` in the background.
  pub fn new(config: RunnerConfig) -> Self {
    if let Some(age) = config.retention {
      let dir = config.output_dir.clone();
      std::thread::spawn(move || sweep_logs(&dir, age, &HashSet::new()));
    }
    let dirs = BTreeSet::from([config.output_dir.clone()]);
    let (config_owner, shell) = (config.owner, config.shell);
    CommandRunner {
      inner: Arc::new(Inner {
        config,
        closed: AtomicBool::new(false),
        procs: Mutex::new(BTreeMap::new()),
        foreground: Mutex::new(HashMap::new()),
        dirs: Mutex::new(dirs),
        interactive: super::interactive::Interactive::new(config_owner, shell),
        state: Mutex::new(None),
      }),
    }
  }

  pub fn config(&self) -> &RunnerConfig {
    &self.inner.config
  }

  pub fn is_closed(&self) -> bool {
    self.inner.closed.load(Ordering::SeqCst)
  }

  /// Run `bash -c <command>`. Never fails: a command that cannot start gives
  /// a result with `error` and `is_error`. Must be called within a tokio runtime.
  ///
  /// The steps: the spec ([`bash_spec`]), the supervised start
  /// ([`Self::spawn_supervised`]), the wait in the foreground until the timeout
  /// ([`Self::wait_foreground`]), and, if it is still running then (or was
  /// asked to run in the background), the hand-over to a background job
  /// ([`Self::to_background`]).
  pub async fn run(&self, command: &str, opts: CommandOptions) -> CommandResult {
    if self.is_closed() {
      return CommandResult::failed(ExecError::new(
        ErrorCode::ECANCELED,
        "the command runner is closed",
      ));
    }
    let stateful = match self.stateful_run(command, &opts) {
      Ok(s) => s,
      Err(e) => return CommandResult::failed(e),
    };
    let script_text = stateful
      .as_ref()
      .map_or(command, |(_, r)| r.script.as_str());
    let (spec, script) = match bash_spec(script_text, &opts, self.inner.config.shell) {
      Ok(s) => s,
      Err(e) => return CommandResult::failed(e),
    };
    let dir = opts
      .output_dir
      .clone()
      .unwrap_or_else(|| self.inner.config.output_dir.clone());
    guard(&self.inner.dirs).insert(dir.clone());
    let capture = Capture::shared(opts.limits, dir);
    let mut run = match self.spawn_supervised(&spec, &capture, !opts.cleanup, script) {
      Ok(r) => r,
      Err(e) => return CommandResult::failed(e),
    };
    if !opts.background {
      if let Some(done) = self
        .wait_foreground(&mut run, command, &capture, &opts)
        .await
      {
        if let Some((state, r)) = &stateful {
          // a cancelled command's state is not the shell's
          match opts.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            true => state.discard(r),
            false => state.commit(r),
          }
        }
        return done;
      }
    }
    // it runs on in its own process: the shared state stays as it was
    if let Some((state, r)) = &stateful {
      state.discard(r);
    }
    self.to_background(run, command, capture, &opts)
  }

  /// In a stateful runner, `command` wrapped in the shared shell state
  /// (made at the first command, in the runner's output directory).
  fn stateful_run(
    &self,
    command: &str,
    opts: &CommandOptions,
  ) -> Result<Option<(Arc<ShellState>, StatefulRun)>, ExecError> {
    if !self.inner.config.stateful {
      return Ok(None);
    }
    if command.trim().is_empty() {
      return Err(ExecError::invalid("command is empty"));
    }
    let state = {
      let mut slot = guard(&self.inner.state);
      match slot.as_ref() {
        Some(s) => s.clone(),
        None => {
          let dir = &self.inner.config.output_dir;
          super::stateful::check_writable(dir, opts.sandbox.as_ref(), &opts.cwd)?;
          let s = Arc::new(ShellState::create(dir)?);
          *slot = Some(s.clone());
          s
        }
      }
    };
    let run = state.wrap(command, opts.cwd_given.then_some(opts.cwd.as_path()));
    Ok(Some((state, run)))
  }

  /// Spawn `spec` with both streams into `capture` and supervise it on its
  /// own task (`adopt`: what it leaves running is handed back, not killed).
  fn spawn_supervised(
    &self,
    spec: &ProcessSpec,
    capture: &SharedCapture,
    adopt: bool,
    script: Option<tempfile::TempPath>,
  ) -> Result<Started, ExecError> {
    let (at, wall) = (Instant::now(), SystemTime::now());
    let owner = self.inner.config.owner;
    let sink = |stream| CaptureSink {
      capture: capture.clone(),
      stream,
    };
    let exec = Execution::spawn(spec, owner, sink(Stream::Stdout), sink(Stream::Stderr))?;
    let pid = exec.pid();
    let cancel = CancellationToken::new();
    let policy = RunPolicy {
      timeout: None,
      timeout_label: None,
      kill_grace: self.inner.config.kill_grace,
      drain: Duration::from_millis(100),
      cleanup_group_on_exit: true,
      owner,
    };
    let wait_cancel = cancel.clone();
    let handle: JoinHandle<LeftRunning> = tokio::spawn(async move {
      // a long command's file lives as long as its shell
      let _script = script;
      if adopt {
        exec.wait_leaving_tree(&policy, &wait_cancel).await
      } else {
        let mark = exec.mark().to_owned();
        LeftRunning {
          outcome: exec.wait(&policy, &wait_cancel).await.outcome,
          mark,
          left: Vec::new(),
          pumps: None,
        }
      }
    });
    Ok(Started {
      pid,
      cancel,
      handle,
      at,
      wall,
    })
  }

  /// Wait for the command until its timeout; its result if it ended, with
  /// what it left running adopted.
  async fn wait_foreground(
    &self,
    run: &mut Started,
    command: &str,
    capture: &SharedCapture,
    opts: &CommandOptions,
  ) -> Option<CommandResult> {
    let (pid, limits) = (run.pid, opts.limits);
    guard(&self.inner.foreground).insert(pid, run.cancel.clone());
    let caller = opts.cancel.clone().unwrap_or_default();
    let wait = async {
      match opts.timeout {
        None => Some(joined((&mut run.handle).await, pid)),
        Some(t) => tokio::time::timeout_at(run.at + t, &mut run.handle)
          .await
          .ok()
          .map(|r| joined(r, pid)),
      }
    };
    let finished = tokio::select! {
      f = wait => f,
      _ = caller.cancelled() => {
        // the caller gave up on it: the whole tree goes, nothing is adopted
        run.cancel.cancel();
        let mut left = joined((&mut run.handle).await, pid);
        // bash may have exited just before: what it left goes too
        for p in left.left.drain(..) {
          signal_adopted(p, &left.mark, libc::SIGKILL);
        }
        Some(left)
      }
    };
    guard(&self.inner.foreground).remove(&pid);
    let left = finished?;
    let adopted = adopt_left(
      &self.inner,
      left.left,
      &left.mark,
      command,
      capture,
      limits,
      opts.vocabulary,
    )
    .await;
    let keep_log = !adopted.is_empty();
    let mut res = finish_foreground(left.outcome, capture, limits, run.at.elapsed(), keep_log);
    if keep_log {
      res.text.push_str("\n\n");
      res
        .text
        .push_str(&format_left_running(&adopted, &res.log, opts.vocabulary));
      res.adopted = adopted;
      close_log_after(capture, left.pumps);
    }
    Some(res)
  }

  /// Make the running command a background job of the runner: the
  /// supervisor keeps pumping into the window and the log; the answer says
  /// so, with the output so far.
  fn to_background(
    &self,
    run: Started,
    command: &str,
    capture: SharedCapture,
    opts: &CommandOptions,
  ) -> CommandResult {
    let (pid, limits) = (run.pid, opts.limits);
    let (stdout, stderr) = take_streams(&capture, limits, true);
    let log = lock(&capture).log.status(true);
    let (tx, rx) = watch::channel(None);
    let proc = Arc::new(BgProc {
      pid,
      command: command.to_owned(),
      started: run.wall,
      started_at: run.at,
      capture: capture.clone(),
      limits,
      cancel: run.cancel.clone(),
      done: rx,
      adopted: false,
      left: Mutex::new(Vec::new()),
      vocabulary: opts.vocabulary,
    });
    guard(&self.inner.procs).insert(pid, proc.clone());
    if self.is_closed() {
      run.cancel.cancel();
    }
    let weak = Arc::downgrade(&self.inner);
    let handle = run.handle;
    let command_owned = command.to_owned();
    let vocabulary = opts.vocabulary;
    tokio::spawn(async move {
      let left = joined(handle.await, pid);
      let adopted = match weak.upgrade() {
        Some(inner) => {
          adopt_left(
            &inner,
            left.left,
            &left.mark,
            &command_owned,
            &capture,
            limits,
            vocabulary,
          )
          .await
        }
        None => Vec::new(),
      };
      if adopted.is_empty() {
        lock(&capture).log.finish(true);
      } else {
        *guard(&proc.left) = adopted;
        close_log_after(&capture, left.pumps);
      }
      let _ = tx.send(Some((left.outcome, Instant::now())));
    });
    let after = if opts.background { None } else { opts.timeout };
    let text = format_backgrounded(
      pid,
      after,
      &shown(&stdout, &stderr),
      limits.max_bytes,
      &log,
      vocabulary,
    );
    CommandResult {
      pid,
      stdout,
      stderr,
      exit_code: None,
      signal: None,
      timed_out: !opts.background,
      log: log.clone(),
      background: Some(BackgroundRef { pid, log }),
      text,
      is_error: false,
      duration: run.at.elapsed(),
      error: None,
      adopted: Vec::new(),
      sandbox: None,
    }
  }

  fn get(&self, pid: u32) -> Result<Arc<BgProc>, ExecError> {
    guard(&self.inner.procs)
      .get(&pid)
      .cloned()
      .ok_or_else(|| no_such_process(pid))
  }

  /// Whether a background process is running, and its output since the last check.
  pub fn check(&self, pid: u32) -> Result<CheckResult, ExecError> {
    let p = self.get(pid)?;
    Ok(check_result(&p))
  }

  /// Terminate the whole group of a background process (SIGTERM, SIGKILL
  /// after the grace period) and return its final output. Killing a process
  /// that already exited returns its final state.
  pub async fn kill(&self, pid: u32) -> Result<CheckResult, ExecError> {
    let p = self.get(pid)?;
    kill_proc(&p).await;
    Ok(check_result(&p))
  }

  /// Start an interactive command (see [`super::interactive`]).
  pub async fn start(
    &self,
    command: &str,
    opts: super::interactive::StartOptions,
  ) -> super::interactive::InteractiveResult {
    if self.is_closed() {
      return super::interactive::InteractiveResult::failed(ExecError::new(
        ErrorCode::ECANCELED,
        "the command runner is closed",
      ));
    }
    // a stateful runner's interactive command starts from the shared state
    let state = guard(&self.inner.state).clone();
    if let (Some(state), false) = (state, command.trim().is_empty()) {
      let cd = opts.cwd_given.then_some(opts.cwd.as_path());
      let script = state.wrap_read_only(command, cd);
      return self.inner.interactive.start(&script, opts).await;
    }
    self.inner.interactive.start(command, opts).await
  }

  /// Send keystrokes to an interactive command and read what came back
  /// (`close_stdin`: then end its stdin, see [`super::interactive::Interactive::write`]).
  pub async fn write(
    &self,
    session: u32,
    chars: &[u8],
    yield_time: Duration,
    close_stdin: bool,
  ) -> super::interactive::InteractiveResult {
    self
      .inner
      .interactive
      .write(session, chars, yield_time, close_stdin, None)
      .await
  }

  /// [`Self::write`] that `cancel` stops: the session's tree is killed.
  pub async fn write_cancellable(
    &self,
    session: u32,
    chars: &[u8],
    yield_time: Duration,
    close_stdin: bool,
    cancel: Option<&CancellationToken>,
  ) -> super::interactive::InteractiveResult {
    self
      .inner
      .interactive
      .write(session, chars, yield_time, close_stdin, cancel)
      .await
  }

  /// Terminate an interactive command's tree and read its last output.
  pub async fn kill_session(&self, session: u32) -> super::interactive::InteractiveResult {
    self.inner.interactive.kill(session).await
  }

  /// The interactive sessions still running.
  pub fn sessions(&self) -> Vec<u32> {
    self.inner.interactive.ids()
  }

  /// Every background process of this runner, oldest first.
  pub fn list(&self) -> Vec<BackgroundInfo> {
    let mut all: Vec<Arc<BgProc>> = guard(&self.inner.procs).values().cloned().collect();
    all.sort_by_key(|p| p.started_at);
    all
      .iter()
      .map(|p| {
        let outcome = p.outcome();
        let log = lock(&p.capture).log.status(false);
        let (running, exit_code, signal, killed, runtime) = match &outcome {
          None => (true, None, None, false, p.started_at.elapsed()),
          Some((o, at)) => (
            false,
            Some(o.exit_code).filter(|_| !p.adopted),
            o.signal.clone(),
            o.canceled,
            at.saturating_duration_since(p.started_at),
          ),
        };
        BackgroundInfo {
          pid: p.pid,
          command: p.command.clone(),
          running,
          exit_code,
          signal,
          killed,
          log,
          started: p.started,
          runtime,
        }
      })
      .collect()
  }

  /// Kill everything this runner still runs (background and foreground),
  /// wait for it to end, and sweep old logs. Later runs fail with ECANCELED.
  /// Returns how many processes were still running.
  pub async fn close(&self) -> usize {
    self.inner.closed.store(true, Ordering::SeqCst);
    let procs: Vec<Arc<BgProc>> = guard(&self.inner.procs).values().cloned().collect();
    let running: Vec<Arc<BgProc>> = procs
      .into_iter()
      .filter(|p| p.outcome().is_none())
      .collect();
    let fg: Vec<CancellationToken> = guard(&self.inner.foreground).values().cloned().collect();
    for c in &fg {
      c.cancel();
    }
    let count = running.len() + fg.len() + self.inner.interactive.ids().len();
    futures_join(running.iter().map(|p| kill_proc(p))).await;
    self.inner.interactive.close().await;
    if let Some(s) = guard(&self.inner.state).take() {
      s.remove();
    }
    if let Some(age) = self.inner.config.retention {
      let dirs: Vec<PathBuf> = guard(&self.inner.dirs).iter().cloned().collect();
      let _ = tokio::task::spawn_blocking(move || {
        for d in dirs {
          sweep_logs(&d, age, &HashSet::new());
        }
      })
      .await;
    }
    count
  }
}

async fn futures_join<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
  for f in futs.collect::<Vec<_>>() {
    f.await;
  }
}

async fn kill_proc(p: &BgProc) {
  if p.outcome().is_none() {
    p.cancel.cancel();
  }
  let mut rx = p.done.clone();
  let _ = rx.wait_for(|o| o.is_some()).await;
}

fn check_result(p: &BgProc) -> CheckResult {
  // the state first: once exited, the pumps are done and the take is final
  let outcome = p.outcome();
  let (stdout, stderr) = take_streams(&p.capture, p.limits, outcome.is_none());
  let log = lock(&p.capture).log.status(false);
  let state = match &outcome {
    None => ProcessState::Running,
    Some((o, _)) if p.adopted => ProcessState::Gone {
      signal: o.signal.clone(),
      killed: o.canceled,
    },
    Some((o, _)) => ProcessState::Exited {
      code: o.exit_code,
      signal: o.signal.clone(),
      killed: o.canceled,
    },
  };
  let mut text = format_check(
    p.pid,
    &state,
    &shown(&stdout, &stderr),
    p.limits.max_bytes,
    &log,
    p.vocabulary,
  );
  let (exit_code, signal, killed) = match &outcome {
    None => (None, None, false),
    Some((o, _)) => (
      Some(o.exit_code).filter(|_| !p.adopted),
      o.signal.clone(),
      o.canceled,
    ),
  };
  let error = outcome.as_ref().and_then(|(o, _)| limit_error(o)).cloned();
  if let Some(e) = &error {
    text.push_str("\n\n");
    text.push_str(&e.message());
  }
  let left = std::mem::take(&mut *guard(&p.left));
  if !left.is_empty() {
    text.push_str("\n\n");
    text.push_str(&format_left_running(&left, &log, p.vocabulary));
  }
  let awaiting_input = outcome.is_none() && crate::platform::awaiting_input(p.pid as i32);
  if awaiting_input {
    text.push_str(&format!(
      "\n\n[waiting for input: process {} is blocked reading its input, which this runner does not feed; {}]",
      p.pid,
      p.vocabulary.interactive_hint()
    ));
  }
  CheckResult {
    awaiting_input,
    pid: p.pid,
    running: outcome.is_none(),
    exit_code,
    signal,
    killed,
    is_error: error.is_some() || (!killed && exit_code.is_some_and(|c| c != 0)),
    error,
    stdout,
    stderr,
    log,
    text,
  }
}

/// The error of a run stopped for a resource limit.
fn limit_error(o: &RunOutcome) -> Option<&ExecError> {
  o.error.as_ref().filter(|e| e.code == ErrorCode::ELIMIT)
}

fn finish_foreground(
  mut outcome: RunOutcome,
  capture: &SharedCapture,
  limits: OutputLimits,
  duration: Duration,
  keep_log: bool,
) -> CommandResult {
  let (stdout, stderr) = take_streams(capture, limits, false);
  let cut = stdout.truncation.truncated()
    || stderr.truncation.truncated()
    || stdout.binary
    || stderr.binary;
  let log = if keep_log {
    // still written to by what the command left running
    lock(capture).log.status(true)
  } else {
    lock(capture).log.finish(cut)
  };
  let mut text = format_finished(
    &shown(&stdout, &stderr),
    outcome.exit_code,
    outcome.signal.as_deref(),
    limits.max_bytes,
    &log,
  );
  if let Some(e) = limit_error(&outcome) {
    text.push_str("\n\n");
    text.push_str(&e.message());
  }
  outcome.judge_sandbox(&[&stderr.text, &stdout.text]);
  if let Some(line) = outcome.sandbox.as_ref().and_then(|r| r.text_line()) {
    text.push_str("\n\n");
    text.push_str(&line);
  }
  CommandResult {
    pid: outcome.pid,
    stdout,
    stderr,
    exit_code: Some(outcome.exit_code),
    signal: outcome.signal,
    timed_out: false,
    log,
    background: None,
    text,
    is_error: outcome.exit_code != 0,
    duration,
    error: outcome.error,
    adopted: Vec::new(),
    sandbox: outcome.sandbox,
  }
}

/// Close the log once the pumps reached EOF (the last process that held
/// the output pipes is gone).
fn close_log_after(capture: &SharedCapture, pumps: Option<JoinHandle<()>>) {
  let cap = capture.clone();
  tokio::spawn(async move {
    if let Some(p) = pumps {
      let _ = p.await;
    }
    lock(&cap).log.finish(true);
  });
}

/// `/proc/<pid>/cmdline` as a shell would show it: one line (what follows
/// a newline is cut, `…` says so), at most 200 characters.
fn command_line(pid: i32) -> String {
  let words = cmdline_words(pid);
  let mut line = one_line(&words.join(" "), 200);
  if line.is_empty() {
    line = marks::stat(pid).map_or_else(String::new, |_| format!("[pid {pid}]"));
  }
  line
}

fn cmdline_words(pid: i32) -> Vec<String> {
  crate::platform::cmdline(pid)
    .split(|&b| b == 0)
    .filter(|w| !w.is_empty())
    .map(|w| String::from_utf8_lossy(w).into_owned())
    .collect()
}

/// The first line of `text`, at most `max` characters; `…` marks a cut.
fn one_line(text: &str, max: usize) -> String {
  let first = text.lines().next().unwrap_or("");
  let cut = first.len() < text.trim_end().len();
  let mut line: String = first.chars().take(max - 1).collect();
  if cut || first.chars().count() > max - 1 {
    line.push('…');
  }
  line
}

/// Whether `pid` is still the run's shell as forked (`bash -c <command>`):
/// a `cmd &` before its exec, or a subshell `( … ) &` that never execs.
fn is_shell_fork(pid: i32, command: &str) -> bool {
  let w = cmdline_words(pid);
  w.len() >= 3 && w[1] == "-c" && w[2] == command
}

/// The command line of an adopted process once it ran its `exec`: a `cmd &`
/// caught between the fork and the exec shows the shell's command line,
/// so look again (up to 300 ms). A subshell that never execs (`( … ) &`,
/// `while …; done &`) is named so, with what it runs.
async fn settled_command_line(pid: i32, command: &str) -> String {
  let deadline = Instant::now() + Duration::from_millis(300);
  while is_shell_fork(pid, command) {
    if Instant::now() >= deadline {
      let running = crate::platform::children_of(Some(pid))
        .into_iter()
        .map(command_line)
        .find(|c| !c.is_empty());
      return match running {
        Some(c) => format!("bash (a subshell, running: {})", one_line(&c, 120)),
        None => "bash (a subshell)".to_owned(),
      };
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  command_line(pid)
}

/// Adopt what a command left running (`left`: its marked processes still
/// running after `bash` exited) as background jobs of the runner: one per
/// process whose parent is not among them (the server, not its workers).
/// Each job's output is the command's (shared). Returns (pid, command line).
async fn adopt_left(
  inner: &Arc<Inner>,
  left: Vec<i32>,
  mark: &str,
  command: &str,
  capture: &SharedCapture,
  limits: OutputLimits,
  vocabulary: Vocabulary,
) -> Vec<(u32, String)> {
  let alive: Vec<(i32, marks::Stat)> = left
    .into_iter()
    .filter_map(|p| marks::stat(p).filter(marks::alive).map(|st| (p, st)))
    .collect();
  let pids: HashSet<i32> = alive.iter().map(|(p, _)| *p).collect();
  let mut adopted = Vec::new();
  for (pid, st) in alive.iter().filter(|(_, st)| !pids.contains(&st.ppid)) {
    let command = settled_command_line(*pid, command).await;
    let cancel = CancellationToken::new();
    let (tx, rx) = watch::channel(None);
    let proc = Arc::new(BgProc {
      pid: *pid as u32,
      command: command.clone(),
      started: SystemTime::now(),
      started_at: Instant::now(),
      capture: capture.clone(),
      limits,
      cancel: cancel.clone(),
      done: rx,
      adopted: true,
      left: Mutex::new(Vec::new()),
      vocabulary,
    });
    guard(&inner.procs).insert(*pid as u32, proc);
    if inner.closed.load(Ordering::SeqCst) {
      cancel.cancel();
    }
    tokio::spawn(watch_adopted(
      *pid,
      st.start,
      mark.to_owned(),
      cancel,
      tx,
      inner.config.kill_grace,
    ));
    adopted.push((*pid as u32, command));
  }
  adopted
}

/// Whether `pid` is still the process that was adopted (not a reuse of its pid).
fn still_alive(pid: i32, start: u64) -> bool {
  marks::stat(pid).is_some_and(|st| st.start == start && marks::alive(&st))
}

/// `pid` and its descendants among the processes marked with `mark`.
fn subtree(pid: i32, mark: &str) -> Vec<i32> {
  let marked: Vec<(i32, i32)> = marks::running_marked(mark)
    .into_iter()
    .filter_map(|p| marks::stat(p).map(|st| (p, st.ppid)))
    .collect();
  let mut out = vec![pid];
  let mut i = 0;
  while i < out.len() {
    let parent = out[i];
    for (p, pp) in &marked {
      if *pp == parent && !out.contains(p) {
        out.push(*p);
      }
    }
    i += 1;
  }
  out
}

/// Signal an adopted process, its descendants and, if it leads one, its
/// process group, in [`crate::process::tree`]'s order (the process, its
/// marked descendants, each recorded for the reaper, then the group). Not a whole
/// [`crate::process::ProcessTree`]: the jobs adopted from one command share
/// its mark, and only this job's subtree is signalled.
fn signal_adopted(pid: i32, mark: &str, sig: i32) {
  let leads = marks::pgid_of(pid) == Some(pid);
  // a stopped process acts on SIGTERM once continued (see process::tree)
  let wake = sig == libc::SIGTERM;
  for p in subtree(pid, mark) {
    crate::process::reaper::note(p);
    if crate::platform::signal(p, sig) && wake {
      crate::platform::signal(p, libc::SIGCONT);
    }
  }
  if leads && crate::platform::signal(-pid, sig) && wake {
    crate::platform::signal(-pid, libc::SIGCONT);
  }
}

/// Watch an adopted process until it ends (polling /proc: it is not our
/// child), or kill it when `cancel` fires (SIGTERM, SIGKILL after `grace`).
async fn watch_adopted(
  pid: i32,
  start: u64,
  mark: String,
  cancel: CancellationToken,
  tx: watch::Sender<Option<(RunOutcome, Instant)>>,
  grace: Duration,
) {
  let outcome = |canceled: bool, signal: Option<&str>| RunOutcome {
    pid: pid as u32,
    exit_code: -1,
    signal: signal.map(str::to_owned),
    timed_out: false,
    canceled,
    duration: Duration::ZERO,
    stdout_bytes: 0,
    stderr_bytes: 0,
    error: None,
    sandbox: None,
  };
  loop {
    tokio::select! {
      _ = cancel.cancelled() => break,
      _ = tokio::time::sleep(Duration::from_millis(100)) => {
        if !still_alive(pid, start) {
          let _ = tx.send(Some((outcome(false, None), Instant::now())));
          return;
        }
      }
    }
  }
  let mut signal = "SIGTERM";
  if still_alive(pid, start) {
    signal_adopted(pid, &mark, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while still_alive(pid, start) && Instant::now() < deadline {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if still_alive(pid, start) {
      signal = "SIGKILL";
      signal_adopted(pid, &mark, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while still_alive(pid, start) && Instant::now() < deadline {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  }
  let _ = tx.send(Some((outcome(true, Some(signal)), Instant::now())));
}

/// Delete `exec-native-<hex>.log` files in `dir` last modified more than
/// `older_than` ago, except `keep`. Returns how many were deleted.
pub fn sweep_logs(dir: &Path, older_than: Duration, keep: &HashSet<PathBuf>) -> usize {
  let Ok(entries) = std::fs::read_dir(dir) else {
    return 0;
  };
  let now = SystemTime::now();
  let mut removed = 0;
  for entry in entries.flatten() {
    let name = entry.file_name();
    let Some(name) = name.to_str() else { continue };
    let Some(mid) = name
      .strip_prefix(LOG_PREFIX)
      .and_then(|r| r.strip_suffix(LOG_SUFFIX))
    else {
      continue;
    };
    if mid.is_empty() || !mid.bytes().all(|b| b.is_ascii_hexdigit()) {
      continue;
    }
    let path = entry.path();
    if keep.contains(&path) {
      continue;
    }
    let Ok(meta) = entry.metadata() else { continue };
    if !meta.is_file() {
      continue;
    }
    let old = meta
      .modified()
      .ok()
      .and_then(|m| now.duration_since(m).ok())
      .is_some_and(|age| age > older_than);
    if old && std::fs::remove_file(&path).is_ok() {
      removed += 1;
    }
  }
  removed
}

#[cfg(test)]
mod tests {
  use super::*;

  fn runner(dir: &Path) -> CommandRunner {
    CommandRunner::new(RunnerConfig {
      output_dir: dir.to_owned(),
      ..Default::default()
    })
  }

  fn opts(dir: &Path) -> CommandOptions {
    CommandOptions::new(dir)
  }

  #[tokio::test]
  async fn runs_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let res = r
      .run(
        "printf '\\e[31mred\\e[0m\\n'; echo err >&2; exit 3",
        opts(dir.path()),
      )
      .await;
    assert_eq!(res.stdout.text, "red\n");
    assert_eq!(res.stderr.text, "err\n");
    assert_eq!(res.exit_code, Some(3));
    assert!(res.is_error);
    assert_eq!(res.text, "stdout:\nred\n\nstderr:\nerr\n\nexit code: 3");
    assert_eq!(res.log, LogStatus::NotNeeded);
  }

  #[tokio::test]
  async fn line_truncation_offloads_everything() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let res = r.run("seq 1 8500", opts(dir.path())).await;
    let path = res.log.path().expect("a log").to_owned();
    assert!(res.text.ends_with(&format!(
      "[stdout: Showing last 2000 of 8500 lines. Full output: {}]",
      path.display()
    )));
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.lines().count(), 8500);
    assert!(res.stdout.text.starts_with("6501\n"));
  }

  #[tokio::test]
  async fn env_is_non_interactive_and_overridable() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let mut o = opts(dir.path());
    o.env.vars.push(("PAGER".into(), "less".into()));
    let res = r
      .run(
        "echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $TERM $NO_COLOR",
        o,
      )
      .await;
    assert_eq!(res.stdout.text, "less cat 0 dumb 1\n");
  }

  #[tokio::test]
  async fn read_gets_eof() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let t = Instant::now();
    let res = r.run("read x; echo \"status $?\"", opts(dir.path())).await;
    assert_eq!(res.stdout.text, "status 1\n");
    assert!(t.elapsed() < Duration::from_secs(5));
  }

  #[tokio::test]
  async fn timeout_backgrounds_then_check_and_list() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let mut o = opts(dir.path());
    o.timeout = Some(Duration::from_millis(300));
    let res = r.run("echo start; sleep 1; echo done", o).await;
    let pid = res.background.as_ref().unwrap().pid;
    assert!(res.timed_out);
    assert_eq!(res.exit_code, None);
    assert_eq!(res.stdout.text, "start\n");
    assert!(res.text.starts_with(&format!(
      "[Command backgrounded after 0.3s timeout (pid {pid})"
    )));
    assert!(res.log.path().is_some());
    let c = r.check(pid).unwrap();
    assert!(c.running);
    assert_eq!(r.list()[0].pid, pid);
    assert!(r.list()[0].running);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let c = r.check(pid).unwrap();
    assert!(!c.running);
    assert_eq!(c.exit_code, Some(0));
    assert_eq!(c.stdout.text, "done\n");
    assert!(c
      .text
      .starts_with(&format!("[Process {pid} exited with code 0.")));
    let again = r.check(pid).unwrap();
    assert_eq!(again.stdout.text, "");
    assert!(again.text.contains("No new output since last check."));
    let log = std::fs::read_to_string(res.log.path().unwrap()).unwrap();
    assert_eq!(log, "start\ndone\n");
    assert_eq!(r.check(1).unwrap_err().code, ErrorCode::ESRCH);
  }

  #[tokio::test]
  async fn kill_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let mut o = opts(dir.path());
    o.background = true;
    let res = r
      .run("yes > /dev/null & yes > /dev/null & wait", o.clone())
      .await;
    let pid = res.pid;
    assert!(res
      .text
      .starts_with(&format!("[Command started in the background (pid {pid})")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(crate::process::registry::group_alive(pid as i32));
    let k = r.kill(pid).await.unwrap();
    assert!(k.killed);
    assert!(!k.running);
    let t = Instant::now();
    while crate::process::registry::group_alive(pid as i32) && t.elapsed() < Duration::from_secs(3)
    {
      tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!crate::process::registry::group_alive(pid as i32));

    let res = r.run("sleep 30", o).await;
    assert_eq!(r.close().await, 1);
    assert!(!r.list().iter().any(|p| p.running));
    assert!(r.list().iter().any(|p| p.pid == res.pid && p.killed));
    let after = r.run("echo hi", opts(dir.path())).await;
    assert_eq!(after.error.unwrap().code, ErrorCode::ECANCELED);
  }

  #[tokio::test]
  async fn what_a_command_leaves_running_is_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let res = r
      .run(
        "sleep 30 & setsid nohup sleep 31 >/dev/null 2>&1 & sleep 0.2; echo started",
        opts(dir.path()),
      )
      .await;
    assert_eq!(res.exit_code, Some(0));
    assert_eq!(res.adopted.len(), 2, "{}", res.text);
    let (a, b) = (res.adopted[0].0, res.adopted[1].0);
    assert!(
      res.text.contains("[Left running in the background:\n"),
      "{}",
      res.text
    );
    assert!(res.text.contains(&format!("pid {a}: sleep 3")));
    assert!(res.text.ends_with("Use check_pid or kill_pid to manage.]"));
    assert!(still_alive(a as i32, marks::stat(a as i32).unwrap().start));
    let c = r.check(a).unwrap();
    assert!(c.running);
    let k = r.kill(a).await.unwrap();
    assert!(k.killed && !k.running && k.exit_code.is_none());
    assert!(
      k.text
        .starts_with(&format!("[Process {a} killed (SIGTERM).")),
      "{}",
      k.text
    );
    assert!(marks::is_dead(a as i32));
    assert!(!marks::is_dead(b as i32));
    assert_eq!(r.close().await, 1);
    assert!(marks::is_dead(b as i32));
  }

  #[tokio::test]
  async fn cleanup_takes_the_tree_down() {
    let dir = tempfile::tempdir().unwrap();
    let r = runner(dir.path());
    let mut o = opts(dir.path());
    o.cleanup = true;
    let res = r.run("sleep 30 & echo $!", o).await;
    assert!(res.adopted.is_empty());
    assert_eq!(
      res.text,
      format!("stdout:\n{}\nexit code: 0", res.stdout.text)
    );
    let pid: i32 = res.stdout.text.trim().parse().unwrap();
    let t = Instant::now();
    while !marks::is_dead(pid) && t.elapsed() < Duration::from_secs(3) {
      tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(marks::is_dead(pid));
    assert!(r.list().is_empty());
  }

  #[test]
  fn sweep_removes_only_old_logs() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("exec-native-00ff.log");
    let other = dir.path().join("other.log");
    std::fs::write(&old, "x").unwrap();
    std::fs::write(&other, "x").unwrap();
    assert_eq!(
      sweep_logs(dir.path(), Duration::from_secs(3600), &HashSet::new()),
      0
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(
      sweep_logs(dir.path(), Duration::from_millis(1), &HashSet::new()),
      1
    );
    assert!(!old.exists());
    assert!(other.exists());
  }
}
