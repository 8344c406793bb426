//! `exec-native serve`: the process manager as a JSON-RPC 2.0 server, over
//! stdio (one JSON message per line) or WebSocket (one message per text
//! frame). Both transports feed one dispatcher; each connection owns a
//! [`ProcessManager`] whose processes are terminated when it closes.

pub mod protocol;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

use crate::error::{ErrorCode, ExecError};
use crate::manager::{ManagerConfig, ProcessManager};
use protocol::{RpcError, INVALID_REQUEST, PARSE_ERROR};

/// Largest accepted message (a line or a WebSocket frame).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// One message from a client, or why it could not be read.
#[derive(Debug)]
pub enum Incoming {
  Text(String),
  Invalid(String),
}

/// Serve one connection: read `incoming` until it ends (or the output side
/// goes away), answer on `out`, then terminate the connection's processes.
pub async fn serve_connection(
  config: ManagerConfig,
  mut incoming: mpsc::Receiver<Incoming>,
  out: mpsc::Sender<String>,
) {
  let manager = ProcessManager::new(config);
  let (ev_tx, mut ev_rx) = mpsc::channel(64);
  let forward_out = out.clone();
  let forwarder = tokio::spawn(async move {
    while let Some(ev) = ev_rx.recv().await {
      let text = protocol::notification(&ev).to_string();
      if forward_out.send(text).await.is_err() {
        break;
      }
    }
  });
  let mut tasks = JoinSet::new();
  loop {
    let msg = tokio::select! {
      m = incoming.recv() => match m { Some(m) => m, None => break },
      _ = out.closed() => break,
    };
    // reap finished request tasks as we go
    while tasks.try_join_next().is_some() {}
    let text = match msg {
      Incoming::Text(t) => t,
      Incoming::Invalid(why) => {
        let e = RpcError::new(PARSE_ERROR, format!("exec: parse error: {why} (EINVAL)"));
        let _ = out
          .send(protocol::response(&Value::Null, Err(e)).to_string())
          .await;
        continue;
      }
    };
    let value: Value = match serde_json::from_str(&text) {
      Ok(v) => v,
      Err(e) => {
        let e = RpcError::new(PARSE_ERROR, format!("exec: parse error: {e} (EINVAL)"));
        let _ = out
          .send(protocol::response(&Value::Null, Err(e)).to_string())
          .await;
        continue;
      }
    };
    let (id, method, params) = match split_request(value) {
      Ok(r) => r,
      Err((id, e)) => {
        let _ = out.send(protocol::response(&id, Err(e)).to_string()).await;
        continue;
      }
    };
    let Some(id) = id else {
      // a notification from the client: none are defined, so nothing to do
      continue;
    };
    let (m, ev, o) = (manager.clone(), ev_tx.clone(), out.clone());
    tasks.spawn(async move {
      let r = protocol::dispatch(&m, &ev, &method, params).await;
      let _ = o.send(protocol::response(&id, r).to_string()).await;
    });
  }
  // The input closed: requests already received still get their answers.
  // Quick ones finish first; then the connection's processes are terminated,
  // which also settles pending `process/wait`s; what is still running after
  // that is abandoned.
  let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
    while tasks.join_next().await.is_some() {}
  })
  .await;
  manager.close().await;
  let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
    while tasks.join_next().await.is_some() {}
  })
  .await;
  tasks.shutdown().await;
  drop(ev_tx);
  drop(manager);
  // processes keep a sender until they expire: stop forwarding now
  forwarder.abort();
}

type Split = (Option<Value>, String, Value);

