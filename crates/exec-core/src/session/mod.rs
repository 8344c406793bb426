//! Persistent sessions: one long-lived interpreter (Python) or shell (bash)
//! whose state survives from one execution to the next.
//!
//! The control channel is a socketpair given to the worker as its stdin. The
//! worker moves it off the way of the code it runs (the Python driver dups it
//! to a private close-on-exec fd and puts /dev/null on fd 0; bash keeps reading
//! commands from it but runs each one with `</dev/null`). Requests and
//! completion messages travel on it, never in stdout/stderr, so nothing a
//! program prints can fake or hide a completion. Why a socketpair on fd 0:
//! `std::process::Command` places it with `posix_spawn` file actions (no
//! `pre_exec`, no fork), it is created close-on-exec so no concurrent spawn in
//! another thread can inherit it, it needs no path in the filesystem, and one
//! descriptor carries both directions.
//!
//! Completion is a message on that channel; output read from the pipes before
//! the message (and everything already in the pipes when it arrives, drained
//! without blocking) belongs to the execution that ends.

pub mod python;
mod shared;
pub mod shell;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::platform::{group_members, unread_by_peer};
use crate::process::registry;
use crate::process::spec::EnvSpec;
use crate::process::supervise::OutputSink;

pub use python::{CellResult, PythonException, PythonOptions, PythonSession};
pub use shell::{CommandResult, ShellOptions, ShellSession};

/// How an execution in a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
  /// Python: the cell raised nothing. Shell: the command exited 0.
  Ok,
  /// Python: the cell raised. Shell: the command exited non-zero.
  Error,
  /// `interrupt()` stopped it; the session's state is kept.
  Interrupted,
  /// The timeout ran out (see `state_lost`).
  Timeout,
  /// The interpreter or shell itself ended (the next execution starts a new one).
  Died,
}

impl SessionStatus {
  pub fn as_str(&self) -> &'static str {
    match self {
      SessionStatus::Ok => "ok",
      SessionStatus::Error => "error",
      SessionStatus::Interrupted => "interrupted",
      SessionStatus::Timeout => "timeout",
      SessionStatus::Died => "died",
    }
  }
}

/// Per-execution settings.
#[derive(Debug, Clone)]
pub struct ExecuteOptions {
  /// Interrupt after this long (`None`: never).
  pub timeout: Option<Duration>,
  /// Bytes kept per stream (head + tail).
  pub max_output: usize,
}

impl Default for ExecuteOptions {
  fn default() -> Self {
    ExecuteOptions {
      timeout: Some(Duration::from_secs(30)),
      max_output: 1024 * 1024,
    }
  }
}

/// A stream of one execution: captured head+tail, and forwarded to a sink
/// (a streaming callback, or [`crate::process::supervise::Discard`]).
pub struct Capture<S: OutputSink> {
  pub buf: HeadTailBuffer,
  pub sink: S,
}

impl<S: OutputSink> Capture<S> {
  pub fn new(cap: usize, sink: S) -> Self {
    Capture {
      buf: HeadTailBuffer::new(cap),
      sink,
    }
  }
}

impl<S: OutputSink> OutputSink for Capture<S> {
  fn write(&mut self, data: &[u8]) {
    self.buf.push(data);
    self.sink.write(data);
  }
  fn next_tick(&self) -> Option<Instant> {
    self.sink.next_tick()
  }
  fn tick(&mut self) {
    self.sink.tick()
  }
  async fn ready(&mut self) {
    self.sink.ready().await
  }
  async fn finish(&mut self) {
    self.sink.finish().await
  }
}

/// What the worker runs.
pub(crate) struct WorkerSpec {
  pub program: PathBuf,
  pub args: Vec<OsString>,
  pub cwd: PathBuf,
  pub env: EnvSpec,
  /// The byte that ends a control message (`\n` for JSON lines, NUL for bash).
  pub separator: u8,
  /// Opt-in resource limits of the worker's whole tree.
  pub limits: crate::limits::Limits,
  /// PR_SET_PDEATHSIG for the worker.
  pub die_with_parent: bool,
  /// Opt-in OS sandbox of the worker and every cell (see [`crate::sandbox`]).
  pub sandbox: Option<crate::sandbox::SandboxPolicy>,
}

