//! Running a process: spawn in its own group, pump its output on the runtime,
//! enforce the timeout and cancellation, kill the whole group, settle on the
//! child's exit plus a bounded drain (never on a pipe a grandchild holds open).

use std::ffi::OsString;
use std::future::Future;
use std::mem::MaybeUninit;
#[cfg(unix)]
use std::os::fd::{AsRawFd, OwnedFd};
#[cfg(all(unix, not(target_os = "linux")))]
use std::os::unix::process::CommandExt;
#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
#[cfg(unix)]
use std::process::ExitStatus;
#[cfg(all(unix, not(target_os = "linux")))]
use std::process::Stdio;
#[cfg(unix)]
use std::sync::atomic::Ordering;
#[cfg(unix)]
use std::sync::Arc;
use std::time::Duration;

#[cfg(unix)]
use crate::process::child::{Child, StdinPipe};
#[cfg(unix)]
use nix::sys::signal::Signal;
#[cfg(unix)]
use tokio::io::unix::AsyncFd;
#[cfg(unix)]
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tokio::time::Instant;
#[cfg(unix)]
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, ExecError};
#[cfg(unix)]
use crate::platform;
#[cfg(unix)]
use crate::process::limits::LimitGuard;
use crate::process::limits::Limits;
#[cfg(unix)]
use crate::process::marks;
#[cfg(unix)]
use crate::process::registry;
use crate::process::spec::EnvSpec;
#[cfg(unix)]
use crate::process::ProcessTree;

/// What the child's stdin is.
#[derive(Debug, Clone, Default)]
pub enum StdinMode {
  /// `/dev/null`: a program that reads gets EOF at once.
  #[default]
  Null,
  /// These bytes, then EOF.
  Bytes(Vec<u8>),
  /// A pipe the caller writes to ([`Execution::take_stdin`]).
  Piped,
}

/// A resolved process to start.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
  pub program: PathBuf,
  pub args: Vec<OsString>,
  pub arg0: Option<OsString>,
  pub cwd: Option<PathBuf>,
  pub env: EnvSpec,
  pub stdin: StdinMode,
  /// Opt-in resource limits (see [`crate::process::limits`]).
  pub limits: Limits,
  /// SIGKILL the child if the host dies, even by SIGKILL (Linux
  /// PR_SET_PDEATHSIG; costs the posix_spawn fast path).
  pub die_with_parent: bool,
  /// Opt-in OS sandbox (see [`crate::process::sandbox`]).
  pub sandbox: Option<crate::process::sandbox::SandboxPolicy>,
}

impl ProcessSpec {
  pub fn new(program: impl Into<PathBuf>) -> Self {
    ProcessSpec {
      program: program.into(),
      args: Vec::new(),
      arg0: None,
      cwd: None,
      env: EnvSpec::inherit(),
      stdin: StdinMode::Null,
      limits: Limits::default(),
      die_with_parent: false,
      sandbox: None,
    }
  }

  pub fn arg(mut self, a: impl Into<OsString>) -> Self {
    self.args.push(a.into());
    self
  }
}

/// How a run is supervised.
#[derive(Debug, Clone)]
pub struct RunPolicy {
  /// Kill the group after this long (`None`: never).
  pub timeout: Option<Duration>,
  /// The timeout as the caller gave it, for the message (`after 1s`).
  pub timeout_label: Option<String>,
  /// Between SIGTERM and SIGKILL.
  pub kill_grace: Duration,
  /// How long to keep reading after the child exited, for output still in the
  /// pipes or held open by a grandchild.
  pub drain: Duration,
  /// Terminate what is left of the tree (its process group and every marked
  /// descendant, even one that left the group) when the child exits.
  pub cleanup_group_on_exit: bool,
  /// Id of the host environment that owns the run (see [`registry::kill_all`]).
  pub owner: u64,
}

impl Default for RunPolicy {
  fn default() -> Self {
    RunPolicy {
      timeout: Some(Duration::from_secs(30)),
      timeout_label: None,
      kill_grace: Duration::from_millis(500),
      drain: Duration::from_millis(100),
      cleanup_group_on_exit: true,
      owner: 0,
    }
  }
}

/// Where a stream's bytes go. The pump calls `write` for each read (or reads
/// into the room the sink lends, then calls `filled`), `tick` when
/// `next_tick` is due (to flush coalesced data), and awaits `ready` before
/// reading on (backpressure).
pub trait OutputSink: Send + 'static {
  fn write(&mut self, data: &[u8]);
  /// Room for the next read, in the sink's own buffer: the pump reads into
  /// it in place (instead of into its buffer and then `write`, one copy
  /// less) and calls [`OutputSink::filled`]. A read fills at most the room,
  /// so a sink that coalesces lends what is left of its open chunk. `None`
  /// or empty: the pump reads into its own buffer and calls `write`.
  fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
    None
  }
  /// The pump read `n` (> 0) bytes into the start of the room `lend` gave.
  fn filled(&mut self, _n: usize) {}
  fn next_tick(&self) -> Option<Instant> {
    None
  }
  fn tick(&mut self) {}
  fn ready(&mut self) -> impl Future<Output = ()> + Send {
    async {}
  }
  fn finish(&mut self) -> impl Future<Output = ()> + Send {
    async {}
  }
  /// Whether this sink keeps only a head and a tail of what it is given (a
  /// bounded capture). Only such a sink lets the pump drop output it cannot
  /// keep without reading it (see [`OutputSink::tail_window`]); a sink that
  /// needs every byte (streaming, a log) keeps the default.
  fn keeps_head_tail(&self) -> bool {
    false
  }
  /// With [`OutputSink::keeps_head_tail`]: `Some(n)` once only the last `n`
  /// bytes of what follows can still be kept (the head is full).
  fn tail_window(&self) -> Option<usize> {
    None
  }
  /// With [`OutputSink::keeps_head_tail`]: `n` bytes the pump dropped unread,
  /// each followed by at least the `tail_window` bytes that will be written.
  fn skipped(&mut self, _n: u64) {}
}

/// A sink that drops everything (only counts, through the pump).
pub struct Discard;
impl OutputSink for Discard {
  fn write(&mut self, _: &[u8]) {}
}

impl OutputSink for crate::buffer::HeadTailBuffer {
  fn write(&mut self, data: &[u8]) {
    self.push(data);
  }
  fn keeps_head_tail(&self) -> bool {
    true
  }
  fn tail_window(&self) -> Option<usize> {
    crate::buffer::HeadTailBuffer::tail_window(self)
  }
  fn skipped(&mut self, n: u64) {
    self.skip(n);
  }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
  pub pid: u32,
  /// The exit code; 128+N when a signal ended the child; 124 on timeout.
  pub exit_code: i32,
  /// The signal that ended the child, e.g. `SIGTERM`.
  pub signal: Option<String>,
  pub timed_out: bool,
  pub canceled: bool,
  pub duration: Duration,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// TIMEOUT or ECANCELED; other errors are added by callers.
  pub error: Option<ExecError>,
  /// A sandboxed run: how it was applied; callers that hold the output
  /// judge denials with [`RunOutcome::judge_sandbox`].
  pub sandbox: Option<crate::process::sandbox::SandboxReport>,
}

impl RunOutcome {
  /// Judge whether a sandbox denial explains the run's failure, from its
  /// output (stderr first).
  pub fn judge_sandbox(&mut self, texts: &[&str]) {
    if let Some(r) = &mut self.sandbox {
      r.judge(self.exit_code, self.signal.as_deref(), texts);
    }
  }
}

pub struct Finished<O, E> {
  pub outcome: RunOutcome,
  pub stdout: O,
  pub stderr: E,
}

#[cfg(unix)]
/// The two pump tasks of a run.
type Pumps<O, E> = (JoinHandle<(O, u64)>, JoinHandle<(E, u64)>);

#[cfg(unix)]
/// A spawned child whose output is being pumped.
pub struct Execution<O: OutputSink, E: OutputSink> {
  child: Child,
  pid: u32,
  started: Instant,
  stdin: Option<StdinPipe>,
  input_task: Option<JoinHandle<()>>,
  /// `None` once handed out (by the drain, or to the caller).
  pumps: Option<Pumps<O, E>>,
  stop: CancellationToken,
  /// Asks each pump to read what its pipe holds now (see [`Catchup`]).
  catchup: [Arc<Catchup>; 2],
  mark: String,
  guard: LimitGuard,
  sandbox: Option<crate::process::sandbox::SandboxReport>,
}

