//! `exec-native serve`: the process manager as a JSON-RPC 2.0 server, over
//! stdio (one JSON message per line) or WebSocket (one message per text
//! frame). Both transports feed one dispatcher; each connection owns a
//! [`ProcessManager`] whose processes are terminated when it closes.
//!
//! Windows builds it too (issue 25): the manager's processes run there with
//! pipes, each in a Job Object (`process/start` with a PTY is ENOTSUP, a
//! sandbox ESANDBOX), sessions are Python only (`sessions.rs`), and the
//! token file is protected by the user's temporary directory, not by mode
//! bits (`token.rs`).

pub mod protocol;
pub mod sessions;
mod token;

pub use token::{random_token, remove_token_files, write_token_file};

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::tungstenite::Message;

use crate::error::{ErrorCode, ExecError};
use crate::manager::{ManagerConfig, ProcessManager};
use protocol::{RpcError, INVALID_REQUEST, PARSE_ERROR};

/// Requests of one connection waiting for their answer at once; more are
/// answered at once with `-32000` (`EBUSY`).
pub const MAX_PENDING_REQUESTS: usize = 1024;

/// Largest accepted message (a line or a WebSocket frame).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Handshakes in progress at once (sockets whose request head is not read
/// yet), counted apart from the connections: a peer that opens sockets and
/// sends nothing (slowloris) can fill these for `handshake_timeout` at most,
/// and never the places of connections. More are refused (503).
pub const MAX_HANDSHAKES: usize = 256;

/// Largest request head of a handshake.
const MAX_HEAD_BYTES: usize = 16 * 1024;

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
  let owner = config.owner;
  let manager = ProcessManager::new(config);
  let sessions = Arc::new(sessions::Sessions::default());
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
    let (id, method, params) = match parse_request(msg) {
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
    if tasks.len() >= MAX_PENDING_REQUESTS {
      let e = RpcError::new(
        protocol::SERVER_BUSY,
        format!("exec: {MAX_PENDING_REQUESTS} requests are pending on this connection, wait for answers (EBUSY)"),
      );
      let _ = out.send(protocol::response(&id, Err(e)).to_string()).await;
      continue;
    }
    let (m, ev, o) = (manager.clone(), ev_tx.clone(), out.clone());
    let ss = sessions.clone();
    tasks.spawn(async move {
      let r = if method.starts_with("session/") {
        sessions::dispatch(&ss, &o, owner, &method, params).await
      } else {
        protocol::dispatch(&m, &ev, &method, params).await
      };
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
  sessions.close_all().await;
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

/// A message as a request (its id, `None` for a notification; its method
/// and params), or the id and error to answer with.
fn parse_request(msg: Incoming) -> Result<Split, (Value, RpcError)> {
  let parse_error = |why: &dyn std::fmt::Display| {
    let e = RpcError::new(PARSE_ERROR, format!("exec: parse error: {why} (EINVAL)"));
    (Value::Null, e)
  };
  let text = match msg {
    Incoming::Text(t) => t,
    Incoming::Invalid(why) => return Err(parse_error(&why)),
  };
  let value: Value = serde_json::from_str(&text).map_err(|e| parse_error(&e))?;
  split_request(value)
}

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
    // well-formed JSON-RPC (by-position params), but not what a method takes
    return Err((
      id_or_null,
      RpcError::new(
        protocol::INVALID_PARAMS,
        format!(
          "exec: params must be an object (named parameters), got {} (EINVAL)",
          protocol::kind(&params)
        ),
      ),
    ));
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

/// Who may use the WebSocket listener, and the limits of its connections.
///
/// A local listener is reachable by every web page the user opens (a page may
/// connect to `ws://127.0.0.1`, and DNS rebinding makes any name point there),
/// so by default a handshake carrying an `Origin` header is refused, a `Host`
/// that is not a loopback name is refused, and a bearer token is required.
#[derive(Clone, Debug)]
pub struct WsPolicy {
  /// The token a client must present (`Authorization: Bearer <token>`, or
  /// `?token=<token>` for browsers); `None` only with `--no-auth` on loopback.
  pub token: Option<String>,
  /// Origins a browser page may connect from (exact, e.g.
  /// `http://localhost:5173`); any other `Origin` header is refused (403).
  pub allowed_origins: Vec<String>,
  /// Accept any `Host` header (a non-loopback listener).
  pub allow_remote: bool,
  /// Connections at once; more are refused (503). A connection counts from
  /// its accepted handshake on: one still sending its request head holds
  /// one of the [`MAX_HANDSHAKES`] handshake places instead.
  pub max_connections: usize,
  /// A TCP connection must send its whole request head within this.
  pub handshake_timeout: Duration,
  /// A ping is sent this often; a peer silent for two intervals is dropped
  /// (and its processes terminated).
  pub ping_interval: Duration,
}

impl Default for WsPolicy {
  fn default() -> Self {
    WsPolicy {
      token: None,
      allowed_origins: Vec::new(),
      allow_remote: false,
      max_connections: 64,
      handshake_timeout: Duration::from_secs(3),
      ping_interval: Duration::from_secs(30),
    }
  }
}

/// Compare without an early exit, so the time taken says nothing of the token.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
  let mut diff = a.len() ^ b.len();
  for i in 0..a.len().max(b.len()) {
    diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
  }
  diff == 0
}

/// Whether a `Host` header names this machine's loopback (`localhost`,
/// `*.localhost`, `127.0.0.0/8`, `::1`), with or without a port.
pub fn is_loopback_host(host: &str) -> bool {
  let name = if let Some(rest) = host.strip_prefix('[') {
    rest.split(']').next().unwrap_or("")
  } else {
    match host.rsplit_once(':') {
      Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
      _ => host,
    }
  };
  let name = name.trim_end_matches('.').to_ascii_lowercase();
  name == "localhost"
    || name.ends_with(".localhost")
    || name.parse::<IpAddr>().is_ok_and(is_loopback)
}

/// Why a handshake is refused: the HTTP status and the reason.
fn check_handshake(req: &Request, policy: &WsPolicy) -> Result<(), (u16, String)> {
  let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
  if !policy.allow_remote {
    match header("host") {
      Some(h) if is_loopback_host(h) => {}
      Some(h) => {
        return Err((
          403,
          format!("Host '{h}' is not a loopback name (DNS rebinding?); start with --allow-remote to accept it"),
        ))
      }
      None => return Err((400, "a Host header is required".into())),
    }
  }
  if let Some(origin) = header("origin") {
    if !policy.allowed_origins.iter().any(|o| o == origin) {
      return Err((
        403,
        format!(
          "Origin '{origin}' is not allowed (start with --allow-origin {origin} to allow it)"
        ),
      ));
    }
  }
  if let Some(token) = &policy.token {
    let bearer = header("authorization")
      .and_then(|a| a.strip_prefix("Bearer "))
      .map(str::trim);
    let query = req
      .uri()
      .query()
      .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("token=")));
    let ok = [bearer, query]
      .into_iter()
      .flatten()
      .any(|t| same_secret(t.as_bytes(), token.as_bytes()));
    if !ok {
      return Err((
        401,
        "a token is required: Authorization: Bearer <token> (or ?token=<token>)".into(),
      ));
    }
  }
  Ok(())
}