/// What interrupted [`Worker::next_event`].
#[derive(Debug)]
pub(crate) enum Event {
  /// A complete control message (separator removed). Output that preceded it
  /// has been read.
  Message(Vec<u8>),
  /// The worker exited; its remaining output has been read (bounded drain).
  Exited(ExitStatus),
  /// The deadline passed.
  Deadline,
  /// The cancel token fired (the session is closing).
  Canceled,
}

/// The long-lived process of a session.
pub(crate) struct Worker {
  /// The worker's exit status once it is reaped: a task owns the child and
  /// waits for it, so the exit is seen when it happens, also between
  /// executions (see [`Worker::exit_watch`]).
  exited: watch::Receiver<Option<ExitStatus>>,
  pub pid: i32,
  stdout: Option<ChildStdout>,
  stderr: Option<ChildStderr>,
  ctl: tokio::net::UnixStream,
  ctl_open: bool,
  inbox: Vec<u8>,
  separator: u8,
  exit: Option<ExitStatus>,
  /// The worker's tree: its `EXEC_NATIVE_RUN_ID` and limits.
  guard: Arc<crate::limits::LimitGuard>,
  /// Set by the watchdog when the tree passed a limit (and was killed).
  limit_hit: Arc<Mutex<Option<ExecError>>>,
  watcher: Option<tokio::task::JoinHandle<()>>,
}

const READ_BUF: usize = 64 * 1024;
/// After the worker exited: how long a grandchild holding the pipes may delay us.
const EXIT_DRAIN: Duration = Duration::from_millis(100);

