//! The worker: the long-lived interpreter or shell process of a session.
//!
//! It is spawned through the one spawn sequence ([`crate::process::ChildSetup`],
//! which adds the run's mark, the limits and the sandbox) in its own process
//! group, with the control socket as its stdin, and followed to its end by
//! the one supervisor, an [`Execution`] ([`Execution::on_pipes`]), in a task
//! of its own: its pumps read the output pipes for the worker's whole life
//! (into relays the request that runs takes from: `output.rs`), its exit
//! phase reaps it when it exits, also between executions, and watches its
//! limits (what a cell left running counts too), its drain bounds the wait
//! for a grandchild holding the pipes. Every way of ending it (kill,
//! shutdown, drop) kills the whole tree through
//! [`crate::process::ProcessTree`]: the tree is the session's, so the
//! execution does not sweep it ([`Execution::follow_owned`]).

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::rendered_text;
use super::channel::{unknown_status, wait_exited, Channel, Event, Exit};
use super::output::{relay, Output};
use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::platform::group_members;
use crate::process::limits::LimitGuard;
use crate::process::spec::check_cwd;
use crate::process::supervise::{decode_status, Execution, OutputSink};
use crate::process::{
  registry, ChildCommand, ChildEnv, ChildSetup, Leader, ProcessOptions, ProcessTree, RunOptions,
};

/// After the worker exited: how long a grandchild holding the pipes may delay us.
const EXIT_DRAIN: Duration = Duration::from_millis(100);

/// What the worker runs.
pub(crate) struct WorkerSpec {
  pub program: PathBuf,
  pub args: Vec<OsString>,
  /// The byte that ends a control message (`\n` for JSON lines, NUL for bash).
  pub separator: u8,
  /// Its cwd (resolved when the session started), environment, limits of
  /// its whole tree, parent-death signal and OS sandbox (of the worker and
  /// every cell: see [`crate::process::sandbox`]).
  pub process: ProcessOptions,
}

/// How an interrupt reaches a running request: SIGINT to the worker's group.
#[derive(Clone, Copy)]
pub(crate) struct Interrupt {
  pgid: i32,
}

impl Interrupt {
  /// Send it; false when the group is gone.
  pub fn send(&self) -> bool {
    ProcessTree::group(self.pgid).signal(Signal::SIGINT, true)
  }
}

/// The engine's last resort (a session dropped with its worker running):
/// SIGKILL the worker's group.
pub(crate) fn kill_now(pid: i32) {
  ProcessTree::group(pid).kill(true);
}

/// The long-lived process of a session.
pub(crate) struct Worker {
  pub pid: i32,
  channel: Channel,
  /// How the worker ended, once the task that follows it has seen its exit
  /// (and drained its output).
  exited: watch::Receiver<Option<Exit>>,
  exit: Option<ExitStatus>,
  /// The worker was reaped: its pid is no longer its own.
  reaped: Arc<AtomicBool>,
  /// The worker's tree: its `EXEC_NATIVE_RUN_ID`, limits and watchdog's
  /// finding (shared with its execution).
  guard: Arc<LimitGuard>,
  /// A watched limit passed, as [`Worker::over_limit_now`] found (and killed
  /// the tree for).
  limit_hit: Option<ExecError>,
}

impl Worker {
  /// Start the worker in its own process group, with the control socket as
  /// its stdin. Must be called within a tokio runtime.
  pub fn spawn(spec: &WorkerSpec, owner: u64) -> Result<Worker, ExecError> {
    spec.process.env.validate()?;
    // checked again at each (re)start: the cwd may have been removed since
    // the session started, and the spawn's ENOENT would blame the program
    check_cwd(spec.process.cwd())?;
    let channel_error = |what: &str, e: std::io::Error| {
      ExecError::new(
        ErrorCode::ESPAWN,
        format!("cannot {what} the control channel: {e}"),
      )
    };
    let (ours, theirs) = UnixStream::pair().map_err(|e| channel_error("create", e))?;
    let ctl = ours
      .set_nonblocking(true)
      .and_then(|_| tokio::net::UnixStream::from_std(ours))
      .map_err(|e| channel_error("watch", e))?;
    let setup = ChildSetup {
      owner,
      limits: &spec.process.limits,
      die_with_parent: spec.process.die_with_parent,
      sandbox: spec.process.sandbox.as_ref(),
      cwd: spec.process.cwd(),
    };
    let cmd = ChildCommand {
      program: &spec.program,
      argv0: None,
      args: &spec.args,
      env: ChildEnv::Spec(&spec.process.env),
      cwd: Some(spec.process.cwd()),
    };
    // the control socket as stdin (our copy of its end is closed once the
    // worker is spawned: EOF then means the worker is gone), piped output
    let stdio = [
      Stdio::from(OwnedFd::from(theirs)),
      Stdio::piped(),
      Stdio::piped(),
    ];
    let spawned = setup.spawn(&cmd, Leader::Group, stdio)?;
    let pid = spawned.pid;
    let ((out, out_rx), (err, err_rx)) = (relay(), relay());
    let exec = Execution::on_pipes(spawned, owner, out, err, &RunOptions::untimed())?;
    let guard = exec.guard().clone();
    let output = Output::new([out_rx, err_rx], exec.catchups());
    let (exited, reaped) = follow(exec);
    Ok(Worker {
      pid,
      channel: Channel::new(ctl, spec.separator, output),
      exited,
      exit: None,
      reaped,
      guard,
      limit_hit: None,
    })
  }

