//! The worker's output, Windows: its two pipes, read by the request that
//! runs. A pipe has no non-blocking read there (tokio reads it on its
//! blocking pool), so the worker is not followed by the run pump (whose
//! catch-up barrier reads a pipe without waiting): the catch-up before a
//! control message is a bounded wait for the pipe to go quiet instead.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdout};
use tokio::time::Instant;

use crate::process::supervise::OutputSink;

const READ_BUF: usize = 64 * 1024;
/// After the worker exited: how long a grandchild holding the pipes may delay us.
const EXIT_DRAIN: Duration = Duration::from_millis(100);

/// The worker's stdout and stderr (`None` once at EOF).
pub(crate) struct Output {
  stdout: Option<ChildStdout>,
  stderr: Option<ChildStderr>,
  obuf: Vec<u8>,
  ebuf: Vec<u8>,
}

impl Output {
  pub fn new(stdout: Option<ChildStdout>, stderr: Option<ChildStderr>) -> Output {
    Output {
      stdout,
      stderr,
      obuf: vec![0u8; READ_BUF],
      ebuf: vec![0u8; READ_BUF],
    }
  }

  /// Read one chunk of either pipe into its sink, then wait for the sink to
  /// take more. Cancel-safe; never resolves once both pipes are at EOF.
  pub async fn pump<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    let out_open = self.stdout.is_some();
    let err_open = self.stderr.is_some();
    tokio::select! {
      r = read_opt(&mut self.stdout, &mut self.obuf), if out_open => match r {
        Ok(0) | Err(_) => self.stdout = None,
        Ok(n) => {
          out.write(&self.obuf[..n]);
          out.ready().await;
        }
      },
      r = read_opt(&mut self.stderr, &mut self.ebuf), if err_open => match r {
        Ok(0) | Err(_) => self.stderr = None,
        Ok(n) => {
          err.write(&self.ebuf[..n]);
          err.ready().await;
        }
      },
      else => std::future::pending().await,
    }
  }

  /// What the worker wrote before its message may still be on the way
  /// through the pipe's reader: each pipe is read until it stays quiet for
  /// `QUIET`, for `CATCH_UP` at most.
  pub async fn catch_up<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    const QUIET: Duration = Duration::from_millis(15);
    const CATCH_UP: Duration = Duration::from_millis(200);
    let until = Instant::now() + CATCH_UP;
    catch_up(&mut self.stdout, out, &mut self.obuf, QUIET, until).await;
    catch_up(&mut self.stderr, err, &mut self.ebuf, QUIET, until).await;
  }

  /// After the worker's exit: the pipes read to EOF, but no longer than
  /// [`EXIT_DRAIN`].
  pub async fn after_exit<O: OutputSink, E: OutputSink>(&mut self, out: &mut O, err: &mut E) {
    let until = Instant::now() + EXIT_DRAIN;
    drain_pipe(self.stdout.take(), out, until, &mut self.obuf).await;
    drain_pipe(self.stderr.take(), err, until, &mut self.ebuf).await;
  }
}

/// Read `pipe` until it is quiet for `quiet`, or `until`.
async fn catch_up<R, S>(
  pipe: &mut Option<R>,
  sink: &mut S,
  buf: &mut [u8],
  quiet: Duration,
  until: Instant,
) where
  R: tokio::io::AsyncRead + Unpin,
  S: OutputSink,
{
  while Instant::now() < until {
    let Some(p) = pipe.as_mut() else { return };
    match tokio::time::timeout(quiet, p.read(buf)).await {
      Ok(Ok(n)) if n > 0 => sink.write(&buf[..n]),
      Ok(_) => {
        *pipe = None;
        return;
      }
      Err(_) => return,
    }
  }
}

/// Read to EOF until `until` (a read in flight then keeps its bytes,
/// dropped with the pipe).
async fn drain_pipe<R, S>(pipe: Option<R>, sink: &mut S, until: Instant, buf: &mut [u8])
where
  R: tokio::io::AsyncRead + Unpin,
  S: OutputSink,
{
  let Some(mut pipe) = pipe else { return };
  while let Ok(Ok(n)) = tokio::time::timeout_at(until, pipe.read(buf)).await {
    if n == 0 {
      break;
    }
    sink.write(&buf[..n]);
  }
}

/// One read of the pipe; never resolves once it is gone (at EOF).
async fn read_opt<R: tokio::io::AsyncRead + Unpin>(
  r: &mut Option<R>,
  buf: &mut [u8],
) -> std::io::Result<usize> {
  match r {
    Some(r) => r.read(buf).await,
    None => std::future::pending().await,
  }
}