/// `(id, method, params)`; `id` is `None` for a notification.
fn split_request(v: Value) -> Result<Split, (Value, RpcError)> {
  let invalid = |id: Value, why: &str| {
    (
      id,
      RpcError::new(
        INVALID_REQUEST,
        format!("exec: invalid request: {why} (EINVAL)"),
      ),
    )
  };
  let Value::Object(mut obj) = v else {
    let why = if v.is_array() {
      "batches are not supported, send one message per line"
    } else {
      "a request must be a JSON object"
    };
    return Err(invalid(Value::Null, why));
  };
  let id = obj.remove("id");
  if let Some(i) = &id {
    if !(i.is_string() || i.is_number() || i.is_null()) {
      return Err(invalid(
        Value::Null,
        "id must be a string, a number or null",
      ));
    }
  }
  let id_or_null = id.clone().unwrap_or(Value::Null);
  if obj.get("jsonrpc") != Some(&json!("2.0")) {
    return Err(invalid(id_or_null, "jsonrpc must be \"2.0\""));
  }
  let method = match obj.remove("method") {
    Some(Value::String(m)) => m,
    _ => return Err(invalid(id_or_null, "method must be a string")),
  };
  let params = obj.remove("params").unwrap_or(Value::Null);
  if !(params.is_object() || params.is_null()) {
    return Err(invalid(id_or_null, "params must be an object"));
  }
  Ok((id, method, params))
}

/// Read one line (without the newline) of at most `max` bytes; `None` at EOF.
async fn next_line<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> Option<Incoming> {
  let mut buf = Vec::new();
  let mut too_long = false;
  loop {
    let chunk = r.fill_buf().await.ok()?;
    if chunk.is_empty() {
      if buf.is_empty() && !too_long {
        return None;
      }
      return Some(finish_line(buf, too_long, max));
    }
    match chunk.iter().position(|b| *b == b'\n') {
      Some(i) => {
        if !too_long {
          buf.extend_from_slice(&chunk[..i]);
        }
        r.consume(i + 1);
        if buf.iter().all(u8::is_ascii_whitespace) && !too_long {
          buf.clear();
          continue;
        }
        return Some(finish_line(buf, too_long, max));
      }
      None => {
        let n = chunk.len();
        if !too_long {
          buf.extend_from_slice(chunk);
          if buf.len() > max {
            too_long = true;
            buf = Vec::new();
          }
        }
        r.consume(n);
      }
    }
  }
}

fn finish_line(mut buf: Vec<u8>, too_long: bool, max: usize) -> Incoming {
  if too_long || buf.len() > max {
    return Incoming::Invalid(format!("message longer than {max} bytes"));
  }
  if buf.last() == Some(&b'\r') {
    buf.pop();
  }
  match String::from_utf8(buf) {
    Ok(s) => Incoming::Text(s),
    Err(_) => Incoming::Invalid("message is not UTF-8".into()),
  }
}

/// Serve one connection over a reader and a writer of JSON lines. Returns when
/// the reader reaches EOF (or the writer fails), after the connection's
/// processes were terminated.
pub async fn serve_lines<R, W>(config: ManagerConfig, reader: R, mut writer: W)
where
  R: tokio::io::AsyncRead + Unpin + Send + 'static,
  W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
  let (in_tx, in_rx) = mpsc::channel(16);
  let (out_tx, mut out_rx) = mpsc::channel::<String>(256);
  let read_task = tokio::spawn(async move {
    let mut r = BufReader::new(reader);
    while let Some(m) = next_line(&mut r, MAX_MESSAGE_BYTES).await {
      if in_tx.send(m).await.is_err() {
        break;
      }
    }
  });
  let write_task = tokio::spawn(async move {
    while let Some(line) = out_rx.recv().await {
      let ok = async {
        writer.write_all(line.as_bytes()).await?;
        writer.write_all(b"\n").await?;
        writer.flush().await
      }
      .await;
      if ok.is_err() {
        break;
      }
    }
  });
  serve_connection(config, in_rx, out_tx).await;
  read_task.abort();
  let _ = tokio::time::timeout(std::time::Duration::from_secs(5), write_task).await;
}