/// A request head, read whole before the handshake (see [`judge_head`]).
async fn read_head(stream: &mut tokio::net::TcpStream) -> Result<Vec<u8>, Option<(u16, String)>> {
  use tokio::io::AsyncReadExt;
  let mut head = Vec::with_capacity(1024);
  let mut chunk = [0u8; 4096];
  loop {
    if head.windows(4).any(|w| w == b"\r\n\r\n") {
      return Ok(head);
    }
    if head.len() > MAX_HEAD_BYTES {
      return Err(Some((
        431,
        format!("the request head is longer than {MAX_HEAD_BYTES} bytes"),
      )));
    }
    match stream.read(&mut chunk).await {
      Ok(0) | Err(_) => return Err(None),
      Ok(n) => head.extend_from_slice(&chunk[..n]),
    }
  }
}

/// Whether the head asks for a WebSocket (`Upgrade: websocket`).
fn asks_upgrade(req: &Request) -> bool {
  req.headers().get_all("upgrade").iter().any(|v| {
    v.to_str()
      .is_ok_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
  })
}

/// Check a request head before the WebSocket handshake: what tungstenite
/// would close without a word gets an HTTP answer, and what it would accept
/// but we must not is refused. Plain HTTP (`GET /`, a `POST`) gets 401
/// without the token, else 426; an absolute-form target (`GET
/// http://evil.example/`) and more than one `Host` get 400; then the
/// checks of [`check_handshake`] (Host, Origin, token).
fn judge_head(head: &[u8], policy: &WsPolicy) -> Result<(), (u16, String)> {
  let bad = |why: String| (400, why);
  let mut headers = [httparse::EMPTY_HEADER; 64];
  let mut raw = httparse::Request::new(&mut headers);
  match raw.parse(head) {
    Ok(httparse::Status::Complete(_)) => {}
    Ok(httparse::Status::Partial) => return Err(bad("an incomplete request head".into())),
    Err(e) => return Err(bad(format!("a malformed request head: {e}"))),
  }
  let target = raw.path.unwrap_or("");
  if !target.starts_with('/') {
    return Err(bad(format!(
      "the request target must be a path, not '{target}' (absolute-form is for proxies)"
    )));
  }
  let hosts = raw
    .headers
    .iter()
    .filter(|h| h.name.eq_ignore_ascii_case("host"))
    .count();
  if hosts > 1 {
    return Err(bad(format!("{hosts} Host headers; a request has one")));
  }
  let mut b = Request::builder()
    .method(raw.method.unwrap_or("GET"))
    .uri(target);
  for h in raw.headers.iter() {
    b = b.header(h.name, h.value);
  }
  let req = b
    .body(())
    .map_err(|e| bad(format!("a malformed request head: {e}")))?;
  check_handshake(&req, policy)?;
  if !asks_upgrade(&req) {
    return Err((
      426,
      "this is a WebSocket endpoint (JSON-RPC 2.0, docs/PROTOCOL.md): send an Upgrade: websocket request".into(),
    ));
  }
  if raw.version != Some(1) {
    return Err(bad("a WebSocket handshake needs HTTP/1.1".into()));
  }
  tokio_tungstenite::tungstenite::handshake::server::create_response(&req)
    .map(drop)
    .map_err(|e| bad(format!("not a valid WebSocket handshake: {e}")))
}