#[cfg(unix)]
/// The directory a spec runs in.
fn spec_cwd(spec: &ProcessSpec) -> Result<PathBuf, ExecError> {
  match &spec.cwd {
    Some(c) => Ok(c.clone()),
    None => std::env::current_dir().map_err(|e| {
      ExecError::new(
        ErrorCode::ENOENT,
        format!("the host's working directory is gone: {e}"),
      )
    }),
  }
}

/// Spawn through `posix_spawn` (no `pre_exec`, so the vfork fast path is kept
/// whatever the host's memory) in a new process group.
#[cfg(all(unix, not(target_os = "linux")))]
fn build_command(spec: &ProcessSpec, mark: &str) -> tokio::process::Command {
  let mut cmd = std::process::Command::new(&spec.program);
  cmd.args(&spec.args);
  if let Some(a0) = &spec.arg0 {
    cmd.arg0(a0);
  }
  if let Some(cwd) = &spec.cwd {
    cmd.current_dir(cwd);
  }
  if !spec.env.is_plain_inherit() {
    cmd.env_clear();
    cmd.envs(spec.env.build());
  }
  // every descendant inherits the mark, so it can be found if it leaves the group
  cmd.env(marks::MARK_VAR, mark);
  cmd.process_group(0);
  cmd.stdin(match spec.stdin {
    StdinMode::Null => Stdio::null(),
    _ => Stdio::piped(),
  });
  cmd.stdout(Stdio::piped());
  cmd.stderr(Stdio::piped());
  tokio::process::Command::from(cmd)
}

#[cfg(unix)]
/// What the fork path execs: the program, argv (with `arg0`) and exactly the
/// environment [`build_command`] gives the child.
fn exec_image(
  spec: &ProcessSpec,
  mark: &str,
) -> Result<crate::process::spec::ExecImage, ExecError> {
  let mut env: Vec<(OsString, OsString)> = if spec.env.is_plain_inherit() {
    std::env::vars_os().collect()
  } else {
    spec.env.build()
  };
  env.retain(|(k, _)| k != marks::MARK_VAR);
  env.push((marks::MARK_VAR.into(), mark.into()));
  let mut argv = vec![spec
    .arg0
    .clone()
    .unwrap_or_else(|| spec.program.clone().into_os_string())];
  argv.extend(spec.args.iter().cloned());
  crate::process::spec::ExecImage::new(&spec.program, &argv, &env, spec.cwd.as_deref())
}

/// A spawned pipe child and the host's ends of its pipes.
#[cfg(unix)]
struct LaunchedChild {
  child: Child,
  pid: i32,
  stdin: Option<StdinPipe>,
  stdout: OwnedFd,
  stderr: OwnedFd,
}

/// A pipe, both ends close-on-exec: (read, write).
#[cfg(target_os = "linux")]
fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
  let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
  Ok((r, w))
}

/// Prepare the spawn of `spec` (its exec image, its pipes' settings) and
/// return what does it: the addon's own `clone(CLONE_VM|CLONE_VFORK)` spawn
/// ([`platform::raw_spawn`]), whose child applies the limits' `plan` and
/// the sandbox's restriction itself before exec. Nothing forks, whatever
/// the host's heap, and a restriction never touches a task of the host.
#[cfg(target_os = "linux")]
fn launch_child(
  spec: &ProcessSpec,
  mark: &str,
  plan: Option<crate::process::limits::ChildPlan>,
  in_child: Option<crate::process::sandbox::InChild>,
) -> Result<impl FnOnce() -> std::io::Result<LaunchedChild> + Send + 'static, ExecError> {
  use std::os::unix::ffi::OsStrExt;
  let image = exec_image(spec, mark)?;
  crate::trace::at("rt.image");
  let cwd = match &spec.cwd {
    Some(c) => Some(
      std::ffi::CString::new(c.as_os_str().as_bytes())
        .map_err(|_| ExecError::invalid("cwd contains a NUL byte"))?,
    ),
    None => None,
  };
  let null_stdin = matches!(spec.stdin, StdinMode::Null);
  Ok(move || {
    let (stdin_child, stdin_host) = if null_stdin {
      (
        platform::open_noctty(std::path::Path::new("/dev/null"))?,
        None,
      )
    } else {
      let (r, w) = cloexec_pipe()?;
      (r, Some(w))
    };
    let (out_r, out_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    let step = move || -> std::io::Result<()> {
      if let Some(plan) = &plan {
        plan.apply()?;
      }
      if let Some(r) = &in_child {
        r.apply()?;
      }
      Ok(())
    };
    let (program, argv, envp) = image.parts();
    let req = platform::RawSpawn {
      program,
      argv,
      envp,
      cwd: cwd.as_deref(),
      stdio: [
        stdin_child.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
      ],
      new_group: true,
      step: Some(&step),
    };
    crate::trace::at("rt.pipes");
    let (pid, pidfd) = platform::raw_spawn(&req)?;
    crate::trace::at("rt.cloned");
    drop((stdin_child, out_w, err_w));
    let child = platform::RawChild::new(pid, pidfd)?;
    let stdin = match stdin_host {
      Some(w) => Some(StdinPipe::from_owned_fd(w)?),
      None => None,
    };
    Ok(LaunchedChild {
      child: Child::Raw(child),
      pid,
      stdin,
      stdout: out_r,
      stderr: err_r,
    })
  })
}

/// Off Linux: std's `Command` (posix_spawn; a fork when limits ask for a
/// step before exec), run by tokio.
#[cfg(all(unix, not(target_os = "linux")))]
fn launch_child(
  spec: &ProcessSpec,
  mark: &str,
  plan: Option<crate::process::limits::ChildPlan>,
  _in_child: Option<crate::process::sandbox::InChild>,
) -> Result<impl FnOnce() -> std::io::Result<LaunchedChild> + Send + 'static, ExecError> {
  let mut cmd = build_command(spec, mark);
  // limits are set in the child before exec (exact, but a real fork instead
  // of posix_spawn: only when limits are asked for)
  if let Some(plan) = plan {
    // the child execs itself (no execvp /bin/sh fallback): the last step
    let image = exec_image(spec, mark)?;
    // SAFETY: the closure runs in the forked child before exec and only makes system calls that
    // allocate and lock nothing: `plan.apply()` (signal dispositions, setrlimit) and `image.exec()`
    // (execve of the argv/envp `exec_image` built before the fork, moved into the closure so they
    // live in the child).
    unsafe {
      cmd.pre_exec(move || {
        plan.apply()?;
        Err(image.exec())
      });
    }
  }
  Ok(move || {
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0) as i32;
    let stdout = child
      .stdout
      .take()
      .expect("stdout is piped")
      .into_owned_fd()?;
    let stderr = child
      .stderr
      .take()
      .expect("stderr is piped")
      .into_owned_fd()?;
    let stdin = match child.stdin.take() {
      Some(w) => Some(StdinPipe::from_owned_fd(w.into_owned_fd()?)?),
      None => None,
    };
    Ok(LaunchedChild {
      child: Child::Tokio(child),
      pid,
      stdin,
      stdout,
      stderr,
    })
  })
}

/// The value of a finished task. A panic goes on up; a task the runtime
/// cancelled (it is shutting down, and this future is dropped with it) has no
/// value to give, so this never completes instead of panicking.
async fn joined<T>(r: Result<T, tokio::task::JoinError>) -> T {
  match r {
    Ok(v) => v,
    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
    Err(_) => std::future::pending().await,
  }
}

