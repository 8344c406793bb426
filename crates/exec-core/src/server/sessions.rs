//! The `session/*` methods of `serve`: persistent Python, Node and bash
//! sessions of one connection (closed with it), over the same engine as the
//! addon's classes. Output and bundles stream as notifications while a
//! `session/execute` runs:
//! `session/output {sessionId, stream: 'stdout'|'stderr', data}` (text, split
//! on UTF-8 boundaries) and `session/display {sessionId, data: {mime: ...}}`.
//!
//! Windows: `python` and `node` sessions; `shell` is bash's ENOENT without
//! Git bash, else ENOTSUP, as the addon's `ShellSession` says there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::protocol::{self, RpcError, METHOD_NOT_FOUND};
use crate::process::supervise::OutputSink;
use crate::process::{ProcessOptions, RunFields, RunOptions};
use crate::session::{
  Bundle, CellLanguage, CellOptions, CellResult, DriverSession, NodeOptions, PythonOptions,
};
#[cfg(unix)]
use crate::session::{ShellOptions, ShellSession};

/// Longest `sessionId` accepted (bytes).
const MAX_SESSION_ID_BYTES: usize = 256;

enum Session {
  Driver(Arc<DriverSession>),
  #[cfg(unix)]
  Shell(Arc<ShellSession>),
}

/// The sessions of one connection.
#[derive(Default)]
pub struct Sessions {
  map: Mutex<HashMap<String, Arc<Session>>>,
  next: std::sync::atomic::AtomicU64,
}

impl Sessions {
  fn get(&self, id: &str) -> Result<Arc<Session>, RpcError> {
    self
      .map
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .get(id)
      .cloned()
      .ok_or_else(|| {
        RpcError::new(
          protocol::rpc_code(crate::ErrorCode::ESRCH),
          format!("exec: no session '{id}' (ESRCH)"),
        )
      })
  }

  /// Close every session (the connection ended).
  pub async fn close_all(&self) {
    let all: Vec<_> = self
      .map
      .lock()
      .unwrap_or_else(|e| e.into_inner())
      .drain()
      .map(|(_, s)| s)
      .collect();
    for s in all {
      close(&s).await;
    }
  }
}

