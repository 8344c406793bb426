//! Windows: the worker of a session (issue 25). The same interface as the
//! POSIX worker (`worker.rs`), with Windows' means:
//!
//! - the worker is a run of the Windows [`Execution`]: created suspended in
//!   a new process group, put in its own Job Object (`KILL_ON_JOB_CLOSE`,
//!   with its limits), then resumed, so what a cell starts is in the job
//!   too, and every way of ending the worker ends the job
//!   (`TerminateJobObject`); its pumps read its pipes into relays for its
//!   whole life and answer the catch-up barrier (`output.rs`), and the
//!   execution follows it to its end (`follow_owned`);
//! - the control channel is a loopback TCP connection (Windows cannot hand a
//!   socket over as stdin): the host listens on `127.0.0.1:0`, names the port
//!   and a random token in `EXEC_NATIVE_SESSION_CTL`, and takes the first
//!   connection that sends the token (see [`super::channel`]); stdin is NUL;
//! - an interrupt is the control message `{"op":"interrupt"}` (the driver's
//!   reader thread calls `_thread.interrupt_main()`), not a signal.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::capture::rendered_text;
use super::channel::{unknown_status, wait_exited, Channel, Event, Exit, Pending};
use super::output::{relay, Output, Relay};
use crate::buffer::HeadTailBuffer;
use crate::error::{ErrorCode, ExecError};
use crate::platform::Job;
use crate::process::registry::{self, TERMINATED_EXIT};
use crate::process::spec::check_cwd;
use crate::process::supervise::{
  decode_status, job_limit_error, Execution, OutputSink, ProcessSpec, StdinMode,
};
use crate::process::{ProcessOptions, RunOptions};

/// After the worker exited: how long a grandchild holding the pipes may delay us.
const EXIT_DRAIN: Duration = Duration::from_millis(100);

/// The variable that tells the driver where the control channel is.
pub(crate) const CTL_VAR: &str = "EXEC_NATIVE_SESSION_CTL";

/// What the worker runs.
pub(crate) struct WorkerSpec {
  pub program: PathBuf,
  pub args: Vec<OsString>,
  /// The byte that ends a control message (`\n` for JSON lines).
  pub separator: u8,
  /// Its cwd (resolved when the session started), environment and the
  /// limits of its whole tree (the job's). `die_with_parent` needs nothing
  /// more on Windows (the job ends with the host); a sandbox is not
  /// available there: `ESANDBOX` (fail closed).
  pub process: ProcessOptions,
}

/// How an interrupt reaches a running request: the control message, on a
/// clone of the channel's socket (written only while a request runs, when
/// nothing else is written on it).
#[derive(Clone)]
pub(crate) struct Interrupt(Arc<Mutex<Option<std::net::TcpStream>>>);

impl Interrupt {
  /// Send it; false when the channel is not there (or did not take it).
  pub fn send(&self) -> bool {
    let mut g = self.0.lock().unwrap_or_else(|p| p.into_inner());
    g.as_mut()
      .is_some_and(|s| s.write_all(b"{\"op\":\"interrupt\"}\n").is_ok())
  }
}

/// The long-lived process of a session.
pub(crate) struct Worker {
  pub pid: i32,
  channel: Channel,
  exited: watch::Receiver<Option<Exit>>,
  exit: Option<ExitStatus>,
  job: Arc<Job>,
  limits: crate::process::limits::Limits,
  interrupt: Interrupt,
}

impl Worker {
  /// Start the worker in its job, listening for its control connection,
  /// followed to its end by the one supervisor (the Windows
  /// [`Execution`], its pumps answering the catch-up barrier). Must be
  /// called within a tokio runtime.
  pub fn spawn(spec: &WorkerSpec, owner: u64) -> Result<Worker, ExecError> {
    // checked again at each (re)start: the cwd may have been removed since
    // the session started, and the spawn's error would blame the program
    check_cwd(spec.process.cwd())?;
    let channel_error = |e: std::io::Error| {
      ExecError::new(
        ErrorCode::ESPAWN,
        format!("cannot create the control channel: {e}"),
      )
    };
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(channel_error)?;
    let port = listener.local_addr().map_err(channel_error)?.port();
    listener.set_nonblocking(true).map_err(channel_error)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(channel_error)?;
    // tells the worker's connection from any other one to the port
    let token = format!("{:016x}{:016x}", random_u64(), random_u64());

    let run = ProcessSpec {
      program: spec.program.clone(),
      args: spec.args.clone(),
      arg0: None,
      stdin: StdinMode::Null,
      process: spec.process.clone(),
      run: RunOptions::untimed(),
    };
    let ((out, out_rx), (err, err_rx)) = (relay(), relay());
    let ctl = format!("{port} {token}");
    // the job, the sandbox's ESANDBOX and the limits' EINVAL are the
    // execution's, as for any run
    let exec = Execution::spawn_with_catchup(&run, owner, out, err, &[(CTL_VAR, &ctl)])?;
    let pid = exec.pid();
    let job = exec.job();
    let output = Output::new([out_rx, err_rx], exec.catchups());
    let interrupt = Interrupt(Arc::new(Mutex::new(None)));
    let channel = Channel::new(
      Pending {
        listener,
        token,
        interrupt: interrupt.0.clone(),
      },
      spec.separator,
      output,
    );
    Ok(Worker {
      pid: pid as i32,
      channel,
      exited: follow(exec),
      exit: None,
      job,
      limits: spec.process.limits.clone(),
      interrupt,
    })
  }