/// `spec` as it is spawned: under a sandbox, its helper in front of the
/// program, or (no namespaces) the program itself with the restriction for
/// the child to apply before exec (in `prepared`).
#[cfg(unix)]
fn sandboxed<'a>(
  spec: &'a ProcessSpec,
  setup: &crate::process::ChildSetup<'_>,
  prepared: &mut crate::process::Prepared,
) -> Result<std::borrow::Cow<'a, ProcessSpec>, ExecError> {
  let path_var = spec
    .sandbox
    .is_some()
    .then(|| spec.env.path_var())
    .flatten();
  let inv = setup.launch(
    prepared,
    crate::process::sandbox::Invocation {
      program: spec.program.clone(),
      argv0: spec.arg0.clone(),
      args: spec.args.clone(),
    },
    path_var,
  )?;
  if spec.sandbox.is_none() {
    return Ok(std::borrow::Cow::Borrowed(spec));
  }
  Ok(std::borrow::Cow::Owned(ProcessSpec {
    program: inv.program,
    args: inv.args,
    arg0: inv.argv0,
    sandbox: None,
    ..spec.clone()
  }))
}

/// The checks of a spec before anything is made for it.
#[cfg(unix)]
fn validate(spec: &ProcessSpec) -> Result<(), ExecError> {
  spec.env.validate()?;
  if spec.args.iter().any(|a| a.as_encoded_bytes().contains(&0)) {
    return Err(ExecError::invalid("an argument contains a NUL byte"));
  }
  Ok(())
}

/// Kill a child whose run can't go on (its output can't be watched): its
/// group, its marked tree, and the sweep for what left both.
#[cfg(unix)]
fn abandon(child: &mut Child, pid: u32, mark: &str, owner: u64) {
  let tree = ProcessTree::new(pid as i32, mark);
  tree.signal(Signal::SIGKILL, true);
  let _ = child.start_kill();
  tree.terminate_later(owner, Duration::ZERO);
}

/// With [`StdinMode::Bytes`], the task that writes them to the child's stdin
/// (taken from `stdin`) and closes it.
#[cfg(unix)]
fn feed_input(mode: &StdinMode, stdin: &mut Option<StdinPipe>) -> Option<JoinHandle<()>> {
  let StdinMode::Bytes(bytes) = mode else {
    return None;
  };
  let mut w = stdin.take()?;
  let bytes = bytes.clone();
  Some(tokio::spawn(async move {
    // EPIPE (the child did not read it all) is not an error of the run
    let _ = w.write_all(&bytes).await;
    let _ = w.shutdown().await;
  }))
}

#[cfg(unix)]
impl<O: OutputSink, E: OutputSink> Execution<O, E> {
  /// Start `spec`. Must be called within a tokio runtime.
  pub fn spawn(spec: &ProcessSpec, owner: u64, stdout: O, stderr: E) -> Result<Self, ExecError> {
    crate::trace::at("rt.spawn");
    validate(spec)?;
    // the sandbox's writable cwd (the host's own is looked up only for it,
    // once)
    let cwd = match spec.sandbox {
      Some(_) => spec_cwd(spec)?,
      None => spec.cwd.clone().unwrap_or_default(),
    };
    let setup = crate::process::ChildSetup {
      owner,
      limits: &spec.limits,
      die_with_parent: spec.die_with_parent,
      sandbox: spec.sandbox.as_ref(),
      cwd: &cwd,
    };
    let mut prepared = setup.prepare()?;
    crate::trace::at("rt.mark");
    let spec = &*sandboxed(spec, &setup, &mut prepared)?;
    let started = Instant::now();
    let shown = spec.program.display().to_string();
    let (plan, in_child) = (prepared.plan.take(), prepared.in_child.take());
    let launch = launch_child(spec, &prepared.mark, plan, in_child)?;
    let spawned = setup.spawn(prepared, move || {
      let spawned = launch().map_err(|e| ExecError::from_spawn(&shown, &e))?;
      let pid = spawned.pid;
      Ok((spawned, pid))
    })?;
    let pid = spawned.pid as u32;
    let (mark, guard) = (spawned.mark, spawned.guard);
    let sandbox = spawned.sandbox;
    let LaunchedChild {
      mut child,
      stdin,
      stdout: out,
      stderr: err,
      ..
    } = spawned.child;

    let stop = CancellationToken::new();
    let (out, err) = match (watch_pipe(Ok(out)), watch_pipe(Ok(err))) {
      (Ok(out), Ok(err)) => (out, err),
      (Err(e), _) | (_, Err(e)) => {
        // nothing could read its output: the run does not go on without it
        abandon(&mut child, pid, &mark, owner);
        return Err(ExecError::new(
          ErrorCode::EIO,
          format!(
            "cannot watch the output pipes of {}: {e}",
            spec.program.display()
          ),
        ));
      }
    };
    let catchup = [Arc::new(Catchup::default()), Arc::new(Catchup::default())];
    let out_task = tokio::spawn(pump(out, stdout, stop.clone(), catchup[0].clone()));
    let err_task = tokio::spawn(pump(err, stderr, stop.clone(), catchup[1].clone()));

    let mut stdin = stdin;
    let input_task = feed_input(&spec.stdin, &mut stdin);
    crate::trace::at("rt.started");
    Ok(Execution {
      child,
      pid,
      started,
      stdin,
      input_task,
      pumps: Some((out_task, err_task)),
      stop,
      catchup,
      mark,
      guard,
      sandbox,
    })
  }

  pub fn pid(&self) -> u32 {
    self.pid
  }

  /// The value of `EXEC_NATIVE_RUN_ID` this run's processes carry.
  pub fn mark(&self) -> &str {
    &self.mark
  }

  /// The stdin pipe, with [`StdinMode::Piped`].
  pub fn take_stdin(&mut self) -> Option<StdinPipe> {
    self.stdin.take()
  }

  /// Wait for the child's exit, the timeout, `cancel` or a resource limit
  /// (the last three kill the group and the marked tree).
  async fn exit_phase(&mut self, policy: &RunPolicy, cancel: &CancellationToken) -> ExitPhase {
    let pgid = self.pid as i32;
    let mut timed_out = false;
    let mut canceled = false;
    let mut limit_hit: Option<ExecError> = None;
    let deadline = policy.timeout.map(|t| self.started + t);
    let status = tokio::select! {
      st = self.child.wait() => st,
      e = self.guard.watch() => {
        limit_hit = Some(e);
        // no grace for a tree over its limit
        self.guard.kill_tree(pgid);
        kill_sequence(&mut self.child, pgid, &self.mark, Duration::ZERO).await
      }
      _ = sleep_until_opt(deadline) => {
        timed_out = true;
        kill_sequence(&mut self.child, pgid, &self.mark, policy.kill_grace).await
      }
      _ = cancel.cancelled() => {
        canceled = true;
        kill_sequence(&mut self.child, pgid, &self.mark, policy.kill_grace).await
      }
    };
    self.guard.release();
    ExitPhase {
      status,
      timed_out,
      canceled,
      limit_hit,
    }
  }