/// Serve over this process's stdin/stdout until stdin closes.
pub async fn serve_stdio(config: ManagerConfig) {
  serve_lines(config, tokio::io::stdin(), tokio::io::stdout()).await;
}

/// Parse `ws://HOST:PORT` and check that it is a loopback address unless
/// `allow_remote`.
pub fn parse_listen(url: &str, allow_remote: bool) -> Result<SocketAddr, ExecError> {
  let bad = |why: &str| ExecError::invalid(format!("--listen '{url}': {why}"));
  let rest = url
    .strip_prefix("ws://")
    .ok_or_else(|| bad("expected ws://HOST:PORT"))?;
  let rest = rest.trim_end_matches('/');
  if rest.contains('/') {
    return Err(bad("a path is not supported"));
  }
  let addr = rest
    .to_socket_addrs()
    .map_err(|e| bad(&format!("cannot resolve: {e}")))?
    .next()
    .ok_or_else(|| bad("cannot resolve"))?;
  if !allow_remote && !is_loopback(addr.ip()) {
    return Err(bad(&format!(
      "{} is not a loopback address; pass --allow-remote to listen on it (anyone who can connect can run commands)",
      addr.ip()
    )));
  }
  Ok(addr)
}

fn is_loopback(ip: IpAddr) -> bool {
  match ip {
    IpAddr::V4(v) => v.is_loopback(),
    IpAddr::V6(v) => v.is_loopback() || v.to_ipv4_mapped().is_some_and(|m| m.is_loopback()),
  }
}

/// Bind the WebSocket listener.
pub async fn bind_ws(addr: SocketAddr) -> Result<TcpListener, ExecError> {
  TcpListener::bind(addr)
    .await
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot listen on ws://{addr}: {e}")))
}

/// Accept WebSocket connections for ever; each one is served on its own.
pub async fn serve_ws(listener: TcpListener, config: ManagerConfig) -> Result<(), ExecError> {
  loop {
    let (stream, _) = match listener.accept().await {
      Ok(s) => s,
      Err(e) if is_transient(&e) => {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        continue;
      }
      Err(e) => {
        return Err(ExecError::new(
          ErrorCode::EIO,
          format!("accept failed: {e}"),
        ));
      }
    };
    let config = config.clone();
    tokio::spawn(async move {
      let _ = stream.set_nodelay(true);
      let mut ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
      ws_config.max_message_size = Some(MAX_MESSAGE_BYTES);
      ws_config.max_frame_size = Some(MAX_MESSAGE_BYTES);
      let Ok(ws) = tokio_tungstenite::accept_async_with_config(stream, Some(ws_config)).await
      else {
        return;
      };
      let (mut sink, mut source) = ws.split();
      let (in_tx, in_rx) = mpsc::channel(16);
      let (out_tx, mut out_rx) = mpsc::channel::<String>(256);
      let read_task = tokio::spawn(async move {
        while let Some(m) = source.next().await {
          let m = match m {
            Ok(Message::Text(t)) => Incoming::Text(t.to_string()),
            Ok(Message::Binary(_)) => {
              Incoming::Invalid("binary frames are not supported, send text".into())
            }
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => continue,
          };
          if in_tx.send(m).await.is_err() {
            break;
          }
        }
      });
      let write_task = tokio::spawn(async move {
        while let Some(text) = out_rx.recv().await {
          if sink.send(Message::Text(text.into())).await.is_err() {
            break;
          }
        }
        let _ = sink.close().await;
      });
      serve_connection(config, in_rx, out_tx).await;
      read_task.abort();
      let _ = tokio::time::timeout(std::time::Duration::from_secs(5), write_task).await;
    });
  }
}

fn is_transient(e: &std::io::Error) -> bool {
  matches!(
    e.raw_os_error(),
    Some(
      libc::EMFILE | libc::ENFILE | libc::ECONNABORTED | libc::EINTR | libc::ENOBUFS | libc::ENOMEM
    )
  )
}

#[cfg(test)]
mod tests;
