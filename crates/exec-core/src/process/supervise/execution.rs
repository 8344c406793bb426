//! The [`Execution`]: a spawned child whose output is being pumped, and its
//! spawn (checks, [`crate::process::ChildSetup`] through `launch`, the pumps
//! and the stdin feed).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::io::AsyncWriteExt;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::launch::{self, LaunchedChild};
use super::pump::{watch_pipe, PipeIn, Pump};
use super::Catchup;
use super::{OutputSink, ProcessSpec};
use crate::error::{ErrorCode, ExecError};
use crate::process::child::{Child, StdinPipe};
use crate::process::limits::LimitGuard;
use crate::process::ProcessTree;

#[cfg(unix)]
/// The two output streams of a run (stdout, stderr).
pub(super) type Pumps<O, E> = (Pump<O>, Pump<E>);

#[cfg(unix)]
/// A spawned child whose output is being pumped: a pipe child
/// ([`Execution::spawn`]), a child on a terminal
/// ([`Execution::on_terminal`]) or a child spawned with its own stdin and
/// piped output (a session's worker: [`Execution::on_pipes`]), followed to
/// its end the same way ([`Execution::wait`]: the exit, a timeout, a cancel
/// or a limit, the tree's sweep, the bounded drain, the status decoded and
/// explained; a worker, whose tree its session ends, by
/// [`Execution::follow_owned`]).
pub struct Execution<O: OutputSink, E: OutputSink> {
  pub(super) child: Child,
  pub(super) pid: u32,
  pub(super) started: Instant,
  pub(super) stdin: Option<StdinPipe>,
  pub(super) input_task: Option<JoinHandle<()>>,
  /// `None` once handed out (by the drain, or to the caller).
  pub(super) pumps: Option<Pumps<O, E>>,
  pub(super) stop: CancellationToken,
  pub(super) mark: String,
  /// Shared with a session's `Worker`, which looks at its tree between
  /// requests; released at the exit when the execution alone holds it.
  pub(super) guard: Arc<LimitGuard>,
  pub(super) sandbox: Option<crate::process::sandbox::SandboxReport>,
  /// The spec's timeout and kill grace (its input was handed to the feed).
  pub(super) run: crate::process::RunOptions,
}

#[cfg(unix)]
/// The directory a spec runs in.
fn spec_cwd(spec: &ProcessSpec) -> Result<PathBuf, ExecError> {
  match &spec.process.cwd {
    Some(c) => Ok(c.clone()),
    None => std::env::current_dir().map_err(|e| {
      ExecError::new(
        ErrorCode::ENOENT,
        format!("the host's working directory is gone: {e}"),
      )
    }),
  }
}