  /// The outcome once the exit phase and the drain are over.
  fn outcome_of(
    &mut self,
    phase: ExitPhase,
    policy: &RunPolicy,
    stdout_bytes: u64,
    stderr_bytes: u64,
  ) -> RunOutcome {
    if let Some(t) = self.input_task.take() {
      t.abort();
    }
    let ExitPhase {
      status,
      timed_out,
      canceled,
      mut limit_hit,
    } = phase;
    let (mut exit_code, signal) = match status {
      Ok(st) => decode_status(st),
      Err(_) => (-1, None),
    };
    let mut error = None;
    if limit_hit.is_none() {
      limit_hit = self
        .guard
        .explain_exit(signal.as_deref(), exit_code, timed_out || canceled);
    }
    if let Some(e) = limit_hit {
      error = Some(e);
    } else if timed_out {
      exit_code = 124;
      let label = policy
        .timeout_label
        .clone()
        .or_else(|| policy.timeout.map(format_duration))
        .unwrap_or_default();
      error = Some(ExecError::new(
        ErrorCode::TIMEOUT,
        format!("Process timeout after {label}"),
      ));
    } else if canceled {
      error = Some(ExecError::new(ErrorCode::ECANCELED, "Process canceled"));
    }
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
      sandbox: self.sandbox.clone(),
    }
  }

  /// Wait for the end: the child's exit (or the timeout, or `cancel`), then the
  /// group cleanup and the drain.
  pub async fn wait(mut self, policy: &RunPolicy, cancel: &CancellationToken) -> Finished<O, E> {
    let pgid = self.pid as i32;
    let phase = self.exit_phase(policy, cancel).await;
    crate::trace::at("rt.exited");
    // what is left of the tree (the group, and marked escapees) goes the same way
    if policy.cleanup_group_on_exit || phase.ended_by_us() {
      ProcessTree::new(pgid, &self.mark).terminate_later(policy.owner, policy.kill_grace);
    } else {
      registry::unregister(pgid);
    }
    crate::trace::at("rt.swept");
    let (out, err) = self.drain(policy).await;
    let (stdout, stdout_bytes) = joined(out).await;
    let (stderr, stderr_bytes) = joined(err).await;
    crate::trace::at("rt.drained");
    Finished {
      outcome: self.outcome_of(phase, policy, stdout_bytes, stderr_bytes),
      stdout,
      stderr,
    }
  }

  /// Like [`Execution::wait`], except that when the child exits on its own
  /// and marked processes of its tree still run, they are left running and
  /// returned (`left`): the pumps keep reading what they write until the
  /// last one closes the pipes (`pumps` ends then). A run that was killed
  /// (timeout, `cancel`, a limit) takes its whole tree down as `wait` does.
  pub async fn wait_leaving_tree(
    mut self,
    policy: &RunPolicy,
    cancel: &CancellationToken,
  ) -> LeftRunning {
    let pgid = self.pid as i32;
    let phase = self.exit_phase(policy, cancel).await;
    let left = if phase.ended_by_us() {
      Vec::new()
    } else {
      leftovers(&self.mark, pgid).await
    };
    if left.is_empty() {
      ProcessTree::new(pgid, &self.mark).terminate_later(policy.owner, policy.kill_grace);
      let (out, err) = self.drain(policy).await;
      let outcome = self.outcome_of(
        phase,
        policy,
        out.map_or(0, |(_, n)| n),
        err.map_or(0, |(_, n)| n),
      );
      return LeftRunning {
        outcome,
        mark: self.mark.clone(),
        left,
        pumps: None,
      };
    }
    // what the command wrote before it exited is in the pipes (which the
    // leftovers keep open: no EOF to wait for): the pumps read it before the
    // result is made, so the last lines are not missing from it
    self.catch_up(policy.drain).await;
    // the leftovers are the caller's now; the host's exit still kills them by their mark
    registry::unregister(pgid);
    let (out_task, err_task) = self.pumps.take().expect("the pumps are handed out once");
    let outcome = self.outcome_of(phase, policy, 0, 0);
    let pumps = tokio::spawn(async move {
      let _ = out_task.await;
      let _ = err_task.await;
    });
    LeftRunning {
      outcome,
      mark: self.mark.clone(),
      left,
      pumps: Some(pumps),
    }
  }

  /// Have both pumps read what their pipes hold now (bounded by `within`).
  async fn catch_up(&self, within: Duration) {
    let asks = self.catchup.iter().map(|c| c.ask()).collect::<Vec<_>>();
    let all = async {
      for (c, g) in self.catchup.iter().zip(asks) {
        c.answered_from(g).await;
      }
    };
    let _ = tokio::time::timeout(within, all).await;
  }

  /// Read until EOF, but no longer than `drain` after the exit (a timer in
  /// this future, not a task: no spawn per run).
  async fn drain(&mut self, policy: &RunPolicy) -> PumpResults<O, E> {
    let (out_task, err_task) = self.pumps.take().expect("the pumps are drained once");
    let pumps = async { (out_task.await, err_task.await) };
    tokio::pin!(pumps);
    tokio::select! {
      r = &mut pumps => r,
      _ = tokio::time::sleep(policy.drain) => {
        self.stop.cancel();
        pumps.await
      }
    }
  }
}

#[cfg(unix)]
type PumpResults<O, E> = (
  Result<(O, u64), tokio::task::JoinError>,
  Result<(E, u64), tokio::task::JoinError>,
);

#[cfg(unix)]
/// How the wait for the child's exit ended.
struct ExitPhase {
  status: std::io::Result<ExitStatus>,
  timed_out: bool,
  canceled: bool,
  limit_hit: Option<ExecError>,
}

#[cfg(unix)]
impl ExitPhase {
  /// The run was killed (timeout, cancel, a limit), not ended on its own.
  fn ended_by_us(&self) -> bool {
    self.timed_out || self.canceled || self.limit_hit.is_some()
  }
}

/// What [`Execution::wait_leaving_tree`] returns.
pub struct LeftRunning {
  pub outcome: RunOutcome,
  /// The run's mark (`EXEC_NATIVE_RUN_ID`), carried by what was left.
  pub mark: String,
  /// Marked processes still running after the child's exit.
  pub left: Vec<i32>,
  /// Ends when the pumps reach EOF (`None`: they already did).
  pub pumps: Option<JoinHandle<()>>,
}

/// The error of a run canceled before it started (an `AbortSignal` that was
/// already aborted): nothing was spawned.
pub fn canceled_before_start() -> ExecError {
  ExecError::new(
    ErrorCode::ECANCELED,
    "canceled before it started: the signal was already aborted, nothing ran",
  )
}

// Windows: the same run, its tree in a Job Object (issue 25)
#[cfg(windows)]
#[path = "supervise_windows.rs"]
mod windows;
#[cfg(windows)]
pub use windows::{decode_status, run, Execution};
#[cfg(windows)]
pub(crate) use windows::{enter_job, job_limit_error, job_limits, MARK_VAR};

#[cfg(unix)]
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

async fn sleep_until_opt(deadline: Option<Instant>) {
  match deadline {
    Some(d) => tokio::time::sleep_until(d).await,
    None => std::future::pending().await,
  }
}

#[cfg(unix)]
/// SIGTERM the tree (the child itself, its marked descendants, the group:
/// [`ProcessTree`]'s order); SIGKILL after `grace`.
pub async fn kill_sequence(
  child: &mut Child,
  pgid: i32,
  mark: &str,
  grace: Duration,
) -> std::io::Result<ExitStatus> {
  // the child is ours and not reaped until `wait` returns: its pid is its own
  let tree = ProcessTree::new(pgid, mark);
  tree.signal(Signal::SIGTERM, true);
  match tokio::time::timeout(grace, child.wait()).await {
    Ok(st) => st,
    Err(_) => {
      tree.signal(Signal::SIGKILL, true);
      let _ = child.start_kill();
      child.wait().await
    }
  }
}

#[cfg(unix)]
/// (exit code, signal name): a signal death is 128+N.
pub fn decode_status(st: ExitStatus) -> (i32, Option<String>) {
  if let Some(code) = st.code() {
    (code, None)
  } else if let Some(sig) = st.signal() {
    (128 + sig, Some(registry::signal_name(sig)))
  } else {
    (-1, None)
  }
}

/// `1000ms` -> `1s`, `1500ms` -> `1.5s`.
pub fn format_duration(d: Duration) -> String {
  let ms = d.as_millis();
  if ms.is_multiple_of(1000) {
    format!("{}s", ms / 1000)
  } else {
    let s = format!("{:.3}", ms as f64 / 1000.0);
    format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
  }
}

#[cfg(unix)]
const READ_BUF: usize = 128 * 1024;
#[cfg(unix)]
/// Pipe size asked for once a stream proves heavy (a read filled the pipe).
const HEAVY_PIPE_SIZE: i32 = 1024 * 1024;
#[cfg(unix)]
/// A pipe a skimming pump leaves the tail in is asked for twice the tail,
/// at most this much (only a privileged host gets more than
/// `/proc/sys/fs/pipe-max-size`, 1 MiB by default).
const MAX_SKIM_PIPE: usize = 16 * 1024 * 1024;
#[cfg(unix)]
/// Skimming needs the pipe to hold the tail and this much more, so the
/// writer goes on while the tail waits in the pipe.
const SKIM_ROOM: usize = 64 * 1024;
#[cfg(unix)]
/// Bytes left in a pipe with no wake-up for this long are read.
const PARKED_RECHECK: Duration = Duration::from_millis(10);
#[cfg(unix)]
/// At most this much is read after the drain ran out.
const FINAL_DRAIN_MAX: usize = 8 * 1024 * 1024;