impl Worker {
  /// Start the worker in its own process group, with the control socket as
  /// its stdin. Must be called within a tokio runtime.
  pub fn spawn(spec: &WorkerSpec, owner: u64) -> Result<Worker, ExecError> {
    spec.env.validate()?;
    let shown = spec.program.display().to_string();
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| {
      ExecError::new(
        ErrorCode::ESPAWN,
        format!("cannot create the control channel: {e}"),
      )
    })?;
    let mut cmd = std::process::Command::new(&spec.program);
    cmd.args(&spec.args);
    cmd.current_dir(&spec.cwd);
    if !spec.env.is_plain_inherit() {
      cmd.env_clear();
      cmd.envs(spec.env.build());
    }
    let setup = crate::process::ChildSetup {
      owner,
      limits: &spec.limits,
      die_with_parent: spec.die_with_parent,
      sandbox: spec.sandbox.as_ref(),
      cwd: &spec.cwd,
    };
    let mut prepared = setup.prepare()?;
    // every descendant inherits the mark, so it can be found if it leaves the group
    cmd.env(crate::process::marks::MARK_VAR, &prepared.mark);
    // limits are set in the child before exec (a real fork instead of
    // posix_spawn, only when asked for)
    if let Some(plan) = prepared.plan.take() {
      // the child execs itself (no execvp /bin/sh fallback): the last step
      let mut env: Vec<(OsString, OsString)> = if spec.env.is_plain_inherit() {
        std::env::vars_os().collect()
      } else {
        spec.env.build()
      };
      env.retain(|(k, _)| k != crate::process::marks::MARK_VAR);
      env.push((
        crate::process::marks::MARK_VAR.into(),
        prepared.mark.clone().into(),
      ));
      let mut argv = vec![spec.program.clone().into_os_string()];
      argv.extend(spec.args.iter().cloned());
      let image =
        crate::process::spec::ExecImage::new(&spec.program, &argv, &env, Some(&spec.cwd))?;
      unsafe {
        cmd.pre_exec(move || {
          plan.apply()?;
          Err(image.exec())
        });
      }
    }
    cmd.process_group(0);
    cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    let mut cmd = tokio::process::Command::from(cmd);
    let spawned = setup.spawn(prepared, move || {
      let child = cmd.spawn().map_err(|e| ExecError::from_spawn(&shown, &e));
      // closes our copy of the worker's end: EOF then means the worker is gone
      drop(cmd);
      let child = child?;
      let pid = child.id().unwrap_or(0) as i32;
      Ok((child, pid))
    })?;
    let (mut child, pid, anchor) = (spawned.child, spawned.pid, spawned.anchor);
    let guard = Arc::new(spawned.guard);
    let limit_hit = Arc::new(Mutex::new(None));
    // the watchdog runs for the worker's whole life (also between executions:
    // what a cell left running counts too); the kill makes the worker exit,
    // which the running execution sees
    let watcher = guard.limits().needs_watchdog().then(|| {
      let guard = guard.clone();
      let hit = limit_hit.clone();
      tokio::spawn(async move {
        let e = guard.watch().await;
        *hit.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        guard.kill_tree(pid);
      })
    });
    let ctl = ours
      .set_nonblocking(true)
      .and_then(|_| tokio::net::UnixStream::from_std(ours));
    let ctl = match ctl {
      Ok(c) => c,
      Err(e) => {
        crate::process::ProcessTree::new(pid, guard.mark()).kill(true);
        registry::unregister(pid);
        return Err(ExecError::new(
          ErrorCode::ESPAWN,
          format!("cannot watch the control channel: {e}"),
        ));
      }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let (tx, exited) = watch::channel(None);
    tokio::spawn(async move {
      let _anchor = anchor;
      let st = child
        .wait()
        .await
        .unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(0x7f00));
      let _ = tx.send(Some(st));
    });
    Ok(Worker {
      pid,
      stdout,
      stderr,
      exited,
      ctl,
      ctl_open: true,
      inbox: Vec::new(),
      separator: spec.separator,
      exit: None,
      guard,
      limit_hit,
      watcher,
    })
  }

  /// Why the worker ended, if a resource limit ended it: the watchdog's
  /// finding, or SIGXCPU/SIGXFSZ (also a shell's 128+N) under the limits.
  pub fn limit_error(&self, st: Option<ExitStatus>) -> Option<ExecError> {
    if let Some(e) = self
      .limit_hit
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .clone()
    {
      return Some(e);
    }
    let (code, sig) = crate::process::supervise::decode_status(st?);
    self.guard.explain(sig.as_deref(), code)
  }

  /// Whether the tree is over a watched limit now (the watchdog's finding,
  /// or one look): then it is killed, and [`Self::limit_error`] says which.
  pub fn over_limit_now(&mut self) -> bool {
    let Some(e) = self.limit_error(None).or_else(|| self.guard.check()) else {
      return false;
    };
    *self.limit_hit.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    self.guard.kill_tree(self.pid);
    true
  }

  /// What a shell's exit code of a command (128+N for a signal death) means
  /// under the limits.
  pub fn explain_exit_code(&self, code: i32) -> Option<ExecError> {
    self.guard.explain(None, code)
  }

  /// A tree already over a watched limit (memory, processes) when it became
  /// ready: it is killed and the error returned, so that a session does not
  /// start only to die at the next look of the watchdog.
  pub async fn over_limit_at_start(&mut self, shown: &str) -> Option<ExecError> {
    // the watchdog may have been first (and killed it already)
    let e = self.limit_error(None).or_else(|| self.guard.check())?;
    self.guard.kill_tree(self.pid);
    self.kill().await;
    Some(could_not_start(shown, &e))
  }

  /// The error of a worker that ended before it was ready. ELIMIT naming the
  /// limit when one is the cause (the watchdog's finding, SIGXCPU/SIGXFSZ,
  /// or what the program said: EMFILE, EAGAIN or EFBIG under the matching
  /// limit); ESPAWN otherwise.
  pub fn startup_error(&self, shown: &str, st: ExitStatus, stderr: &HeadTailBuffer) -> ExecError {
    let (code, _) = crate::process::supervise::decode_status(st);
    let (text, _) = rendered_text(stderr);
    let text = text.trim();
    if let Some(e) = self.limit_error(Some(st)) {
      return could_not_start(shown, &e);
    }
    if let Some(e) = self.guard.limits().explain_output(text) {
      return ExecError::new(
        ErrorCode::ELIMIT,
        format!("{shown} could not start: {}: {text}", e.what),
      );
    }
    ExecError::new(
      ErrorCode::ESPAWN,
      format!("{shown} exited during startup (exit code {code}): {text}"),
    )
  }

  /// A receiver that sees the worker's exit status when it is reaped.
  pub fn exit_watch(&self) -> watch::Receiver<Option<ExitStatus>> {
    self.exited.clone()
  }

  /// Whether the worker has exited (and been reaped).
  pub fn has_exited(&mut self) -> bool {
    if self.exit.is_none() {
      self.exit = *self.exited.borrow();
    }
    self.exit.is_some()
  }

  /// Bytes sent on the control channel that the worker has not read yet
  /// (`None` where the platform cannot tell).
  pub fn unread_by_worker(&self) -> Option<usize> {
    unread_by_peer(self.ctl.as_raw_fd())
  }

  /// Send a few bytes on the control channel without waiting (false: they
  /// did not fit, or the channel is closed).
  pub fn try_send(&self, bytes: &[u8]) -> bool {
    self.ctl.try_write(bytes).is_ok_and(|n| n == bytes.len())
  }

  /// Take what the worker has written on the control channel by now into the
  /// inbox; whether a complete message is there.
  pub fn poll_messages(&mut self) -> bool {
    let mut buf = [0u8; 4096];
    while self.ctl_open {
      match self.ctl.try_read(&mut buf) {
        Ok(0) => self.ctl_open = false,
        Ok(n) => self.inbox.extend_from_slice(&buf[..n]),
        Err(_) => break,
      }
    }
    self.inbox.contains(&self.separator)
  }

  /// Send a request on the control channel.
  pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
    self.ctl.write_all(bytes).await
  }

  fn take_message(&mut self) -> Option<Vec<u8>> {
    let at = self.inbox.iter().position(|&b| b == self.separator)?;
    let mut msg: Vec<u8> = self.inbox.drain(..=at).collect();
    msg.pop();
    Some(msg)
  }

  /// Read what is in the output pipes right now, without waiting.
  fn drain_now<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    let mut buf = vec![0u8; READ_BUF];
    if let Some(s) = &self.stdout {
      read_available(s.as_raw_fd(), &mut buf, out);
    }
    if let Some(s) = &self.stderr {
      read_available(s.as_raw_fd(), &mut buf, err);
    }
  }

  /// Pump output into `out`/`err` until a control message arrives, the worker
  /// exits, `deadline` passes or `cancel` fires.
  pub async fn next_event<O: OutputSink, E: OutputSink>(
    &mut self,
    out: &mut O,
    err: &mut E,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
  ) -> Event {
    if let Some(st) = self.exit {
      return Event::Exited(st);
    }
    if let Some(m) = self.take_message() {
      self.drain_now(out, err);
      return Event::Message(m);
    }
    let mut obuf = vec![0u8; READ_BUF];
    let mut ebuf = vec![0u8; READ_BUF];
    let mut cbuf = vec![0u8; 4096];
    loop {
      let tick = match (out.next_tick(), err.next_tick()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
      };
      let out_open = self.stdout.is_some();
      let err_open = self.stderr.is_some();
      tokio::select! {
        biased;
        r = self.ctl.read(&mut cbuf), if self.ctl_open => match r {
          Ok(0) | Err(_) => self.ctl_open = false,
          Ok(n) => {
            self.inbox.extend_from_slice(&cbuf[..n]);
            if let Some(m) = self.take_message() {
              self.drain_now(out, err);
              return Event::Message(m);
            }
          }
        },
        r = read_opt(&mut self.stdout, &mut obuf), if out_open => match r {
          Ok(0) | Err(_) => self.stdout = None,
          Ok(n) => {
            out.write(&obuf[..n]);
            out.ready().await;
          }
        },
        r = read_opt(&mut self.stderr, &mut ebuf), if err_open => match r {
          Ok(0) | Err(_) => self.stderr = None,
          Ok(n) => {
            err.write(&ebuf[..n]);
            err.ready().await;
          }
        },
        st = wait_exited(&mut self.exited) => {
          self.exit = Some(st);
          self.drain_after_exit(out, err).await;
          return Event::Exited(st);
        }
        _ = sleep_until_opt(deadline) => return Event::Deadline,
        _ = cancel.cancelled() => return Event::Canceled,
        _ = sleep_until_opt(tick), if tick.is_some() => {
          out.tick();
          err.tick();
        }
      }
    }
  }

  /// Read the pipes to EOF, but no longer than [`EXIT_DRAIN`].
  async fn drain_after_exit<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    let until = Instant::now() + EXIT_DRAIN;
    let mut buf = vec![0u8; READ_BUF];
    drain_pipe(self.stdout.take(), out, until, &mut buf).await;
    drain_pipe(self.stderr.take(), err, until, &mut buf).await;
  }

  /// Signal the worker's whole group.
  pub fn signal(&self, sig: Signal) -> bool {
    registry::signal_group(self.pid, sig)
  }

  /// Wait for the worker's exit, at most `limit`.
  pub async fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
    if let Some(st) = self.exit {
      return Some(st);
    }
    match tokio::time::timeout(limit, wait_exited(&mut self.exited)).await {
      Ok(st) => {
        self.exit = Some(st);
        Some(st)
      }
      Err(_) => None,
    }
  }

  /// End the worker: close the control channel (a polite EOF), wait up to
  /// `grace`, then SIGKILL the whole group (and whatever is left in it).
  pub async fn shutdown(mut self, grace: Duration) -> Option<ExitStatus> {
    let _ = self.ctl.shutdown().await;
    self.ctl_open = false;
    let st = if grace.is_zero() {
      None
    } else {
      self.wait_exit(grace).await
    };
    self.kill().await.or(st)
  }

  /// SIGKILL the whole group now and reap the worker.
  pub async fn kill(&mut self) -> Option<ExitStatus> {
    // the worker's children first, while it is alive to reap them (killed
    // together, they would be orphans left for init to reap)
    if self.exit.is_none() && self.kill_others() > 0 {
      tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // then the tree: the worker itself, what left the group (setsid, double
    // fork), the group
    let leader_live = !self.has_exited();
    self.tree().kill(leader_live);
    let st = self.wait_exit(Duration::from_secs(5)).await;
    // SIGKILL is asynchronous: return once the group's processes are dead
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until
      && (!live_members(self.pid).is_empty()
        || !crate::process::marks::running_marked(self.guard.mark()).is_empty())
    {
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
    registry::unregister(self.pid);
    st
  }

  /// The worker's tree (its group, led by the worker, and its mark).
  fn tree(&self) -> crate::process::ProcessTree<'_> {
    crate::process::ProcessTree::new(self.pid, self.guard.mark())
  }

  /// SIGKILL the processes of the worker's group other than the worker itself.
  pub fn kill_others(&self) -> usize {
    let mut n = 0;
    for pid in group_members(self.pid) {
      if pid == self.pid {
        continue;
      }
      // it may die, and come to the host as an orphan, before it is seen
      crate::process::reaper::note(pid);
      if crate::platform::signal(pid, libc::SIGKILL) {
        n += 1;
      }
    }
    n
  }
}

