//! What the host reads from and writes to a worker: the control socket (the
//! worker's fd 0) and its stdout/stderr pipes.
//!
//! Control messages end with a separator byte (`\n` for the Python driver's
//! JSON lines, NUL for bash). A message is handed out only after everything
//! already in the output pipes has been read, so output written before a
//! completion belongs to the execution that completes. After the worker's
//! exit the pipes are read to EOF, but no longer than [`EXIT_DRAIN`]: a
//! grandchild that keeps them open cannot hold the session.

use std::os::fd::AsRawFd;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::platform::unread_by_peer;
use crate::process::supervise::OutputSink;

const READ_BUF: usize = 64 * 1024;
/// After the worker exited: how long a grandchild holding the pipes may delay us.
const EXIT_DRAIN: Duration = Duration::from_millis(100);

/// What interrupted [`Channel::next_event`].
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

/// The control socket and the output pipes of one worker.
pub(crate) struct Channel {
  ctl: UnixStream,
  ctl_open: bool,
  /// What came on the control socket and is not a complete message yet.
  inbox: Vec<u8>,
  separator: u8,
  stdout: Option<ChildStdout>,
  stderr: Option<ChildStderr>,
}

impl Channel {
  pub fn new(
    ctl: UnixStream,
    separator: u8,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
  ) -> Channel {
    Channel {
      ctl,
      ctl_open: true,
      inbox: Vec::new(),
      separator,
      stdout,
      stderr,
    }
  }

  /// Bytes sent on the control socket that the worker has not read yet
  /// (`None` where the platform cannot tell).
  pub fn unread_by_peer(&self) -> Option<usize> {
    unread_by_peer(self.ctl.as_raw_fd())
  }

  /// Send a few bytes on the control socket without waiting (false: they
  /// did not fit, or the socket is closed).
  pub fn try_send(&self, bytes: &[u8]) -> bool {
    self.ctl.try_write(bytes).is_ok_and(|n| n == bytes.len())
  }

  /// Send a request on the control socket.
  pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
    self.ctl.write_all(bytes).await
  }

  /// Close our sending side (the worker reads EOF: a polite request to end).
  pub async fn close(&mut self) {
    let _ = self.ctl.shutdown().await;
    self.ctl_open = false;
  }

  /// Take what the worker has written on the control socket by now into the
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
  /// exits (`exited` sees its status), `deadline` passes or `cancel` fires.
  pub async fn next_event<O: OutputSink, E: OutputSink>(
    &mut self,
    out: &mut O,
    err: &mut E,
    exited: &mut watch::Receiver<Option<ExitStatus>>,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
  ) -> Event {
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
        st = wait_exited(exited) => {
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
}

/// The exit status, once the task that owns the child has reaped it.
pub(crate) async fn wait_exited(rx: &mut watch::Receiver<Option<ExitStatus>>) -> ExitStatus {
  match rx.wait_for(|s| s.is_some()).await {
    Ok(st) => (*st).unwrap_or(std::os::unix::process::ExitStatusExt::from_raw(0x7f00)),
    // the task is gone without a status (the runtime is shutting down)
    Err(_) => std::os::unix::process::ExitStatusExt::from_raw(0x7f00),
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