async fn close(s: &Session) {
  match s {
    Session::Driver(d) => d.close().await,
    #[cfg(unix)]
    Session::Shell(sh) => sh.close().await,
  }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartParams {
  /// `python`, `node` or `shell`.
  kind: String,
  session_id: Option<String>,
  cwd: Option<String>,
  env: Option<HashMap<String, Option<String>>>,
  extend_env: Option<bool>,
  env_allowlist: Option<Value>,
  env_denylist: Option<Value>,
  limits: Option<Value>,
  sandbox: Option<Value>,
  die_with_parent: Option<bool>,
  /// The interpreter: `python3`, `node` or `bash` by default.
  program: Option<String>,
  exec_argv: Option<Vec<String>>,
  init_code: Option<String>,
  force_kill_after_delay_ms: Option<u64>,
  startup_timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExecuteParams {
  session_id: String,
  code: String,
  language: Option<String>,
  timeout_ms: Option<u64>,
  max_output_bytes: Option<usize>,
  max_display_bytes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdParams {
  session_id: String,
}

fn params<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, RpcError> {
  if v.is_null() {
    return Err(RpcError::invalid_params("params are missing"));
  }
  if let Some(Value::String(id)) = v.get("sessionId") {
    if id.len() > MAX_SESSION_ID_BYTES {
      return Err(RpcError::invalid_params(format!(
        "sessionId is {} bytes long, at most {MAX_SESSION_ID_BYTES}",
        id.len()
      )));
    }
  }
  serde_json::from_value(v).map_err(RpcError::invalid_params)
}

/// Run one `session/*` method; `out` takes the notifications.
pub async fn dispatch(
  sessions: &Sessions,
  out: &mpsc::Sender<String>,
  owner: u64,
  method: &str,
  p: Value,
) -> Result<Value, RpcError> {
  match method {
    "session/start" => start(sessions, owner, params(p)?).await,
    "session/execute" => execute(sessions, out, params(p)?).await,
    "session/interrupt" => {
      let p: IdParams = params(p)?;
      let hit = match &*sessions.get(&p.session_id)? {
        Session::Driver(d) => d.interrupt(),
        #[cfg(unix)]
        Session::Shell(s) => s.interrupt(),
      };
      Ok(json!({ "interrupted": hit }))
    }
    "session/close" => {
      let p: IdParams = params(p)?;
      let s = sessions.get(&p.session_id)?;
      sessions
        .map
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&p.session_id);
      close(&s).await;
      Ok(json!({}))
    }
    _ => Err(RpcError::new(
      METHOD_NOT_FOUND,
      format!("exec: unknown method '{method}' (EINVAL)"),
    )),
  }
}

/// The id of a new session: the one asked for, or the next `s<n>`; EEXIST
/// when a session has it.
fn new_id(sessions: &Sessions, asked: Option<String>) -> Result<String, RpcError> {
  let id = match asked {
    Some(id) => id,
    None => format!(
      "s{}",
      sessions
        .next
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1
    ),
  };
  if sessions
    .map
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .contains_key(&id)
  {
    return Err(RpcError::new(
      protocol::rpc_code(crate::ErrorCode::EEXIST),
      format!("exec: a session '{id}' exists already (EEXIST)"),
    ));
  }
  Ok(id)
}

/// The session's working directory: the one given, or the server's.
fn cwd_param(cwd: Option<String>) -> Result<std::path::PathBuf, RpcError> {
  match cwd {
    Some(c) => Ok(c.into()),
    None => std::env::current_dir().map_err(|e| {
      RpcError::invalid_params(format!("cwd is missing and the server's is gone: {e}"))
    }),
  }
}

impl Session {
  fn pid(&self) -> i32 {
    match self {
      Session::Driver(d) => d.pid(),
      #[cfg(unix)]
      Session::Shell(s) => s.pid(),
    }
  }
}

/// What every kind of session takes from `session/start`'s params.
struct Common {
  process: ProcessOptions,
  owner: u64,
  init_code: Option<String>,
  /// The defaults of each execution: `forceKillAfterDelayMs` over
  /// [`RunOptions::session`].
  run: RunOptions,
  startup_timeout: Option<Duration>,
}

async fn start(sessions: &Sessions, owner: u64, p: StartParams) -> Result<Value, RpcError> {
  let fields = protocol::process_fields(
    None,
    p.env,
    p.extend_env,
    (p.env_allowlist, p.env_denylist),
    p.limits,
    p.die_with_parent,
    p.sandbox,
  )?;
  let mut process = ProcessOptions::try_from(fields)?;
  process.cwd = Some(cwd_param(p.cwd)?);
  let ms = Duration::from_millis;
  let c = Common {
    process,
    owner,
    init_code: p.init_code,
    run: RunFields {
      kill_grace: p.force_kill_after_delay_ms.map(ms),
      ..RunFields::default()
    }
    .over(&RunOptions::session()),
    startup_timeout: p.startup_timeout_ms.map(ms),
  };
  let id = new_id(sessions, p.session_id)?;
  let session = match p.kind.as_str() {
    "python" => start_python(c, p.program).await?,
    "node" => start_node(c, p.program, p.exec_argv).await?,
    "shell" => start_shell(c, p.program).await?,
    other => {
      return Err(RpcError::invalid_params(format!(
        "kind must be 'python', 'node' or 'shell', got '{other}'"
      )))
    }
  };
  let pid = session.pid();
  sessions
    .map
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .insert(id.clone(), Arc::new(session));
  Ok(json!({ "sessionId": id, "pid": pid }))
}

async fn start_python(c: Common, program: Option<String>) -> Result<Session, RpcError> {
  let d = PythonOptions::default();
  let o = PythonOptions {
    python: program.unwrap_or(d.python),
    process: c.process,
    init_code: c.init_code,
    owner: c.owner,
    run: c.run,
    startup_timeout: c.startup_timeout.unwrap_or(d.startup_timeout),
    max_history: d.max_history,
  };
  Ok(Session::Driver(Arc::new(DriverSession::start(o).await?)))
}

async fn start_node(
  c: Common,
  program: Option<String>,
  exec_argv: Option<Vec<String>>,
) -> Result<Session, RpcError> {
  let d = NodeOptions::default();
  let o = NodeOptions {
    node: program.unwrap_or(d.node),
    exec_argv: exec_argv.unwrap_or_default(),
    process: c.process,
    init_code: c.init_code,
    owner: c.owner,
    run: c.run,
    startup_timeout: c.startup_timeout.unwrap_or(d.startup_timeout),
    max_history: d.max_history,
  };
  Ok(Session::Driver(Arc::new(DriverSession::start(o).await?)))
}

#[cfg(unix)]
async fn start_shell(c: Common, program: Option<String>) -> Result<Session, RpcError> {
  let d = ShellOptions::default();
  let o = ShellOptions {
    shell: program.unwrap_or(d.shell),
    process: c.process,
    init_script: c.init_code,
    owner: c.owner,
    run: c.run,
    startup_timeout: c.startup_timeout.unwrap_or(d.startup_timeout),
  };
  Ok(Session::Shell(Arc::new(ShellSession::start(o).await?)))
}

/// Windows: bash's ENOENT naming the fix, else ENOTSUP (issue 25).
#[cfg(windows)]
async fn start_shell(_: Common, _: Option<String>) -> Result<Session, RpcError> {
  Err(crate::language::needs_bash("a shell session (session/start kind 'shell')").into())
}

async fn execute(
  sessions: &Sessions,
  out: &mpsc::Sender<String>,
  p: ExecuteParams,
) -> Result<Value, RpcError> {
  let s = sessions.get(&p.session_id)?;
  let d = CellOptions::default();
  let ms = Duration::from_millis;
  let language = match p.language.as_deref() {
    Some(l) => {
      Some(CellLanguage::parse(l).map_err(|e| RpcError::invalid_params(format!("language {e}")))?)
    }
    None => None,
  };
  let opts = CellOptions {
    // over the session's; 0: none
    run: RunFields {
      timeout: p.timeout_ms.map(|t| (t != 0).then(|| ms(t))),
      max_output_bytes: p.max_output_bytes,
      ..RunFields::default()
    },
    language,
    max_display_bytes: p.max_display_bytes.unwrap_or(d.max_display_bytes),
  };
  // notifications go through an unbounded queue to the connection's output,
  // in the order they were made
  let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
  let forward = {
    let out = out.clone();
    tokio::spawn(async move {
      while let Some(v) = rx.recv().await {
        if out.send(v.to_string()).await.is_err() {
          break;
        }
      }
    })
  };
  let stream = |name: &'static str| Notify {
    tx: tx.clone(),
    session: p.session_id.clone(),
    stream: name,
    carry: Vec::new(),
  };
  let result = match &*s {
    Session::Driver(d) => {
      let (tx, sid) = (tx.clone(), p.session_id.clone());
      let display = move |b: &Bundle| {
        let _ = tx.send(json!({
          "jsonrpc": "2.0",
          "method": "session/display",
          "params": { "sessionId": sid, "data": b },
        }));
      };
      let (ticket, run) =
        d.execute_ticketed(p.code, opts, stream("stdout"), stream("stderr"), display);
      let r = run.await;
      drop(ticket);
      driver_json(r?)
    }
    #[cfg(unix)]
    Session::Shell(sh) => {
      let r = sh
        .execute(p.code, opts, stream("stdout"), stream("stderr"))
        .await?;
      let mut v = json!({
        "status": r.status.as_str(),
        "stdout": r.stdout,
        "stderr": r.stderr,
        "truncated": r.truncated,
        "exitCode": r.exit_code,
        "cwd": r.cwd,
        "executionTime": r.execution_time.as_secs_f64() * 1000.0,
        "signal": r.signal,
        "stateLost": r.state_lost,
        "restarted": r.restarted,
      });
      error_fields(&mut v, &r.error);
      v
    }
  };
  drop(tx);
  // every notification of the execution goes out before its answer
  let _ = forward.await;
  Ok(result)
}

fn error_fields(v: &mut Value, e: &Option<crate::ExecError>) {
  if let Some(e) = e {
    v["error"] = json!(e.message());
    v["errorCode"] = json!(e.code.as_str());
  }
}

fn driver_json(r: CellResult) -> Value {
  let mut v = json!({
    "status": r.status.as_str(),
    "stdout": r.stdout,
    "stderr": r.stderr,
    "truncated": r.truncated,
    "value": r.result_value,
    "valueData": r.result_data,
    "displays": r.displays,
    "exception": r.exception,
    "executionCount": r.execution_count,
    "executionTime": r.execution_time.as_secs_f64() * 1000.0,
    "exitCode": r.exit_code,
    "signal": r.signal,
    "stateLost": r.state_lost,
    "restarted": r.restarted,
  });
  error_fields(&mut v, &r.error);
  v
}

/// A stream of an execution as `session/output` notifications.
struct Notify {
  tx: mpsc::UnboundedSender<Value>,
  session: String,
  stream: &'static str,
  /// The start of a UTF-8 character cut at the end of the last chunk.
  carry: Vec<u8>,
}

impl OutputSink for Notify {
  fn write(&mut self, data: &[u8]) {
    self.carry.extend_from_slice(data);
    let valid = match std::str::from_utf8(&self.carry) {
      Ok(_) => self.carry.len(),
      // an incomplete character at the end waits for the next chunk
      Err(e) if e.error_len().is_none() => e.valid_up_to(),
      Err(_) => self.carry.len(),
    };
    if valid == 0 {
      return;
    }
    let rest = self.carry.split_off(valid);
    let text = String::from_utf8_lossy(&self.carry).into_owned();
    self.carry = rest;
    let _ = self.tx.send(json!({
      "jsonrpc": "2.0",
      "method": "session/output",
      "params": { "sessionId": self.session, "stream": self.stream, "data": text },
    }));
  }

  async fn finish(&mut self) {
    if !self.carry.is_empty() {
      let text = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
      let _ = self.tx.send(json!({
        "jsonrpc": "2.0",
        "method": "session/output",
        "params": { "sessionId": self.session, "stream": self.stream, "data": text },
      }));
    }
  }
}