impl Drop for Worker {
  fn drop(&mut self) {
    if let Some(w) = self.watcher.take() {
      w.abort();
    }
    let leader_live = !self.has_exited();
    self.tree().kill(leader_live);
    registry::unregister(self.pid);
  }
}

async fn drain_pipe<R, S>(pipe: Option<R>, sink: &mut S, until: Instant, buf: &mut [u8])
where
  R: tokio::io::AsyncRead + AsRawFd + Unpin,
  S: OutputSink,
{
  let Some(mut pipe) = pipe else { return };
  loop {
    match tokio::time::timeout_at(until, pipe.read(buf)).await {
      Ok(Ok(n)) if n > 0 => sink.write(&buf[..n]),
      Ok(_) => break,
      Err(_) => {
        read_available(pipe.as_raw_fd(), buf, sink);
        break;
      }
    }
  }
}

/// The exit status, once the task that owns the child has reaped it.
async fn wait_exited(rx: &mut watch::Receiver<Option<ExitStatus>>) -> ExitStatus {
  match rx.wait_for(|s| s.is_some()).await {
    Ok(st) => (*st).unwrap_or(std::os::unix::process::ExitStatusExt::from_raw(0x7f00)),
    // the task is gone without a status (the runtime is shutting down)
    Err(_) => std::os::unix::process::ExitStatusExt::from_raw(0x7f00),
  }
}

