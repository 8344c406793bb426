//! One managed process: its state ([`Proc`]), its input (a pipe or the
//! terminal), the sink its output goes into ([`ProcSink`]), and the calls on
//! it: write, close stdin, resize, terminate, wait, read, snapshot.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

#[cfg(unix)]
use std::os::fd::OwnedFd;

#[cfg(unix)]
use crate::process::child::StdinPipe;
#[cfg(unix)]
use portable_pty::MasterPty;
#[cfg(unix)]
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio::time::Instant;

#[cfg(unix)]
use super::pty;
use super::state;
use super::tree::Tree;
use super::{ExitInfo, ProcessManager, ReadResult, Snapshot, Stream, TerminateMode, WaitResult};
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::OutputSink;

/// Write all of `data` and flush it.
async fn write_flush(
  w: &mut (impl tokio::io::AsyncWrite + Unpin),
  data: &[u8],
) -> std::io::Result<()> {
  w.write_all(data).await?;
  w.flush().await
}

/// The stdin pipe of a pipe child.
#[cfg(windows)]
type StdinPipe = tokio::process::ChildStdin;

pub(super) enum Input {
  Closed,
  Pipe(StdinPipe),
  #[cfg(unix)]
  Pty(Arc<AsyncFd<OwnedFd>>),
  /// The input pipe of a pseudo console (what is written is typed).
  #[cfg(windows)]
  Console(tokio::fs::File),
}

pub(super) struct Proc {
  pub(super) id: Arc<str>,
  pub(super) pid: AtomicU32,
  pub(super) pty: bool,
  pub(super) argv: Vec<String>,
  pub(super) state: Mutex<state::State>,
  pub(super) changed: watch::Sender<u64>,
  pub(super) input: tokio::sync::Mutex<Input>,
  /// The terminal's master while the process runs (dropped at its end, so a
  /// finished PTY holds no `/dev/ptmx` descriptor while it is retained).
  #[cfg(unix)]
  pub(super) master: Mutex<Option<Box<dyn MasterPty + Send>>>,
  pub(super) exited: AtomicBool,
  /// Its tree (set once it is spawned).
  pub(super) tree: std::sync::OnceLock<Tree>,
}

impl Proc {
  pub(super) fn lock(&self) -> MutexGuard<'_, state::State> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  pub(super) fn pid(&self) -> u32 {
    self.pid.load(Ordering::Acquire)
  }

  pub(super) fn bump(&self) {
    self.changed.send_modify(|v| *v = v.wrapping_add(1));
  }

  fn record_output(&self, stream: Stream, data: &[u8]) {
    self.lock().record_output(stream, data);
    self.bump();
  }

  /// Wait until the consumer took every pending event (backpressure).
  async fn deliver(&self) {
    loop {
      let Some(tx) = self.lock().pending_sender() else {
        return;
      };
      match tx.reserve_owned().await {
        Ok(permit) => self.lock().send_with(permit),
        Err(_) => {
          self.lock().consumer_gone();
          return;
        }
      }
    }
  }

  pub(super) async fn finish(&self, mut exit: ExitInfo) {
    if let Some(r) = &mut exit.sandbox {
      let [err, out] = self.lock().retained_text();
      r.judge(exit.exit_code, exit.signal.as_deref(), &[&err, &out]);
    }
    self.exited.store(true, Ordering::Release);
    *self.input.lock().await = Input::Closed;
    self.lock().record_exit(exit);
    self.bump();
    self.deliver().await;
  }

  pub(super) fn is_closed(&self) -> bool {
    self.lock().closed
  }

  pub(super) fn wait_result(&self) -> WaitResult {
    let st = self.lock();
    WaitResult {
      running: st.exit.is_none(),
      exit: st.exit.clone(),
    }
  }

  /// Ask the tree to end (SIGTERM; `CTRL_BREAK_EVENT` on Windows) unless
  /// the leader already exited.
  fn ask_to_end(&self) {
    if let Some(t) = self.running_tree() {
      t.ask();
    }
  }

  /// Kill the tree (SIGKILL; `TerminateJobObject` on Windows) unless the
  /// leader already exited.
  pub(super) fn kill(&self) {
    if let Some(t) = self.running_tree() {
      t.kill();
    }
  }

  fn running_tree(&self) -> Option<&Tree> {
    if self.exited.load(Ordering::Acquire) {
      return None;
    }
    self.tree.get()
  }

  async fn wait_exit(&self, timeout: Option<Duration>) -> WaitResult {
    let mut rx = self.changed.subscribe();
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
      let r = self.wait_result();
      if !r.running {
        return r;
      }
      let changed = rx.changed();
      match deadline {
        Some(d) => {
          if tokio::time::timeout_at(d, changed).await.is_err() {
            return self.wait_result();
          }
        }
        None => {
          let _ = changed.await;
        }
      }
    }
  }
}