  /// Why the worker ended, if a resource limit ended it: the watchdog's
  /// finding, or (with the status `st` its execution saw) SIGXCPU/SIGXFSZ
  /// (also a shell's 128+N) under the limits.
  pub fn limit_error(&self, st: Option<ExitStatus>) -> Option<ExecError> {
    if let Some(e) = self.limit_hit.clone().or_else(|| self.guard.finding()) {
      return Some(e);
    }
    st?;
    self.exited.borrow().as_ref().and_then(|x| x.limit.clone())
  }

  /// Whether the tree is over a watched limit now (the watchdog's finding,
  /// or one look): then it is killed, and [`Self::limit_error`] says which.
  pub fn over_limit_now(&mut self) -> bool {
    let Some(e) = self.limit_error(None).or_else(|| self.guard.check()) else {
      return false;
    };
    self.limit_hit = Some(e);
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
    let (code, _) = decode_status(st);
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

  /// A receiver that sees how the worker ended, once its execution saw it.
  pub fn exit_watch(&self) -> watch::Receiver<Option<Exit>> {
    self.exited.clone()
  }

  /// Whether the worker has exited (reaped, its output drained).
  pub fn has_exited(&mut self) -> bool {
    if self.exit.is_none() {
      self.exit = self.exited.borrow().as_ref().map(|x| x.status);
    }
    self.exit.is_some()
  }

  /// Bytes sent on the control channel that the worker has not read yet
  /// (`None` where the platform cannot tell).
  pub fn unread_by_worker(&self) -> Option<usize> {
    self.channel.unread_by_peer()
  }

  /// Send a few bytes on the control channel without waiting (false: they
  /// did not fit, or the channel is closed).
  pub fn try_send(&self, bytes: &[u8]) -> bool {
    self.channel.try_send(bytes)
  }

  /// Take what the worker has written on the control channel by now; whether
  /// a complete message is there.
  pub fn poll_messages(&mut self) -> bool {
    self.channel.poll_messages()
  }

  /// Send a request on the control channel.
  pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
    self.channel.send(bytes).await
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
    let event = self
      .channel
      .next_event(out, err, &mut self.exited, deadline, cancel)
      .await;
    if let Event::Exited(st) = event {
      self.exit = Some(st);
    }
    event
  }

  /// Signal the worker's whole group.
  pub fn signal(&self, sig: Signal) -> bool {
    ProcessTree::group(self.pid).signal(sig, true)
  }

  /// How an interrupt reaches this worker's running request.
  pub fn interrupter(&self) -> Interrupt {
    Interrupt { pgid: self.pid }
  }

  /// Interrupt the running request: SIGINT to the worker's whole group (a
  /// cell's subprocesses get it too).
  pub fn interrupt(&self) -> bool {
    self.interrupter().send()
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
    self.channel.close().await;
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
    if !self.reaped() && self.kill_others() {
      tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // then the tree: the worker itself, what left the group (setsid, double
    // fork), the group
    self.tree().kill(!self.reaped());
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

  /// Whether the worker was reaped (its pid may be another process's).
  fn reaped(&self) -> bool {
    self.reaped.load(Ordering::SeqCst)
  }

  /// The worker's tree (its group, led by the worker, and its mark).
  fn tree(&self) -> ProcessTree<'_> {
    ProcessTree::new(self.pid, self.guard.mark())
  }

  /// SIGKILL the processes of the worker's group other than the worker
  /// itself; whether there was any.
  pub fn kill_others(&self) -> bool {
    let others: Vec<i32> = group_members(self.pid)
      .into_iter()
      .filter(|&p| p != self.pid)
      .collect();
    // each recorded for the orphan reaper first: it may die, and come to
    // the host as an orphan, before it is seen
    ProcessTree::processes(&others).kill(true)
  }
}

impl Drop for Worker {
  fn drop(&mut self) {
    self.tree().kill(!self.reaped());
    registry::unregister(self.pid);
  }
}

/// Follow the worker's execution to its end in a task of its own (the exit
/// phase with the limit watchdog, then the bounded drain): the receiver sees
/// how it ended, the flag that it was reaped (told before the drain).
fn follow(
  exec: Execution<super::output::Relay, super::output::Relay>,
) -> (watch::Receiver<Option<Exit>>, Arc<AtomicBool>) {
  let (tx, exited) = watch::channel(None);
  let reaped = Arc::new(AtomicBool::new(false));
  let flag = reaped.clone();
  tokio::spawn(async move {
    // nothing cancels a worker's execution: its session kills the tree
    let never = CancellationToken::new();
    let reaped = || flag.store(true, Ordering::SeqCst);
    let (st, finished) = exec.follow_owned(EXIT_DRAIN, &never, reaped).await;
    let _ = tx.send(Some(Exit {
      status: st.unwrap_or_else(unknown_status),
      limit: finished.outcome.error,
    }));
  });
  (exited, reaped)
}

/// `python3 could not start: memory limit of 1 MiB exceeded` (ELIMIT).
fn could_not_start(shown: &str, e: &ExecError) -> ExecError {
  ExecError::new(
    ErrorCode::ELIMIT,
    format!("{shown} could not start: {}", e.what),
  )
}

/// Members of group `pgid` that are not zombies (a killed orphan stays a
/// zombie until init reaps it, which some container inits do lazily).
pub(crate) fn live_members(pgid: i32) -> Vec<i32> {
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

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::process::CommandExt;

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