async fn read_opt<R: tokio::io::AsyncRead + Unpin>(
  r: &mut Option<R>,
  buf: &mut [u8],
) -> std::io::Result<usize> {
  match r {
    Some(r) => r.read(buf).await,
    None => std::future::pending().await,
  }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
  match deadline {
    Some(d) => tokio::time::sleep_until(d).await,
    None => std::future::pending().await,
  }
}

/// Read what a non-blocking pipe holds right now (tokio's pipes are
/// non-blocking), bounded so a writer that never stops cannot hold us.
fn read_available<S: OutputSink + ?Sized>(fd: i32, buf: &mut [u8], sink: &mut S) {
  let mut got = 0usize;
  while got < 16 * 1024 * 1024 {
    let Some(n) = crate::platform::read_now(fd, buf) else {
      break;
    };
    sink.write(&buf[..n]);
    got += n;
  }
}

/// Members of group `pgid` that are not zombies (a killed orphan stays a
/// zombie until init reaps it, which some container inits do lazily).
pub fn live_members(pgid: i32) -> Vec<i32> {
  if !cfg!(target_os = "linux") {
    // no /proc/<pid>/stat to tell a zombie: the group's own answer
    return if registry::group_alive(pgid) {
      vec![pgid]
    } else {
      Vec::new()
    };
  }
  group_members(pgid)
    .into_iter()
    .filter(|&p| crate::process::marks::stat(p).is_some_and(|st| crate::process::marks::alive(&st)))
    .collect()
}