/// Appends a pipe's output to the process state; `ready` waits for the event
/// consumer so that a slow consumer slows the child instead of growing memory.
pub(super) struct ProcSink {
  pub(super) proc: Arc<Proc>,
  pub(super) stream: Stream,
}

impl OutputSink for ProcSink {
  fn write(&mut self, data: &[u8]) {
    self.proc.record_output(self.stream, data);
  }

  async fn ready(&mut self) {
    self.proc.deliver().await;
  }

  async fn finish(&mut self) {
    self.proc.deliver().await;
  }
}

impl ProcessManager {
  /// Write to the process's stdin (or terminal).
  pub async fn write(&self, id: &str, data: &[u8]) -> Result<(), ExecError> {
    let p = self.get(id)?;
    let mut input = p.input.lock().await;
    let closed = || {
      ExecError::new(
        ErrorCode::EPIPE,
        format!("stdin of process '{id}' is closed"),
      )
    };
    let (r, what) = match &mut *input {
      Input::Closed => return Err(closed()),
      Input::Pipe(w) => (write_flush(w, data).await, "process"),
      #[cfg(windows)]
      Input::Console(w) => (write_flush(w, data).await, "the terminal of process"),
      #[cfg(unix)]
      Input::Pty(fd) => {
        let fd = fd.clone();
        return match pty::write_all(&fd, data).await {
          Ok(()) => Ok(()),
          Err(e) if e.raw_os_error() == Some(libc::EIO) => {
            *input = Input::Closed;
            Err(closed())
          }
          Err(e) => Err(ExecError::new(
            ErrorCode::EIO,
            format!("cannot write to the terminal of process '{id}': {e}"),
          )),
        };
      }
    };
    match r {
      Ok(()) => Ok(()),
      // the reader is gone (the child, or the console after its end)
      Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
        *input = Input::Closed;
        Err(closed())
      }
      Err(e) => Err(ExecError::new(
        ErrorCode::EIO,
        format!("cannot write to {what} '{id}': {e}"),
      )),
    }
  }

  /// Close the stdin pipe: the program reads EOF.
  pub async fn close_stdin(&self, id: &str) -> Result<(), ExecError> {
    let p = self.get(id)?;
    if p.pty {
      // a console's EOF is Ctrl+Z then Enter, a POSIX terminal's Ctrl+D
      let eof = if crate::platform::WINDOWS {
        "\\u001a\\r"
      } else {
        "\\u0004"
      };
      return Err(ExecError::invalid(format!(
        "process '{id}' has a terminal, not a stdin pipe: write the EOF character (\"{eof}\") instead"
      )));
    }
    let mut input = p.input.lock().await;
    if let Input::Pipe(mut w) = std::mem::replace(&mut *input, Input::Closed) {
      let _ = w.shutdown().await;
    }
    Ok(())
  }

  /// Resize the terminal (the child gets SIGWINCH).
  pub fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<(), ExecError> {
    let p = self.get(id)?;
    if !p.pty {
      return Err(ExecError::invalid(format!(
        "process '{id}' uses pipes, not a terminal: only io.type 'pty' can be resized"
      )));
    }
    if rows == 0 || cols == 0 {
      return Err(ExecError::invalid("rows and cols must be at least 1"));
    }
    self.resize_pty(&p, id, rows, cols)
  }

  #[cfg(windows)]
  fn resize_pty(&self, p: &Proc, id: &str, rows: u16, cols: u16) -> Result<(), ExecError> {
    // the console is its tree's; closed at the end of the run
    match p.tree.get().and_then(|t| t.console()) {
      Some(c) if !c.is_closed() => c.resize(rows, cols).map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::Unsupported {
          ErrorCode::ENOTSUP
        } else {
          ErrorCode::EIO
        };
        ExecError::new(code, format!("cannot resize: {e}"))
      }),
      _ => Err(ExecError::invalid(format!(
        "process '{id}' has ended: its terminal is closed"
      ))),
    }
  }

  #[cfg(unix)]
  fn resize_pty(&self, p: &Proc, id: &str, rows: u16, cols: u16) -> Result<(), ExecError> {
    let master = p.master.lock().unwrap_or_else(|e| e.into_inner());
    let Some(master) = master.as_ref() else {
      return Err(ExecError::invalid(format!(
        "process '{id}' has ended: its terminal is closed"
      )));
    };
    let r = master
      .resize(pty::size(rows, cols))
      .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot resize: {e}")));
    r
  }

  /// Terminate the process group and wait for the exit.
  pub async fn terminate(&self, id: &str, mode: TerminateMode) -> Result<WaitResult, ExecError> {
    let p = self.get(id)?;
    Ok(terminate_proc(&p, mode).await)
  }

  /// Wait for the exit, at most `timeout` (`running: true` when it ran out).
  pub async fn wait(&self, id: &str, timeout: Option<Duration>) -> Result<WaitResult, ExecError> {
    let p = self.get(id)?;
    Ok(p.wait_exit(timeout).await)
  }

  /// Output chunks after `after_seq`. With `wait`, waits until there is some,
  /// the process exited, or `wait` passed.
  pub async fn read(
    &self,
    id: &str,
    after_seq: u64,
    max_bytes: usize,
    wait: Duration,
  ) -> Result<ReadResult, ExecError> {
    let p = self.get(id)?;
    let mut rx = p.changed.subscribe();
    let deadline = Instant::now() + wait;
    loop {
      {
        let st = p.lock();
        if st.has_news(after_seq) {
          return Ok(st.read(after_seq, max_bytes));
        }
      }
      if tokio::time::timeout_at(deadline, rx.changed())
        .await
        .is_err()
      {
        return Ok(p.lock().read(after_seq, max_bytes));
      }
    }
  }

  pub fn snapshot(&self, id: &str) -> Result<Snapshot, ExecError> {
    let p = self.get(id)?;
    let st = p.lock();
    let (o, e, t) = (st.stdout.render(), st.stderr.render(), st.terminal.render());
    Ok(Snapshot {
      truncated: o.truncated || e.truncated || t.truncated,
      omitted_bytes: o.omitted + e.omitted + t.omitted,
      stdout: o.bytes,
      stderr: e.bytes,
      terminal: t.bytes,
      running: st.exit.is_none(),
      exit: st.exit.clone(),
      next_seq: st.next_seq,
    })
  }
}

pub(super) async fn terminate_proc(p: &Proc, mode: TerminateMode) -> WaitResult {
  let r = p.wait_result();
  if !r.running {
    return r;
  }
  match mode {
    TerminateMode::Force => p.kill(),
    TerminateMode::Graceful { timeout } => {
      p.ask_to_end();
      let r = p.wait_exit(Some(timeout)).await;
      if !r.running {
        return r;
      }
      p.kill();
    }
  }
  // SIGKILL cannot be ignored; the bound only guards against a stuck kernel
  p.wait_exit(Some(Duration::from_secs(10))).await
}