/// The checks of a spec before anything is made for it.
#[cfg(unix)]
fn validate(spec: &ProcessSpec) -> Result<(), ExecError> {
  spec.process.env.validate()?;
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

/// With an input ([`RunOptions::input`](crate::process::RunOptions::input)),
/// the task that writes it to the child's stdin (taken from `stdin`) and
/// closes it.
#[cfg(unix)]
fn feed_input(input: Option<&Vec<u8>>, stdin: &mut Option<StdinPipe>) -> Option<JoinHandle<()>> {
  let bytes = input?;
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
    Self::spawn_pumping(spec, owner, stdout, stderr, false)
  }

  /// Start `spec` for a caller that awaits [`Execution::wait`] at once, in
  /// the task that calls this: the pumps are not tasks of their own but
  /// loops that `wait` polls beside the exit ([`Pump::Inline`]), so a short
  /// run's end wakes one task. (Any other use of the run, `wait_leaving_tree`
  /// among them, spawns them first.) Must be called within a tokio runtime.
  pub fn spawn_waited(
    spec: &ProcessSpec,
    owner: u64,
    stdout: O,
    stderr: E,
  ) -> Result<Self, ExecError> {
    Self::spawn_pumping(spec, owner, stdout, stderr, true)
  }

  fn spawn_pumping(
    spec: &ProcessSpec,
    owner: u64,
    stdout: O,
    stderr: E,
    inline: bool,
  ) -> Result<Self, ExecError> {
    crate::trace::at("rt.spawn");
    validate(spec)?;
    // the sandbox's writable cwd (the host's own is looked up only for it,
    // once)
    let cwd = match spec.process.sandbox {
      Some(_) => spec_cwd(spec)?,
      None => spec.process.cwd.clone().unwrap_or_default(),
    };
    let setup = crate::process::ChildSetup {
      owner,
      limits: &spec.process.limits,
      die_with_parent: spec.process.die_with_parent,
      sandbox: spec.process.sandbox.as_ref(),
      cwd: &cwd,
    };
    let started = Instant::now();
    let spawned = launch::spawn(&setup, spec)?;
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
    let pumps = if inline {
      (
        Pump::inline(out, stdout, &stop),
        Pump::inline(err, stderr, &stop),
      )
    } else {
      (
        Pump::start(out, stdout, &stop),
        Pump::start(err, stderr, &stop),
      )
    };

    let mut stdin = stdin;
    let input_task = feed_input(spec.run.input.as_ref(), &mut stdin);
    crate::trace::at("rt.started");
    Ok(Execution {
      child,
      pid,
      started,
      stdin,
      input_task,
      pumps: Some(pumps),
      stop,
      mark,
      guard: Arc::new(guard),
      sandbox,
      run: spec.run.without_input(),
    })
  }

  /// A child spawned on a terminal (`spawned`, by [`crate::process::ChildSetup::spawn`]),
  /// whose one output stream is the terminal's master, `master` (shared with
  /// the caller, who writes to it). It is read into `sink` until EIO (every
  /// slave closed), which ends it as EOF ends a pipe; the second stream gets
  /// nothing. `run`: its timeout and kill grace (an input is not fed: the
  /// caller writes to the terminal).
  pub fn on_terminal(
    spawned: crate::process::Spawned<tokio::process::Child>,
    master: Arc<PipeIn>,
    sink: O,
    none: E,
    run: &crate::process::RunOptions,
  ) -> Self {
    let stop = CancellationToken::new();
    let pumps = (Pump::start(master, sink, &stop), Pump::Idle(none));
    Self::of_spawned(spawned, pumps, stop, run)
  }

  /// A child spawned with piped stdout and stderr and a stdin of the
  /// caller's (by [`crate::process::ChildSetup::spawn`]: a session's worker,
  /// whose stdin is its control socket): both pipes are read into the
  /// sinks until EOF. `run`: its timeout and kill grace. A pipe that can't
  /// be watched kills the child (`owner`'s sweep): `EIO`.
  pub fn on_pipes(
    mut spawned: crate::process::Spawned<tokio::process::Child>,
    owner: u64,
    stdout: O,
    stderr: E,
    run: &crate::process::RunOptions,
  ) -> Result<Self, ExecError> {
    let out = spawned.child.stdout.take().map(|p| p.into_owned_fd());
    let err = spawned.child.stderr.take().map(|p| p.into_owned_fd());
    let not_piped = || std::io::Error::other("not piped");
    let watched = (
      watch_pipe(out.unwrap_or_else(|| Err(not_piped()))),
      watch_pipe(err.unwrap_or_else(|| Err(not_piped()))),
    );
    let (out, err) = match watched {
      (Ok(out), Ok(err)) => (out, err),
      (Err(e), _) | (_, Err(e)) => {
        let (pid, mark) = (spawned.pid as u32, spawned.mark.clone());
        let mut child = Child::Tokio(spawned.child);
        abandon(&mut child, pid, &mark, owner);
        return Err(ExecError::new(
          ErrorCode::EIO,
          format!("cannot watch the output pipes of process {pid}: {e}"),
        ));
      }
    };
    let stop = CancellationToken::new();
    let pumps = (
      Pump::start(out, stdout, &stop),
      Pump::start(err, stderr, &stop),
    );
    Ok(Self::of_spawned(spawned, pumps, stop, run))
  }

  /// The execution of a child spawned by the caller, its streams pumped.
  fn of_spawned(
    spawned: crate::process::Spawned<tokio::process::Child>,
    pumps: Pumps<O, E>,
    stop: CancellationToken,
    run: &crate::process::RunOptions,
  ) -> Self {
    Execution {
      child: Child::Tokio(spawned.child),
      pid: spawned.pid as u32,
      started: Instant::now(),
      stdin: None,
      input_task: None,
      pumps: Some(pumps),
      stop,
      mark: spawned.mark,
      guard: Arc::new(spawned.guard),
      sandbox: spawned.sandbox,
      run: run.without_input(),
    }
  }

  /// The limit guard of the child's tree (its limits, its mark, the
  /// watchdog's finding), shared.
  pub fn guard(&self) -> &Arc<LimitGuard> {
    &self.guard
  }

  /// The catch-up barriers of the two streams (`None`: nothing reads that
  /// stream): asked and answered, everything the pipe held when it was
  /// asked is in the sink (see [`Catchup`]).
  pub(crate) fn catchups(&self) -> [Option<Arc<Catchup>>; 2] {
    match &self.pumps {
      Some((out, err)) => [out.catchup_arc(), err.catchup_arc()],
      None => [None, None],
    }
  }

  pub fn pid(&self) -> u32 {
    self.pid
  }

  /// The value of `EXEC_NATIVE_RUN_ID` this run's processes carry.
  pub fn mark(&self) -> &str {
    &self.mark
  }

  /// The stdin pipe, with [`StdinMode::Piped`](super::StdinMode::Piped).
  pub fn take_stdin(&mut self) -> Option<StdinPipe> {
    self.stdin.take()
  }
}