/// The session's queue and who may interrupt what. Shared between the
/// execution that owns the worker and `interrupt()` callers, which must not
/// wait for the execution.
///
/// The queue is joined synchronously (in call order: `execute` called twice in
/// a row runs in that order, whatever order the runtime polls the futures in)
/// and handed on from one [`Turn`] to the next.
///
/// Every execution has a number (its generation). `interrupt()` targets the
/// oldest execution whose caller has not taken its result yet (its
/// [`Ticket`] is alive): the one the caller sees running. A SIGINT goes only
/// to the worker running that very execution; one asked for before it started
/// is held until it starts; one that comes when it is over does nothing. So an
/// interrupt never lands in the next execution.
#[derive(Default, Clone)]
pub(crate) struct Control {
  state: Arc<Mutex<ControlState>>,
}

#[derive(Default)]
struct ControlState {
  /// A turn holds the queue.
  busy: bool,
  waiters: VecDeque<oneshot::Sender<()>>,
  next_gen: u64,
  /// Executions whose caller has not taken the result, in call order, and
  /// whether each is over.
  live: VecDeque<(u64, bool)>,
  pgid: i32,
  /// The execution whose request the worker has (0: none, or an init request).
  running: u64,
  /// The worker confirmed it started that request.
  started: bool,
  /// An interrupt held for this execution until its request starts (0: none).
  pending: u64,
  /// The running request got a SIGINT from `interrupt()`.
  interrupted: bool,
}

impl ControlState {
  fn mark_over(&mut self, gen: u64) {
    if let Some(e) = self.live.iter_mut().find(|e| e.0 == gen) {
      e.1 = true;
    }
    if self.pending == gen {
      self.pending = 0;
    }
  }
}

/// A place in the queue; [`Turn::ready`] waits for it. Dropping a turn (held or
/// not) hands the queue on, and ends its execution for `interrupt()`.
pub(crate) struct Turn {
  state: Arc<Mutex<ControlState>>,
  rx: Option<oneshot::Receiver<()>>,
  held: bool,
  /// The execution's generation (0 for `reset`, which is not interrupted).
  gen: u64,
}

impl Turn {
  /// Wait until every earlier turn is done (or `cancel` fires: false).
  pub async fn ready(&mut self, cancel: &CancellationToken) -> bool {
    if let Some(rx) = self.rx.as_mut() {
      tokio::select! {
        r = rx => {
          self.rx = None;
          self.held = r.is_ok();
        }
        _ = cancel.cancelled() => return false,
      }
    }
    self.held
  }

  /// The execution's generation.
  pub fn gen(&self) -> u64 {
    self.gen
  }
}

impl Drop for Turn {
  fn drop(&mut self) {
    if self.gen != 0 {
      let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
      s.mark_over(self.gen);
    }
    let held = self.held
      || self.rx.as_mut().is_some_and(|rx| {
        // the queue may have been handed to us in the meantime
        rx.close();
        rx.try_recv().is_ok()
      });
    if held {
      hand_on(&self.state);
    }
  }
}

/// An execution as its caller sees it: `interrupt()` may target it until the
/// ticket is dropped, which the caller does once it has the result (the
/// JavaScript binding: when the promise settles, on the JavaScript thread).
pub struct Ticket {
  state: Arc<Mutex<ControlState>>,
  gen: u64,
}

impl Drop for Ticket {
  fn drop(&mut self) {
    let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
    s.live.retain(|e| e.0 != self.gen);
    if s.pending == self.gen {
      s.pending = 0;
    }
  }
}

fn hand_on(state: &Mutex<ControlState>) {
  let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
  while let Some(tx) = s.waiters.pop_front() {
    if tx.send(()).is_ok() {
      return;
    }
  }
  s.busy = false;
}

impl Control {
  fn lock(&self) -> std::sync::MutexGuard<'_, ControlState> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Join the queue now (`reset`: not a target of `interrupt()`).
  pub fn join(&self) -> Turn {
    let mut s = self.lock();
    self.join_locked(&mut s, 0)
  }