/// Answer a refused request and close (`Connection: close`).
async fn answer_http(stream: &mut tokio::net::TcpStream, status: u16, why: &str) {
  let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
  let body = format!("exec-native: {why}\n");
  let extra = match status {
    426 => "Upgrade: websocket\r\nConnection: Upgrade, close\r\n",
    401 => "WWW-Authenticate: Bearer\r\nConnection: close\r\n",
    _ => "Connection: close\r\n",
  };
  let text = format!(
    "HTTP/1.1 {} {}\r\n{extra}Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
    code.as_u16(),
    code.canonical_reason().unwrap_or(""),
    body.len()
  );
  let _ = tokio::time::timeout(Duration::from_secs(2), async {
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
  })
  .await;
}

/// A stream whose first bytes were read already (the request head): they
/// are read again, then the rest.
struct Replay<S> {
  head: Vec<u8>,
  at: usize,
  inner: S,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Replay<S> {
  fn poll_read(
    mut self: std::pin::Pin<&mut Self>,
    cx: &mut std::task::Context<'_>,
    buf: &mut tokio::io::ReadBuf<'_>,
  ) -> std::task::Poll<std::io::Result<()>> {
    if self.at < self.head.len() {
      let n = (self.head.len() - self.at).min(buf.remaining());
      let at = self.at;
      buf.put_slice(&self.head[at..at + n]);
      self.at += n;
      return std::task::Poll::Ready(Ok(()));
    }
    std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
  }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Replay<S> {
  fn poll_write(
    mut self: std::pin::Pin<&mut Self>,
    cx: &mut std::task::Context<'_>,
    buf: &[u8],
  ) -> std::task::Poll<std::io::Result<usize>> {
    std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
  }

  fn poll_flush(
    mut self: std::pin::Pin<&mut Self>,
    cx: &mut std::task::Context<'_>,
  ) -> std::task::Poll<std::io::Result<()>> {
    std::pin::Pin::new(&mut self.inner).poll_flush(cx)
  }

  fn poll_shutdown(
    mut self: std::pin::Pin<&mut Self>,
    cx: &mut std::task::Context<'_>,
  ) -> std::task::Poll<std::io::Result<()>> {
    std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
  }
}

fn refuse(status: u16, why: String) -> ErrorResponse {
  let mut r = ErrorResponse::new(Some(format!("exec-native: {why}\n")));
  *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
  r
}

/// Accept WebSocket connections for ever; each one is served on its own.
pub async fn serve_ws(
  listener: TcpListener,
  config: ManagerConfig,
  policy: WsPolicy,
) -> Result<(), ExecError> {
  let slots = Arc::new(Semaphore::new(policy.max_connections));
  let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
  loop {
    let (mut stream, _) = match listener.accept().await {
      Ok(s) => s,
      Err(e) if is_transient(&e) => {
        tokio::time::sleep(Duration::from_millis(50)).await;
        continue;
      }
      Err(e) => {
        return Err(ExecError::new(
          ErrorCode::EIO,
          format!("accept failed: {e}"),
        ));
      }
    };
    let Ok(pending) = handshakes.clone().try_acquire_owned() else {
      tokio::spawn(async move {
        answer_http(&mut stream, 503, "too many handshakes at once").await;
      });
      continue;
    };
    let (config, policy, slots) = (config.clone(), policy.clone(), slots.clone());
    tokio::spawn(async move {
      // the head first, within the handshake's time, holding a handshake
      // place only
      let head = match tokio::time::timeout(policy.handshake_timeout, read_head(&mut stream)).await
      {
        Ok(Ok(head)) => head,
        Ok(Err(Some((status, why)))) => return answer_http(&mut stream, status, &why).await,
        Ok(Err(None)) | Err(_) => return,
      };
      if let Err((status, why)) = judge_head(&head, &policy) {
        return answer_http(&mut stream, status, &why).await;
      }
      let Ok(_slot) = slots.try_acquire_owned() else {
        let why = format!(
          "{} connections at once, the most allowed",
          policy.max_connections
        );
        return answer_http(&mut stream, 503, &why).await;
      };
      drop(pending);
      let _ = stream.set_nodelay(true);
      let stream = Replay {
        head,
        at: 0,
        inner: stream,
      };
      let mut ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default();
      // read up to twice the limit, so that a message just over it gets an
      // answer (-32700) as on stdio; past that the connection is closed (1009)
      ws_config.max_message_size = Some(2 * MAX_MESSAGE_BYTES);
      ws_config.max_frame_size = Some(2 * MAX_MESSAGE_BYTES);
      // the callback's error type is tungstenite's (an HTTP response)
      #[allow(clippy::result_large_err)]
      let check = |req: &Request, resp: Response| match check_handshake(req, &policy) {
        Ok(()) => Ok(resp),
        Err((status, why)) => Err(refuse(status, why)),
      };
      let handshake =
        tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(ws_config));
      let Ok(Ok(ws)) = tokio::time::timeout(policy.handshake_timeout, handshake).await else {
        return;
      };
      serve_ws_connection(ws, config, policy.ping_interval).await;
    });
  }
}

/// Serve one accepted WebSocket: frames in, answers and notifications out,
/// pings to notice a vanished peer, a close frame with a code at the end.
async fn serve_ws_connection<S>(
  ws: tokio_tungstenite::WebSocketStream<S>,
  config: ManagerConfig,
  ping_interval: Duration,
) where
  S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
  let (mut sink, mut source) = ws.split();
  let (in_tx, in_rx) = mpsc::channel(16);
  let (out_tx, mut out_rx) = mpsc::channel::<String>(256);
  let started = Instant::now();
  let last_heard = Arc::new(AtomicU64::new(0));
  let close: Arc<std::sync::Mutex<Option<CloseFrame>>> = Default::default();
  let (heard, close_in) = (last_heard.clone(), close.clone());
  let read_task = tokio::spawn(async move {
    while let Some(m) = source.next().await {
      heard.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
      let m = match m {
        Ok(Message::Text(t)) if t.len() > MAX_MESSAGE_BYTES => Incoming::Invalid(format!(
          "a message of {} bytes is over the limit of {MAX_MESSAGE_BYTES}",
          t.len()
        )),
        Ok(Message::Text(t)) => Incoming::Text(t.to_string()),
        Ok(Message::Binary(_)) => {
          Incoming::Invalid("binary frames are not supported, send text".into())
        }
        Ok(Message::Close(_)) => break,
        Err(WsError::Capacity(e)) => {
          *close_in.lock().unwrap_or_else(|e| e.into_inner()) = Some(CloseFrame {
            code: CloseCode::Size,
            reason: format!("{e}").into(),
          });
          break;
        }
        Err(_) => break,
        Ok(_) => continue,
      };
      if in_tx.send(m).await.is_err() {
        break;
      }
    }
  });
  let close_out = close.clone();
  let write_task = tokio::spawn(async move {
    let mut ping = tokio::time::interval_at(Instant::now() + ping_interval, ping_interval);
    loop {
      tokio::select! {
        text = out_rx.recv() => {
          let Some(text) = text else { break };
          if sink.send(Message::Text(text.into())).await.is_err() {
            return;
          }
        }
        _ = ping.tick() => {
          let silent = started.elapsed().as_millis() as u64 - last_heard.load(Ordering::Relaxed);
          if silent > 2 * ping_interval.as_millis() as u64 {
            *close_out.lock().unwrap_or_else(|e| e.into_inner()) = Some(CloseFrame {
              code: CloseCode::Away,
              reason: "no answer to pings".into(),
            });
            break;
          }
          if sink.send(Message::Ping(Default::default())).await.is_err() {
            return;
          }
        }
      }
    }
    let frame = close_out
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .take()
      .unwrap_or(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
      });
    let _ = sink.send(Message::Close(Some(frame))).await;
    let _ = sink.close().await;
  });
  serve_connection(config, in_rx, out_tx).await;
  read_task.abort();
  let _ = tokio::time::timeout(Duration::from_secs(5), write_task).await;
}

/// An `accept` error after which the listener goes on (out of descriptors
/// or buffers, a peer gone before its accept).
fn is_transient(e: &std::io::Error) -> bool {
  e.raw_os_error()
    .is_some_and(|c| crate::platform::ACCEPT_RETRY.contains(&c))
}

#[cfg(test)]
mod tests;
