//! What the host reads from and writes to a worker: the control socket (the
//! worker's fd 0) and, through [`Output`], its stdout and stderr.
//!
//! Control messages end with a separator byte (`\n` for the Python driver's
//! JSON lines, NUL for bash). A message is handed out only after everything
//! already in the output pipes has been read ([`Output::catch_up`]), so
//! output written before a completion belongs to the execution that
//! completes. After the worker's exit its output is read to EOF, but no
//! longer than a bounded drain: a grandchild that keeps the pipes open
//! cannot hold the session.
//!
//! The pipes are pumped by the worker's `Execution` for the worker's whole
//! life (`output.rs`: a relay per stream, the pumps' catch-up barrier at
//! each message; the drain after the exit is the execution's). Windows: the
//! control channel is a loopback TCP connection that the worker makes after its start
//! ([`Pending`]: the listener and the token the worker must send first);
//! until it is made, `next_event` waits for it (or the worker's exit, the
//! deadline, the cancel).

use std::process::ExitStatus;
#[cfg(windows)]
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::output::Output;
use crate::error::ExecError;
use crate::process::supervise::OutputSink;

/// The control channel's stream: the socketpair's end (POSIX), the loopback
/// connection (Windows).
#[cfg(unix)]
type CtlStream = tokio::net::UnixStream;
#[cfg(windows)]
type CtlStream = tokio::net::TcpStream;

/// Windows: the control connection the worker is still to make.
#[cfg(windows)]
pub(crate) struct Pending {
  pub listener: tokio::net::TcpListener,
  /// The first line the worker sends.
  pub token: String,
  /// Where the interrupt's clone of the connection goes.
  pub interrupt: std::sync::Arc<std::sync::Mutex<Option<std::net::TcpStream>>>,
}

/// How long a worker may take to make its control connection once a
/// request waits to be sent (its start is bounded by the startup timeout).
#[cfg(windows)]
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// How a worker ended, as the task that follows it saw it.
#[derive(Debug, Clone)]
pub(crate) struct Exit {
  pub status: ExitStatus,
  /// POSIX: the resource limit that ended it (the limit watchdog's finding,
  /// or the status explained under the limits). Windows asks its job.
  #[cfg_attr(windows, allow(dead_code))]
  pub limit: Option<ExecError>,
}

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

/// The control socket and the output of one worker.
pub(crate) struct Channel {
  ctl: Option<CtlStream>,
  #[cfg(windows)]
  pending: Option<Pending>,
  ctl_open: bool,
  /// What came on the control socket and is not a complete message yet.
  inbox: Vec<u8>,
  separator: u8,
  output: Output,
}

impl Channel {
  #[cfg(unix)]
  pub fn new(ctl: CtlStream, separator: u8, output: Output) -> Channel {
    Channel {
      ctl: Some(ctl),
      ctl_open: true,
      inbox: Vec::new(),
      separator,
      output,
    }
  }

  #[cfg(windows)]
  pub fn new(pending: Pending, separator: u8, output: Output) -> Channel {
    Channel {
      ctl: None,
      pending: Some(pending),
      ctl_open: true,
      inbox: Vec::new(),
      separator,
      output,
    }
  }