  /// Join the queue now with an execution, which `interrupt()` targets until
  /// the ticket is dropped.
  pub fn join_execution(&self) -> (Turn, Ticket) {
    let mut s = self.lock();
    s.next_gen += 1;
    let gen = s.next_gen;
    s.live.push_back((gen, false));
    let ticket = Ticket {
      state: self.state.clone(),
      gen,
    };
    (self.join_locked(&mut s, gen), ticket)
  }

  fn join_locked(&self, s: &mut ControlState, gen: u64) -> Turn {
    if !s.busy {
      s.busy = true;
      return Turn {
        state: self.state.clone(),
        rx: None,
        held: true,
        gen,
      };
    }
    let (tx, rx) = oneshot::channel();
    s.waiters.push_back(tx);
    Turn {
      state: self.state.clone(),
      rx: Some(rx),
      held: false,
      gen,
    }
  }

  /// A request of execution `gen` (0: an init request) was sent to the
  /// worker of group `pgid`.
  pub fn begin(&self, pgid: i32, gen: u64) {
    let mut s = self.lock();
    s.pgid = pgid;
    s.running = gen;
    s.started = false;
    s.interrupted = false;
  }

  /// The worker confirmed it runs the request: deliver an interrupt held for it.
  pub fn started(&self) {
    let mut s = self.lock();
    s.started = true;
    if s.running != 0 && s.pending == s.running {
      s.pending = 0;
      s.interrupted = true;
      registry::signal_group(s.pgid, Signal::SIGINT);
    }
  }

  /// SIGINT the execution the caller sees running (the oldest whose result
  /// it has not taken); one that has not started gets it when it starts.
  /// False when there is none, or it is over.
  pub fn interrupt(&self) -> bool {
    let mut s = self.lock();
    let Some(&(gen, over)) = s.live.front() else {
      return false;
    };
    if over {
      return false;
    }
    if s.running == gen && s.started {
      s.interrupted = true;
      registry::signal_group(s.pgid, Signal::SIGINT);
    } else {
      s.pending = gen;
    }
    true
  }

  /// The request is over: whether `interrupt()` hit it, whether the worker
  /// had started it. An interrupt held for a request that never started stays
  /// held (the execution may send it again to a new worker).
  pub fn end(&self) -> (bool, bool) {
    let mut s = self.lock();
    let was = (s.interrupted, s.started);
    s.running = 0;
    s.started = false;
    s.interrupted = false;
    was
  }
}

/// The ways a session call can fail before or around an execution.
pub(crate) fn closed_error() -> ExecError {
  ExecError::new(ErrorCode::ECANCELED, "the session is closed")
}

/// Convert the captured streams.
pub(crate) fn rendered_text(buf: &HeadTailBuffer) -> (String, bool) {
  let r = buf.render();
  (String::from_utf8_lossy(&r.bytes).into_owned(), r.truncated)
}

/// `python3 could not start: memory limit of 1 MiB exceeded` (ELIMIT).
fn could_not_start(shown: &str, e: &ExecError) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("{shown} could not start: {}", e.what),
  )
}

/// `exit code`, `signal` of a worker that ended.
pub(crate) fn exit_info(st: Option<ExitStatus>) -> (Option<i32>, Option<String>) {
  match st {
    Some(st) => {
      let (code, sig) = crate::process::supervise::decode_status(st);
      (Some(code), sig)
    }
    None => (None, None),
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn status_names() {
    assert_eq!(SessionStatus::Interrupted.as_str(), "interrupted");
    assert_eq!(SessionStatus::Died.as_str(), "died");
  }

  #[cfg(any(target_os = "linux", target_os = "macos"))]
  #[test]
  fn lists_group_members() {
    let mut child = std::process::Command::new("/bin/sh")
      .arg("-c")
      .arg("sleep 5 & sleep 5 & wait")
      .process_group(0)
      .spawn()
      .unwrap();
    let pgid = child.id() as i32;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut members = Vec::new();
    while std::time::Instant::now() < deadline {
      members = group_members(pgid);
      if members.len() >= 3 {
        break;
      }
      std::thread::sleep(Duration::from_millis(10));
    }
    registry::signal_group(pgid, Signal::SIGKILL);
    let _ = child.wait();
    assert!(members.contains(&pgid), "{members:?}");
    assert_eq!(members.len(), 3, "{members:?}");
  }
}

#[cfg(test)]
mod tests_sessions;