  /// Why the worker ended, if a limit of its job ended it.
  pub fn limit_error(&self, st: Option<ExitStatus>) -> Option<ExecError> {
    let code = st.map(|st| decode_status(st).0);
    job_limit_error(&self.job, &self.limits, code)
  }

  /// Whether the job is over a limit now: then it is ended.
  pub fn over_limit_now(&mut self) -> bool {
    if self.limit_error(None).is_none() {
      return false;
    }
    self.job.terminate(TERMINATED_EXIT);
    true
  }

  /// A job already over a limit when the worker became ready.
  pub async fn over_limit_at_start(&mut self, shown: &str) -> Option<ExecError> {
    let e = self.limit_error(None)?;
    self.kill().await;
    Some(ExecError::new(
      ErrorCode::ELIMIT,
      format!("{shown} could not start: {}", e.what),
    ))
  }

  /// The error of a worker that ended before it was ready.
  pub fn startup_error(&self, shown: &str, st: ExitStatus, stderr: &HeadTailBuffer) -> ExecError {
    let (code, _) = decode_status(st);
    let (text, _) = rendered_text(stderr);
    if let Some(e) = self.limit_error(Some(st)) {
      return ExecError::new(
        ErrorCode::ELIMIT,
        format!("{shown} could not start: {}", e.what),
      );
    }
    ExecError::new(
      ErrorCode::ESPAWN,
      format!(
        "{shown} exited during startup (exit code {code}): {}",
        text.trim()
      ),
    )
  }

  /// A receiver that sees how the worker ended.
  pub fn exit_watch(&self) -> watch::Receiver<Option<Exit>> {
    self.exited.clone()
  }

  /// Whether the worker has exited.
  pub fn has_exited(&mut self) -> bool {
    if self.exit.is_none() {
      self.exit = self.exited.borrow().as_ref().map(|x| x.status);
    }
    self.exit.is_some()
  }

  /// Send a request on the control channel (once the worker connected).
  pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
    self.channel.send(bytes, &mut self.exited).await
  }

  /// Pump output until a control message, the exit, `deadline` or `cancel`.
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

  /// How an interrupt reaches this worker's running request.
  pub fn interrupter(&self) -> Interrupt {
    self.interrupt.clone()
  }

  /// Interrupt the running request (the control message).
  pub fn interrupt(&self) -> bool {
    self.interrupt.send()
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

  /// End the worker: close the control channel (the driver ends at EOF),
  /// wait up to `grace`, then end the job.
  pub async fn shutdown(mut self, grace: Duration) -> Option<ExitStatus> {
    self.channel.close().await;
    let st = if grace.is_zero() {
      None
    } else {
      self.wait_exit(grace).await
    };
    self.kill().await.or(st)
  }

  /// End the job (the worker and all it started) and reap the worker.
  pub async fn kill(&mut self) -> Option<ExitStatus> {
    self.job.terminate(TERMINATED_EXIT);
    let st = self.wait_exit(Duration::from_secs(5)).await;
    registry::unregister(self.pid);
    st
  }
}

impl Drop for Worker {
  fn drop(&mut self) {
    self.job.terminate(TERMINATED_EXIT);
    registry::unregister(self.pid);
  }
}

/// Follow the worker's execution to its end in a task of its own (its exit,
/// then the bounded drain): the receiver sees how it ended.
fn follow(exec: Execution<Relay, Relay>) -> watch::Receiver<Option<Exit>> {
  let (tx, exited) = watch::channel(None);
  tokio::spawn(async move {
    // nothing cancels a worker's execution: its session ends the job
    let never = CancellationToken::new();
    let (st, finished) = exec.follow_owned(EXIT_DRAIN, &never, || {}).await;
    let _ = tx.send(Some(Exit {
      status: st.unwrap_or_else(unknown_status),
      limit: finished.outcome.error,
    }));
  });
  exited
}

/// 64 random bits: std's hasher keys come from the system's random source.
fn random_u64() -> u64 {
  use std::hash::{BuildHasher, Hasher};
  let mut h = std::collections::hash_map::RandomState::new().build_hasher();
  h.write_u64(std::process::id().into());
  h.finish()
}

/// The engine's last resort (a session dropped with its worker running).
pub(crate) fn kill_now(pid: i32) {
  registry::kill_now(pid);
}