#[cfg(unix)]
/// The marked processes a run left running. One in the middle of an exec
/// (`cmd &` just before the shell exits) has no readable mark yet: look again
/// shortly (up to 100 ms) rather than miss it.
async fn leftovers(mark: &str, first_pid: i32) -> Vec<i32> {
  for _ in 0..20 {
    let left = marks::running_marked_since(mark, first_pid);
    if !left.is_empty() || !marks::marked_or_pending_since(mark, first_pid) {
      return left;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  marks::running_marked_since(mark, first_pid)
}

#[cfg(unix)]
/// A request to a pump to read everything its pipe holds at that moment
/// (non-blocking, bounded like the final drain) and say so. The exit of a
/// process whose pipe stays open elsewhere has no EOF to wait for; this is
/// the barrier that still delivers what it wrote before it exited.
#[derive(Default)]
pub(crate) struct Catchup {
  asked_gen: std::sync::atomic::AtomicU64,
  answered_gen: std::sync::atomic::AtomicU64,
  asked: tokio::sync::Notify,
  answered: tokio::sync::Notify,
}

#[cfg(unix)]
impl Catchup {
  /// The pump's side: `drain` what the pipe holds, then tell the askers.
  /// (The generation is read before the drain: a request made during it is
  /// answered only by the next round.)
  fn answer(&self, drain: impl FnOnce() -> u64) -> u64 {
    let g = self.asked_gen.load(Ordering::SeqCst);
    let n = drain();
    self.answered_gen.store(g, Ordering::SeqCst);
    self.answered.notify_waiters();
    n
  }

  fn ask(&self) -> u64 {
    let g = self.asked_gen.fetch_add(1, Ordering::SeqCst) + 1;
    // a stored permit if the pump is busy: it sees the request next time round
    self.asked.notify_one();
    g
  }

  async fn answered_from(&self, g: u64) {
    loop {
      let n = self.answered.notified();
      tokio::pin!(n);
      n.as_mut().enable();
      if self.answered_gen.load(Ordering::SeqCst) >= g {
        return;
      }
      n.await;
    }
  }
}

#[cfg(unix)]
/// The read end of a child's output pipe (or a PTY's master): non-blocking,
/// watched by the runtime.
pub(crate) type PipeIn = AsyncFd<OwnedFd>;

#[cfg(unix)]
fn watch_pipe(fd: std::io::Result<OwnedFd>) -> std::io::Result<PipeIn> {
  let fd = fd?;
  // tokio hands the descriptor over in blocking mode
  platform::set_nonblocking(fd.as_raw_fd())?;
  // SAFETY: an OwnedFd keeps its descriptor open and unchanged while owned
  unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
    .map_err(|e| e.into())
}

#[cfg(unix)]
/// Read a stream into its sink until EOF, or until `stop` (then what the pipe
/// holds is drained, bounded). A PTY's master is pumped the same way (the
/// manager shares it with the writer, hence `Borrow`): its end of stream is
/// EIO once every slave is closed, which ends the pump as EOF does.
///
/// Skimming: once a sink that keeps only a head and a tail has its head full
/// (`tail_window() == Some(keep)`), only the last `keep` bytes of the rest can
/// matter. The pipe is enlarged past `keep`, the last `keep` bytes stay in it,
/// and whatever it holds beyond them is spliced to /dev/null, counted but
/// never copied to user space. At EOF, at the drain and at a catch-up the
/// bytes left in the pipe are read into the sink as usual.
pub(crate) async fn pump<S>(
  io: impl std::borrow::Borrow<PipeIn>,
  mut sink: S,
  stop: CancellationToken,
  catchup: Arc<Catchup>,
) -> (S, u64)
where
  S: OutputSink,
{
  let io = io.borrow();
  let fd = io.get_ref().as_raw_fd();
  // not zeroed: `read_into` fills the spare capacity (zeroing it was most of
  // a short run's instructions: docs/PERFORMANCE.md)
  let mut buf: Vec<u8> = Vec::with_capacity(READ_BUF);
  let mut total = 0u64;
  let mut grown = false;
  // skimming is decided once, when the head is full
  let mut may_skim = sink.keeps_head_tail() && platform::ZERO_COPY_DISCARD;
  let mut skim: Option<usize> = None;
  let mut park = Parking::default();
  let mut recheck = std::pin::pin!(tokio::time::sleep(PARKED_RECHECK));
  // the sink's tick timer, likewise armed once and moved only when the sink
  // wants it sooner: a timer made per loop (per read) cost a timer-wheel
  // insertion and removal per read, and with another timer pending (a
  // run's timeout) a string stream ran 1.57 GB/s instead of 1.90
  // (docs/PERFORMANCE.md, streaming item 7)
  let mut ticker = std::pin::pin!(tokio::time::sleep(Duration::ZERO));
  let mut tick_at: Option<Instant> = None;
  loop {
    if let Some(keep) = may_skim.then(|| sink.tail_window()).flatten() {
      may_skim = false;
      grown = true;
      skim = start_skim(fd, keep);
    }
    rearm_tick(sink.next_tick(), ticker.as_mut(), &mut tick_at);
    tokio::select! {
      biased;
      r = io.readable() => {
        let Ok(mut g) = r else { break };
        park.parked = false;
        if let Some(keep) = skim {
          match skim_pipe(fd, keep, &mut sink) {
            Ok(n) => total += n,
            Err(_) => skim = None,
          }
          if skim.is_some() && !g.ready().is_read_closed() {
            // the pipe holds the tail so far: it waits there until more
            // comes, the writers close, or the run ends
            g.clear_ready();
            park.park(recheck.as_mut());
            continue;
          }
          // the writers are gone: the rest is read, to EOF
        }
        match g.try_io(|_| read_to_sink(fd, &mut buf, &mut sink)) {
          // would block: the readiness was cleared
          Err(_) => continue,
          Ok(Ok(0)) => break,
          Ok(Ok(n)) => {
            total += n as u64;
            if !grown && n >= 65536 {
              grown = true;
              grow_pipe(fd);
            }
            if !ready_or_stopped(&mut sink, &stop).await {
              total += final_drain(fd, &mut buf, &mut sink, skim);
              break;
            }
          }
          Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
          Ok(Err(_)) => break,
        }
      },
      _ = &mut recheck, if park.armed => {
        let Recheck::Read { stop_skimming } = park.fired(recheck.as_mut()) else {
          continue;
        };
        if stop_skimming {
          skim = None;
        }
        total += final_drain(fd, &mut buf, &mut sink, None);
      }
      _ = &mut ticker, if tick_at.is_some() => {
        tick_at = None;
        sink.tick();
      }
      _ = catchup.asked.notified() => {
        total += catchup.answer(|| final_drain(fd, &mut buf, &mut sink, skim));
        park.parked = false;
      }
      _ = stop.cancelled() => {
        total += final_drain(fd, &mut buf, &mut sink, skim);
        break;
      }
    }
  }
  sink.finish().await;
  (sink, total)
}

#[cfg(unix)]
/// Wait until `sink` can take more; false when `stop` fired first.
async fn ready_or_stopped<S: OutputSink>(sink: &mut S, stop: &CancellationToken) -> bool {
  tokio::select! {
    _ = sink.ready() => true,
    _ = stop.cancelled() => false,
  }
}

#[cfg(unix)]
/// Skim a stream past its kept head when its pipe can be enlarged to hold a
/// tail of `keep` bytes with room to spare: `Some(keep)`, else `None`.
fn start_skim(fd: i32, keep: usize) -> Option<usize> {
  grow_pipe_for_tail(fd, keep)
    .is_some_and(|size| size >= keep + SKIM_ROOM)
    .then_some(keep)
}

#[cfg(unix)]
/// Move the sink's tick timer to `next` only when the sink wants it sooner:
/// armed sooner, it fires then, and the sink is asked again.
fn rearm_tick(
  next: Option<Instant>,
  ticker: std::pin::Pin<&mut tokio::time::Sleep>,
  tick_at: &mut Option<Instant>,
) {
  match next {
    None => *tick_at = None,
    Some(t) if tick_at.is_some_and(|a| a <= t) => {}
    Some(t) => {
      ticker.reset(t);
      *tick_at = Some(t);
    }
  }
}

/// A skimming pump's bytes left in the pipe on purpose (`parked`). The
/// recheck timer is armed once and re-armed only when it fires (not one
/// timer per wake-up): the pipe is read if no wake-up came during a whole
/// period.
#[cfg(unix)]
#[derive(Default)]
struct Parking {
  parked: bool,
  stalls: u8,
  armed: bool,
  wakes: u64,
  wakes_at_arm: u64,
}

/// What to do when the recheck timer fires.
#[cfg(unix)]
enum Recheck {
  /// Nothing to read now.
  Wait,
  /// Read what the pipe holds; the second time, stop skimming this stream.
  Read { stop_skimming: bool },
}

#[cfg(unix)]
impl Parking {
  /// Bytes stay in the pipe until more come: arm the timer if it is not.
  fn park(&mut self, recheck: std::pin::Pin<&mut tokio::time::Sleep>) {
    self.parked = true;
    self.wakes += 1;
    if !self.armed {
      self.armed = true;
      self.wakes_at_arm = self.wakes;
      recheck.reset(Instant::now() + PARKED_RECHECK);
    }
  }

  /// The timer fired.
  fn fired(&mut self, recheck: std::pin::Pin<&mut tokio::time::Sleep>) -> Recheck {
    if self.parked && self.wakes != self.wakes_at_arm {
      // the writer is moving: look again a period later
      self.wakes_at_arm = self.wakes;
      recheck.reset(Instant::now() + PARKED_RECHECK);
      return Recheck::Wait;
    }
    self.armed = false;
    if !self.parked {
      return Recheck::Wait;
    }
    // no wake-up while bytes wait in the pipe: a writer that paused (the
    // bytes are read, as without skimming), or a writer blocked on a pipe
    // whose slots are full of small buffers before it holds `keep` bytes
    // (spliced writes), or a kernel that wakes an edge-triggered reader
    // only on an empty pipe (5.5 to 5.13). The second time, this stream is
    // read as any other.
    self.parked = false;
    self.stalls += 1;
    Recheck::Read {
      stop_skimming: self.stalls >= 2,
    }
  }
}

#[cfg(unix)]
fn grow_pipe(fd: i32) {
  // best effort: a larger pipe means fewer wake-ups for a heavy writer
  platform::grow_pipe(fd, HEAVY_PIPE_SIZE);
}

#[cfg(unix)]
/// Enlarge a pipe to hold a tail of `keep` bytes with room to spare (twice
/// `keep`, at least [`HEAVY_PIPE_SIZE`]); an unprivileged host that may not
/// go that far gets the heavy size. Returns the pipe's size.
fn grow_pipe_for_tail(fd: i32, keep: usize) -> Option<usize> {
  let want = keep
    .saturating_mul(2)
    .clamp(HEAVY_PIPE_SIZE as usize, MAX_SKIM_PIPE);
  match platform::grow_pipe(fd, want as i32) {
    Some(size) if size >= want => Some(size),
    _ => platform::grow_pipe(fd, HEAVY_PIPE_SIZE),
  }
}

#[cfg(unix)]
/// Drop, in the kernel, what pipe `fd` holds beyond its last `keep` bytes;
/// the sink counts them. Returns how many were dropped.
fn skim_pipe<S: OutputSink>(fd: i32, keep: usize, sink: &mut S) -> std::io::Result<u64> {
  let held = platform::pipe_pending(fd)?;
  if held <= keep {
    return Ok(0);
  }
  let n = match platform::discard_from_pipe(fd, held - keep) {
    Ok(n) => n as u64,
    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
    Err(e) => return Err(e),
  };
  sink.skipped(n);
  Ok(n)
}

#[cfg(unix)]
/// Read what is in the pipe right now (non-blocking), bounded; a skimming
/// pump (`skim`: the tail it keeps) first drops what cannot be in the tail.
fn final_drain<S: OutputSink>(
  fd: i32,
  buf: &mut Vec<u8>,
  sink: &mut S,
  skim: Option<usize>,
) -> u64 {
  let mut dropped = 0;
  if let Some(keep) = skim {
    dropped = skim_pipe(fd, keep, sink).unwrap_or(0);
  }
  let mut got = 0usize;
  while got < FINAL_DRAIN_MAX {
    match read_to_sink(fd, buf, sink) {
      Ok(0) | Err(_) => break,
      Ok(n) => got += n,
    }
  }
  dropped + got as u64
}

#[cfg(unix)]
/// One read of `fd` into `sink`: in place when it lends room, else into
/// `buf` and then `write`. Returns the count (`Ok(0)`: end of file).
fn read_to_sink<S: OutputSink>(fd: i32, buf: &mut Vec<u8>, sink: &mut S) -> std::io::Result<usize> {
  if let Some(room) = sink.lend().filter(|r| !r.is_empty()) {
    let n = platform::read_uninit(fd, room)?;
    if n > 0 {
      sink.filled(n);
    }
    return Ok(n);
  }
  buf.clear();
  let n = platform::read_into(fd, buf)?;
  if n > 0 {
    sink.write(&buf[..n]);
  }
  Ok(n)
}

#[cfg(unix)]
#[cfg(test)]
mod tests {
  use super::*;
  use crate::buffer::HeadTailBuffer;

  fn sh(script: &str) -> ProcessSpec {
    ProcessSpec::new("/bin/sh").arg("-c").arg(script)
  }

  async fn capture(spec: &ProcessSpec, policy: &RunPolicy) -> (RunOutcome, String, String) {
    let f = run(
      spec,
      policy,
      HeadTailBuffer::new(1 << 20),
      HeadTailBuffer::new(1 << 20),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
    (
      f.outcome,
      String::from_utf8(f.stdout.render().bytes).unwrap(),
      String::from_utf8(f.stderr.render().bytes).unwrap(),
    )
  }

  #[tokio::test]
  async fn captures_both_streams_and_exit_code() {
    let (o, out, err) = capture(&sh("echo out; echo err >&2; exit 3"), &RunPolicy::default()).await;
    assert_eq!(out, "out\n");
    assert_eq!(err, "err\n");
    assert_eq!(o.exit_code, 3);
    assert_eq!(o.stdout_bytes, 4);
    assert!(o.error.is_none());
  }

  #[tokio::test]
  async fn timeout_kills_group_and_keeps_output() {
    let policy = RunPolicy {
      timeout: Some(Duration::from_millis(300)),
      ..Default::default()
    };
    let (o, out, _) = capture(&sh("echo before; sleep 10"), &policy).await;
    assert!(o.timed_out);
    assert_eq!(o.exit_code, 124);
    assert_eq!(out, "before\n");
    assert_eq!(
      o.error.unwrap().message(),
      "exec: Process timeout after 0.3s (TIMEOUT)"
    );
    assert!(o.duration < Duration::from_secs(5));
  }

  #[tokio::test]
  async fn sigterm_ignoring_child_is_killed() {
    let policy = RunPolicy {
      timeout: Some(Duration::from_millis(200)),
      kill_grace: Duration::from_millis(200),
      ..Default::default()
    };
    let (o, out, _) = capture(
      &sh("trap '' TERM; echo ready; sleep 10 & wait; sleep 10"),
      &policy,
    )
    .await;
    assert!(o.timed_out);
    assert_eq!(o.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(out, "ready\n");
    assert!(o.duration < Duration::from_secs(5));
  }

  #[tokio::test]
  async fn grandchild_holding_pipe_does_not_delay() {
    // the grandchild escapes the group, so only the drain bounds the wait
    let spec = sh("echo hi; setsid sleep 5 & exit 0");
    let (o, out, _) = capture(&spec, &RunPolicy::default()).await;
    assert_eq!(out, "hi\n");
    assert_eq!(o.exit_code, 0);
    assert!(o.duration < Duration::from_secs(2), "{:?}", o.duration);
  }

  #[tokio::test]
  async fn a_cancel_before_the_start_spawns_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ran");
    let cancel = CancellationToken::new();
    cancel.cancel();
    for _ in 0..20 {
      let spec = sh(&format!("touch '{}'", file.display()));
      let r = run(&spec, &RunPolicy::default(), Discard, Discard, &cancel).await;
      assert_eq!(r.err().map(|e| e.code), Some(ErrorCode::ECANCELED));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!file.exists());
  }

  #[tokio::test]
  async fn cancel_reports_canceled() {
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
      tokio::time::sleep(Duration::from_millis(100)).await;
      c2.cancel();
    });
    let f = run(
      &sh("sleep 10"),
      &RunPolicy::default(),
      Discard,
      Discard,
      &cancel,
    )
    .await
    .unwrap();
    assert!(f.outcome.canceled);
    assert_eq!(f.outcome.exit_code, 128 + 15);
    assert_eq!(f.outcome.error.unwrap().code, ErrorCode::ECANCELED);
  }

  #[tokio::test]
  async fn stdin_bytes_and_null() {
    let mut spec = ProcessSpec::new("/bin/cat");
    spec.stdin = StdinMode::Bytes(b"piped in".to_vec());
    let (_, out, _) = capture(&spec, &RunPolicy::default()).await;
    assert_eq!(out, "piped in");
    let (o, out, _) = capture(&sh("read x; echo \"got:$x:$?\""), &RunPolicy::default()).await;
    assert_eq!(out, "got::1\n");
    assert_eq!(o.exit_code, 0);
  }

  #[tokio::test]
  async fn large_output_is_bounded() {
    let f = run(
      &sh("head -c 50000000 /dev/zero"),
      &RunPolicy::default(),
      HeadTailBuffer::new(1000),
      Discard,
      &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(f.outcome.stdout_bytes, 50_000_000);
    assert_eq!(f.stdout.total(), 50_000_000);
    assert!(f.stdout.held() <= 1000);
  }

  #[test]
  fn durations() {
    assert_eq!(format_duration(Duration::from_millis(1000)), "1s");
    assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
    assert_eq!(format_duration(Duration::from_millis(250)), "0.25s");
  }
}

#[cfg(test)]
mod limit_tests {
  use super::*;
  use crate::process::limits::Limits;

  async fn run_limited(script: &str, limits: Limits) -> RunOutcome {
    let mut spec = ProcessSpec::new("/bin/bash").arg("-c").arg(script);
    spec.limits = limits;
    let policy = RunPolicy {
      timeout: Some(Duration::from_secs(20)),
      kill_grace: Duration::from_millis(200),
      ..Default::default()
    };
    run(&spec, &policy, Discard, Discard, &CancellationToken::new())
      .await
      .unwrap()
      .outcome
  }

  #[tokio::test]
  async fn memory_limit_stops_the_tree() {
    let o = run_limited(
      "python3 -c 'x = bytearray(400 * 1024 * 1024); import time; time.sleep(10)'",
      Limits {
        memory_bytes: Some(128 << 20),
        ..Default::default()
      },
    )
    .await;
    let e = o.error.expect("limit error");
    assert_eq!(
      e.message(),
      "exec: memory limit of 128 MiB exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn process_limit_stops_a_fork_bomb() {
    // exponential but bounded (depth 10: at most ~2000 processes), so that a
    // failing watchdog cannot take the machine down
    let mark_probe = "b() { [ $1 -lt 10 ] && { b $(($1+1)) & b $(($1+1)) & }; sleep 5; }; b 0";
    let o = run_limited(
      mark_probe,
      Limits {
        max_processes: Some(30),
        ..Default::default()
      },
    )
    .await;
    let e = o.error.expect("limit error");
    assert_eq!(e.message(), "exec: process limit of 30 exceeded (ELIMIT)");
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn cpu_limit_is_reported() {
    let o = run_limited(
      "exec python3 -c 'while True: pass'",
      Limits {
        cpu_seconds: Some(1),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGXCPU"));
    assert_eq!(
      o.error.unwrap().message(),
      "exec: CPU time limit of 1s exceeded (ELIMIT)"
    );
  }

  #[tokio::test]
  async fn memory_limit_holds_for_a_scrubbed_environment() {
    // `env -i`: the mark is gone, the process is still in the tree
    let o = run_limited(
      "env -i python3 -c 'x = b\"a\" * (300 << 20); import time; time.sleep(10)'",
      Limits {
        memory_bytes: Some(50 << 20),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(
      o.error.expect("limit error").message(),
      "exec: memory limit of 50 MiB exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn cpu_hard_limit_is_reported_when_sigxcpu_is_ignored() {
    let o = run_limited(
      "trap '' XCPU; exec python3 -c 'import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass'",
      Limits {
        cpu_seconds: Some(1),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(
      o.error.expect("limit error").message(),
      "exec: CPU time limit of 1s exceeded (ELIMIT)"
    );
  }

  #[tokio::test]
  async fn the_fork_path_refuses_what_the_fast_path_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("no-shebang");
    std::fs::write(&script, "echo ran-by-sh\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (limits, die) in [
      (Limits::default(), false),
      (
        Limits {
          cpu_seconds: Some(10),
          ..Default::default()
        },
        false,
      ),
      (Limits::default(), true),
    ] {
      let mut spec = ProcessSpec::new(&script);
      spec.limits = limits;
      spec.die_with_parent = die;
      let e = Execution::spawn(&spec, 0, Discard, Discard)
        .err()
        .expect("ENOEXEC");
      assert_eq!(e.code, ErrorCode::ESPAWN);
      assert!(
        e.what.ends_with("Exec format error (os error 8)"),
        "{}",
        e.what
      );
    }
  }

  #[tokio::test]
  async fn file_size_limit_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
      "exec head -c 10000000 /dev/zero > {}/big",
      dir.path().display()
    );
    let o = run_limited(
      &script,
      Limits {
        file_size_bytes: Some(1 << 20),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGXFSZ"));
    assert_eq!(
      o.error.unwrap().message(),
      "exec: file size limit of 1 MiB exceeded (ELIMIT)"
    );
    assert_eq!(
      std::fs::metadata(dir.path().join("big")).unwrap().len(),
      1 << 20
    );
  }

  #[tokio::test]
  async fn open_files_limit_applies() {
    let o = run_limited(
      "ulimit -n",
      Limits {
        open_files: Some(64),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.exit_code, 0);
  }
}

#[cfg(test)]
mod bomb_test {
  use super::*;
  use crate::process::limits::Limits;

  /// The classic, unbounded fork bomb: only where the kernel can cap it (a
  /// pids cgroup), never with the watchdog alone.
  #[tokio::test]
  async fn classic_fork_bomb_is_capped_and_stopped() {
    let mut probe = crate::process::cgroup::TreeCgroups::create("probe-bomb-test", Some(1), None);
    if !probe.has_pids() {
      eprintln!("no writable pids cgroup here: the unbounded bomb is not run");
      return;
    }
    probe.remove();
    let mut spec = ProcessSpec::new("/bin/bash")
      .arg("-c")
      .arg(":(){ :|:& };:; sleep 10");
    spec.limits = Limits {
      max_processes: Some(50),
      ..Default::default()
    };
    let policy = RunPolicy {
      timeout: Some(Duration::from_secs(20)),
      ..Default::default()
    };
    let o = run(&spec, &policy, Discard, Discard, &CancellationToken::new())
      .await
      .unwrap()
      .outcome;
    assert_eq!(
      o.error.unwrap().message(),
      "exec: process limit of 50 exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(10), "{:?}", o.duration);
  }
}

#[cfg(test)]
mod capture_tests {
  //! The capture of big output: what a head+tail sink keeps, whether the
  //! pump skims (drops in the kernel) or reads every byte, must be the same,
  //! with the exact omitted count.
  use super::*;
  use crate::buffer::HeadTailBuffer;

  /// A head+tail buffer that counts what the pump skimmed.
  struct Counting(HeadTailBuffer, u64);
  impl OutputSink for Counting {
    fn write(&mut self, data: &[u8]) {
      self.0.push(data);
    }
    fn keeps_head_tail(&self) -> bool {
      true
    }
    fn tail_window(&self) -> Option<usize> {
      self.0.tail_window()
    }
    fn skipped(&mut self, n: u64) {
      self.1 += n;
      self.0.skip(n);
    }
  }

  /// The same buffer behind a sink that does not declare head+tail: every
  /// byte is read, as for streaming.
  struct ReadAll(HeadTailBuffer);
  impl OutputSink for ReadAll {
    fn write(&mut self, data: &[u8]) {
      self.0.push(data);
    }
  }

  /// A sink that lends room for the reads, as a streaming sink filling
  /// chunks does: rooms of `room` bytes at most, every other one declined
  /// (those reads go through `write`), and what is left of a room lent again.
  struct Lending {
    got: Vec<u8>,
    open: Vec<u8>,
    room: usize,
    lends: u64,
    writes: u64,
  }
  impl Lending {
    fn new(room: usize) -> Self {
      Lending {
        got: Vec::new(),
        open: Vec::with_capacity(room),
        room,
        lends: 0,
        writes: 0,
      }
    }
  }
  impl OutputSink for Lending {
    fn write(&mut self, data: &[u8]) {
      self.writes += 1;
      self.got.extend_from_slice(&self.open);
      self.open.clear();
      self.got.extend_from_slice(data);
    }
    fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
      if (self.lends + self.writes).is_multiple_of(2) && self.open.is_empty() {
        return None;
      }
      let left = self.room - self.open.len();
      Some(&mut self.open.spare_capacity_mut()[..left])
    }
    fn filled(&mut self, n: usize) {
      self.lends += 1;
      assert!(
        self.open.len() + n <= self.room,
        "a read fills at most the room lent"
      );
      // SAFETY: the pump wrote the first `n` bytes of the room
      unsafe { self.open.set_len(self.open.len() + n) };
      if self.open.len() == self.room {
        self.got.extend_from_slice(&self.open);
        self.open.clear();
      }
    }
    async fn finish(&mut self) {
      self.got.extend_from_slice(&self.open);
      self.open.clear();
    }
  }

  #[tokio::test]
  async fn a_sink_that_lends_room_gets_every_byte_in_order() {
    let all = seq(1, 300_000);
    let f = run(
      &bash("seq 1 300000; seq 1 300000 >&2"),
      &RunPolicy::default(),
      Lending::new(4093),
      Lending::new(65536),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(f.outcome.exit_code, 0);
    for (sink, count) in [
      (&f.stdout, f.outcome.stdout_bytes),
      (&f.stderr, f.outcome.stderr_bytes),
    ] {
      assert_eq!(count, all.len() as u64);
      assert!(sink.got == all, "bytes lost or out of order");
      assert!(sink.lends > 0 && sink.writes > 0, "both ways were taken");
    }
  }

  /// What `seq from to` prints.
  fn seq(from: u64, to: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for i in from..=to {
      v.extend_from_slice(format!("{i}\n").as_bytes());
    }
    v
  }

  /// What a buffer of `cap` keeps of `all`.
  fn expected(all: &[u8], cap: usize) -> String {
    let h = cap / 2;
    let t = cap - h;
    let omitted = all.len() - cap;
    format!(
      "{}\n[Output truncated] {omitted} bytes omitted\n{}",
      String::from_utf8_lossy(&all[..h]),
      String::from_utf8_lossy(&all[all.len() - t..])
    )
  }

  fn bash(script: &str) -> ProcessSpec {
    ProcessSpec::new("/bin/bash").arg("-c").arg(script)
  }

  async fn both(
    spec: &ProcessSpec,
    policy: &RunPolicy,
    cap: usize,
  ) -> Finished<Counting, Counting> {
    run(
      spec,
      policy,
      Counting(HeadTailBuffer::new(cap), 0),
      Counting(HeadTailBuffer::new(cap), 0),
      &CancellationToken::new(),
    )
    .await
    .unwrap()
  }

  #[tokio::test]
  async fn skimmed_output_keeps_exact_head_tail_and_count_on_both_streams() {
    // 14.9 MB each, far more than the pipe holds
    let all = seq(1, 2_000_000);
    let f = both(
      &bash("seq 1 2000000; seq 1 2000000 >&2"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    assert_eq!(f.outcome.exit_code, 0);
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(f.outcome.stderr_bytes, all.len() as u64);
    for (name, s) in [("stdout", &f.stdout), ("stderr", &f.stderr)] {
      let r = s.0.render();
      assert_eq!(r.omitted, (all.len() - (1 << 20)) as u64, "{name}");
      assert_eq!(
        String::from_utf8(r.bytes).unwrap(),
        expected(&all, 1 << 20),
        "{name}"
      );
      if platform::ZERO_COPY_DISCARD {
        // most of it never reached user space
        assert!(s.1 > all.len() as u64 / 2, "{name}: skimmed {}", s.1);
      }
    }
  }

  #[tokio::test]
  async fn skimming_and_reading_every_byte_keep_the_same() {
    for cap in [1000usize, 64 << 10, 3 << 20] {
      let spec = bash("seq 1 1500000");
      let a = both(&spec, &RunPolicy::default(), cap).await;
      let b = run(
        &spec,
        &RunPolicy::default(),
        ReadAll(HeadTailBuffer::new(cap)),
        Discard,
        &CancellationToken::new(),
      )
      .await
      .unwrap();
      assert_eq!(a.outcome.stdout_bytes, b.outcome.stdout_bytes, "cap {cap}");
      // a sink that does not declare head+tail was handed every byte
      assert_eq!(b.stdout.0.total(), b.outcome.stdout_bytes, "cap {cap}");
      assert_eq!(b.outcome.stdout_bytes, seq(1, 1_500_000).len() as u64);
      assert_eq!(a.stdout.0.render(), b.stdout.0.render(), "cap {cap}");
      assert_eq!(
        String::from_utf8(a.stdout.0.render().bytes).unwrap(),
        expected(&seq(1, 1_500_000), cap),
        "cap {cap}"
      );
    }
  }

  #[tokio::test]
  async fn a_writer_that_pauses_with_the_tail_in_the_pipe_loses_nothing() {
    // the pauses leave bytes in the pipe with no wake-up: read at the recheck
    let f = both(
      &bash("seq 1 300000; sleep 0.2; seq 300001 600000; sleep 0.2; seq 600001 700000"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    let all = seq(1, 700_000);
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(
      String::from_utf8(f.stdout.0.render().bytes).unwrap(),
      expected(&all, 1 << 20)
    );
  }

  #[tokio::test]
  async fn a_grandchild_holding_the_pipe_neither_hangs_nor_loses_the_tail() {
    // the tail waits in the pipe; the shell exits; the pipe stays open
    let f = both(
      &bash("seq 1 400000; setsid sleep 5 & exit 0"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    let all = seq(1, 400_000);
    assert!(
      f.outcome.duration < Duration::from_secs(2),
      "{:?}",
      f.outcome.duration
    );
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(
      String::from_utf8(f.stdout.0.render().bytes).unwrap(),
      expected(&all, 1 << 20)
    );
  }

  #[tokio::test]
  async fn a_timeout_mid_stream_keeps_an_exact_count_and_a_contiguous_tail() {
    let policy = RunPolicy {
      timeout: Some(Duration::from_millis(400)),
      kill_grace: Duration::from_millis(100),
      ..Default::default()
    };
    let cap = 1 << 20;
    let f = both(&bash("seq 1 1000000000"), &policy, cap).await;
    assert!(f.outcome.timed_out);
    let total = f.outcome.stdout_bytes;
    assert_eq!(f.stdout.0.total(), total);
    assert!(total > 4 * cap as u64, "only {total} bytes in 400 ms");
    let r = f.stdout.0.render();
    let text = String::from_utf8(r.bytes).unwrap();
    let (head, tail) = text
      .split_once(&HeadTailBuffer::marker(r.omitted))
      .expect("marker");
    assert_eq!(head.as_bytes(), &seq(1, 200_000)[..cap / 2]);
    assert_eq!(tail.len(), cap - cap / 2);
    // the tail is what seq printed last: its last complete number ends at
    // the byte offset the count says
    let lines: Vec<&str> = tail.split('\n').collect();
    let last_full: u64 = lines[lines.len() - 2].parse().unwrap();
    let partial = lines[lines.len() - 1];
    let offset_after = |n: u64| -> u64 {
      // bytes `seq 1 n` prints
      let mut len = 0;
      let mut lo = 1u64;
      let mut digits = 1u64;
      while lo <= n {
        let hi = (lo * 10 - 1).min(n);
        len += (hi - lo + 1) * (digits + 1);
        lo *= 10;
        digits += 1;
      }
      len
    };
    assert_eq!(offset_after(last_full) + partial.len() as u64, total);
    for w in lines[1..lines.len() - 1].windows(2) {
      assert_eq!(
        w[0].parse::<u64>().unwrap() + 1,
        w[1].parse::<u64>().unwrap()
      );
    }
  }
}