  /// Bytes sent on the control socket that the worker has not read yet
  /// (`None` where the platform cannot tell).
  #[cfg(unix)]
  pub fn unread_by_peer(&self) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let ctl = self.ctl.as_ref()?;
    crate::platform::unread_by_peer(ctl.as_raw_fd())
  }

  #[cfg(unix)]
  /// Send a few bytes on the control socket without waiting (false: they
  /// did not fit, or the socket is closed or not connected yet).
  pub fn try_send(&self, bytes: &[u8]) -> bool {
    self
      .ctl
      .as_ref()
      .is_some_and(|c| c.try_write(bytes).is_ok_and(|n| n == bytes.len()))
  }

  /// Send a request on the control socket.
  #[cfg(unix)]
  pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
    match &mut self.ctl {
      Some(c) => c.write_all(bytes).await,
      None => Err(std::io::ErrorKind::NotConnected.into()),
    }
  }

  /// Send a request on the control connection, once the worker made it
  /// (an error if it exits first, or takes [`CONNECT_WAIT`]).
  #[cfg(windows)]
  pub async fn send(
    &mut self,
    bytes: &[u8],
    exited: &mut watch::Receiver<Option<Exit>>,
  ) -> std::io::Result<()> {
    if self.ctl.is_none() && self.pending.is_some() {
      let until = Instant::now() + CONNECT_WAIT;
      tokio::select! {
        r = connect(self.pending.as_ref().expect("checked")) => {
          self.ctl = Some(r?);
          self.pending = None;
        }
        _ = wait_exited(exited) => return Err(std::io::ErrorKind::BrokenPipe.into()),
        _ = tokio::time::sleep_until(until) => return Err(std::io::ErrorKind::TimedOut.into()),
      }
    }
    match &mut self.ctl {
      Some(c) => c.write_all(bytes).await,
      None => Err(std::io::ErrorKind::NotConnected.into()),
    }
  }

  /// Close our sending side (the worker reads EOF: a polite request to end).
  pub async fn close(&mut self) {
    if let Some(c) = &mut self.ctl {
      let _ = c.shutdown().await;
    }
    self.ctl_open = false;
  }

  /// Take what the worker has written on the control socket by now into the
  /// inbox; whether a complete message is there.
  #[cfg(unix)]
  pub fn poll_messages(&mut self) -> bool {
    let mut buf = [0u8; 4096];
    while self.ctl_open {
      let Some(ctl) = &self.ctl else { break };
      match ctl.try_read(&mut buf) {
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

  /// Windows: wait for the worker's control connection (its output pumped
  /// meanwhile); `Some` when the run ended first (exit, deadline, cancel).
  #[cfg(windows)]
  async fn await_connection<O: OutputSink, E: OutputSink>(
    &mut self,
    out: &mut O,
    err: &mut E,
    exited: &mut watch::Receiver<Option<Exit>>,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
  ) -> Option<Event> {
    loop {
      tokio::select! {
        r = connect(self.pending.as_ref().expect("checked")) => {
          match r {
            Ok(c) => self.ctl = Some(c),
            Err(_) => self.ctl_open = false,
          }
          self.pending = None;
          return None;
        }
        _ = self.output.pump(out, err) => {}
        st = wait_exited(exited) => {
          self.output.after_exit(out, err).await;
          return Some(Event::Exited(st));
        }
        _ = sleep_until_opt(deadline) => return Some(Event::Deadline),
        _ = cancel.cancelled() => return Some(Event::Canceled),
      }
    }
  }

  /// Pump output into `out`/`err` until a control message arrives, the worker
  /// exits (`exited` sees its status), `deadline` passes or `cancel` fires.
  pub async fn next_event<O: OutputSink, E: OutputSink>(
    &mut self,
    out: &mut O,
    err: &mut E,
    exited: &mut watch::Receiver<Option<Exit>>,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
  ) -> Event {
    if let Some(m) = self.take_message() {
      self.output.catch_up(out, err).await;
      return Event::Message(m);
    }
    #[cfg(windows)]
    if self.ctl.is_none() && self.pending.is_some() {
      if let Some(ev) = self
        .await_connection(out, err, exited, deadline, cancel)
        .await
      {
        return ev;
      }
    }
    let mut cbuf = [0u8; 4096];
    loop {
      let tick = match (out.next_tick(), err.next_tick()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
      };
      let ctl_open = self.ctl_open && self.ctl.is_some();
      tokio::select! {
        biased;
        r = read_opt(&mut self.ctl, &mut cbuf), if ctl_open => match r {
          Ok(0) | Err(_) => self.ctl_open = false,
          Ok(n) => {
            self.inbox.extend_from_slice(&cbuf[..n]);
            if let Some(m) = self.take_message() {
              self.output.catch_up(out, err).await;
              return Event::Message(m);
            }
          }
        },
        _ = self.output.pump(out, err) => {}
        st = wait_exited(exited) => {
          self.output.after_exit(out, err).await;
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
}

/// The exit status, once the task that follows the worker has seen its exit.
pub(crate) async fn wait_exited(rx: &mut watch::Receiver<Option<Exit>>) -> ExitStatus {
  match rx.wait_for(|s| s.is_some()).await {
    Ok(x) => x.as_ref().map_or_else(unknown_status, |x| x.status),
    // the task is gone without a status (the runtime is shutting down)
    Err(_) => unknown_status(),
  }
}

/// The status of a worker whose status could not be had.
#[cfg(unix)]
pub(crate) fn unknown_status() -> ExitStatus {
  std::os::unix::process::ExitStatusExt::from_raw(0x7f00)
}

/// The status of a worker whose status could not be had.
#[cfg(windows)]
pub(crate) fn unknown_status() -> ExitStatus {
  std::os::windows::process::ExitStatusExt::from_raw(u32::MAX)
}

/// Windows: take the worker's connection: the first one that sends the
/// token (others are dropped). Its clone goes to the interrupt.
#[cfg(windows)]
async fn connect(p: &Pending) -> std::io::Result<CtlStream> {
  loop {
    let (mut stream, _) = p.listener.accept().await?;
    let mut line = Vec::with_capacity(p.token.len() + 1);
    let mut byte = [0u8; 1];
    // the token line, read byte by byte: what follows it is the channel's
    let ok = loop {
      match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await {
        Ok(Ok(1)) if byte[0] == b'\n' => break line == p.token.as_bytes(),
        Ok(Ok(1)) if line.len() <= p.token.len() => line.push(byte[0]),
        _ => break false,
      }
    };
    if !ok {
      continue;
    }
    let std_stream = stream.into_std()?;
    let clone = std_stream.try_clone()?;
    *p.interrupt.lock().unwrap_or_else(|e| e.into_inner()) = Some(clone);
    return CtlStream::from_std(std_stream);
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
