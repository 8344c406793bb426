//! The exec-server protocol: JSON-RPC 2.0 methods `process/*`, their params
//! and results (camelCase, bytes as base64), and stable error codes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{ErrorCode, ExecError};
use crate::manager::{
  EventKind, ExitInfo, ProcessEvent, ProcessIo, ProcessManager, ReadResult, StartSpec,
  TerminateMode, WaitResult,
};
use crate::process::limits::Limits;
use crate::process::{ProcessFields, ProcessOptions, RunOptions};

pub const PROTOCOL_VERSION: &str = "1";

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// Too many requests pending on the connection.
pub const SERVER_BUSY: i64 = -32000;

/// The JSON-RPC code of an exec-native error code. EINVAL is "invalid params".
pub fn rpc_code(code: ErrorCode) -> i64 {
  match code {
    ErrorCode::EINVAL => INVALID_PARAMS,
    ErrorCode::ESRCH => -32001,
    ErrorCode::EBUSY => -32002,
    ErrorCode::EPIPE => -32003,
    ErrorCode::EEXIST => -32004,
    ErrorCode::ENOENT => -32005,
    ErrorCode::EACCES => -32006,
    ErrorCode::ENOTDIR => -32007,
    ErrorCode::ESPAWN => -32008,
    ErrorCode::EIO => -32009,
    ErrorCode::ESANDBOX => -32010,
    ErrorCode::ENOTSUP => -32011,
    _ => -32000,
  }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub struct RpcError {
  pub code: i64,
  pub message: String,
  /// `{ "errorCode": "ESRCH" }` for errors of the process manager.
  pub error_code: Option<&'static str>,
}

impl RpcError {
  pub fn new(code: i64, message: impl Into<String>) -> Self {
    RpcError {
      code,
      message: message.into(),
      error_code: None,
    }
  }

  pub fn invalid_params(what: impl std::fmt::Display) -> Self {
    Self::from(ExecError::invalid(format!("invalid params: {what}")))
  }

  pub fn to_json(&self) -> Value {
    let mut e = json!({ "code": self.code, "message": self.message });
    if let Some(c) = self.error_code {
      e["data"] = json!({ "errorCode": c });
    }
    e
  }
}

impl From<ExecError> for RpcError {
  fn from(e: ExecError) -> Self {
    RpcError {
      code: rpc_code(e.code),
      message: e.message(),
      error_code: Some(e.code.as_str()),
    }
  }
}

pub fn response(id: &Value, result: Result<Value, RpcError>) -> Value {
  match result {
    Ok(r) => json!({ "jsonrpc": "2.0", "id": id, "result": r }),
    Err(e) => json!({ "jsonrpc": "2.0", "id": id, "error": e.to_json() }),
  }
}

pub fn b64(data: &[u8]) -> String {
  B64.encode(data)
}

fn exit_fields(v: &mut Value, exit: &Option<ExitInfo>) {
  v["exitCode"] = exit.as_ref().map_or(Value::Null, |e| json!(e.exit_code));
  v["signal"] = exit
    .as_ref()
    .and_then(|e| e.signal.clone())
    .map_or(Value::Null, Value::String);
  // a sandboxed process: codex's ReadResponse.sandboxDenied, and what was denied
  if let Some(r) = exit.as_ref().and_then(|e| e.sandbox.as_ref()) {
    v["sandboxDenied"] = json!(r.denied);
    v["sandbox"] = sandbox_json(r);
  }
  // only when a resource limit stopped the process (ELIMIT)
  if let Some(e) = exit.as_ref().and_then(|e| e.error.as_ref()) {
    v["error"] = json!(e.message());
    v["errorCode"] = json!(e.code.as_str());
  }
}

/// `{ applied, abi, missing, warning, denied, violations: [{ kind, path, message }] }`
pub fn sandbox_json(r: &crate::process::sandbox::SandboxReport) -> Value {
  json!({
    "applied": r.applied,
    "mechanism": r.mechanism,
    "abi": r.abi,
    "protected": r.protected,
    "missing": r.missing,
    "warning": r.warning,
    "denied": r.denied,
    "violations": r.violations.iter().map(|v| json!({
      "kind": v.kind.as_str(),
      "path": v.path,
      "message": v.message,
    })).collect::<Vec<_>>(),
  })
}

/// A `process/*` notification for an event.
pub fn notification(ev: &ProcessEvent) -> Value {
  let mut p = json!({ "processId": &*ev.process_id, "seq": ev.seq });
  match &ev.kind {
    EventKind::Started { pid } => p["pid"] = json!(pid),
    EventKind::Output { stream, data } => {
      p["stream"] = json!(stream.as_str());
      p["data"] = json!(b64(data));
    }
    EventKind::Exited(x) => exit_fields(&mut p, &Some((**x).clone())),
    EventKind::Closed => {}
    EventKind::Failed { error } => {
      p["error"] = json!(error.message());
      p["errorCode"] = json!(error.code.as_str());
    }
  }
  json!({ "jsonrpc": "2.0", "method": format!("process/{}", ev.kind.name()), "params": p })
}

/// Longest `processId` accepted (bytes).
pub const MAX_PROCESS_ID_BYTES: usize = 256;

fn params<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, RpcError> {
  if v.is_null() {
    return Err(RpcError::invalid_params("params are missing"));
  }
  if let Some(Value::String(id)) = v.get("processId") {
    if id.len() > MAX_PROCESS_ID_BYTES {
      return Err(RpcError::invalid_params(format!(
        "processId is {} bytes long, at most {MAX_PROCESS_ID_BYTES}",
        id.len()
      )));
    }
  }
  serde_json::from_value(v).map_err(RpcError::invalid_params)
}

/// A count or a number of milliseconds: a non-negative integer, also when a
/// client's JSON library writes it as a float (`1000.0`).
fn integral<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
  use serde::de::Error;
  match Option::<Value>::deserialize(d)? {
    None | Some(Value::Null) => Ok(None),
    Some(Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
      (Some(u), _) => Ok(Some(u)),
      (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64 => Ok(Some(f as u64)),
      _ => Err(D::Error::custom(format!(
        "expected a non-negative integer, got {n}"
      ))),
    },
    Some(other) => Err(D::Error::custom(format!(
      "expected a non-negative integer, got {}",
      kind(&other)
    ))),
  }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartParams {
  process_id: Option<String>,
  argv: Vec<String>,
  cwd: Option<String>,
  env: Option<HashMap<String, Option<String>>>,
  extend_env: Option<bool>,
  arg0: Option<String>,
  io: Option<IoParams>,
  events: Option<bool>,
  limits: Option<Value>,
  env_allowlist: Option<Value>,
  env_denylist: Option<Value>,
  die_with_parent: Option<bool>,
  sandbox: Option<Value>,
}

/// The JSON type of `v`, for error messages.
pub(crate) fn kind(v: &Value) -> &'static str {
  match v {
    Value::Null => "null",
    Value::Bool(_) => "a boolean",
    Value::Number(_) => "a number",
    Value::String(_) => "a string",
    Value::Array(_) => "an array",
    Value::Object(_) => "an object",
  }
}

/// `limits: { memoryBytes, cpuSeconds, maxProcesses, fileSizeBytes,
/// openFiles }`, checked by [`Limits::set`] as the Node API checks them:
/// numbers of at least 1 (fractions are cut), `null` for none.
pub(crate) fn limits_param(v: Option<Value>) -> Result<Limits, RpcError> {
  let mut l = Limits::default();
  let obj = match v {
    None => return Ok(l),
    Some(Value::Object(o)) => o,
    Some(other) => {
      return Err(RpcError::invalid_params(format!(
        "limits must be an object, got {}",
        kind(&other)
      )))
    }
  };
  for (key, val) in obj {
    if !Limits::NAMES.contains(&key.as_str()) {
      return Err(RpcError::invalid_params(format!(
        "unknown limit `{key}`, expected memoryBytes, cpuSeconds, maxProcesses, fileSizeBytes or openFiles"
      )));
    }
    if val.is_null() {
      continue;
    }
    let Some(n) = val.as_f64() else {
      return Err(RpcError::invalid_params(format!(
        "limits.{key} must be a number, got {}",
        kind(&val)
      )));
    };
    l.set(&key, n)
      .map_err(|e| RpcError::invalid_params(format!("limits.{key} {e}")))?;
  }
  Ok(l)
}

/// `envAllowlist` / `envDenylist`: an array of `*` patterns, `null` for none.
pub(crate) fn patterns_param(v: Option<Value>, key: &str) -> Result<Option<Vec<String>>, RpcError> {
  let bad = || RpcError::invalid_params(format!("{key} must be an array of strings"));
  match v {
    None | Some(Value::Null) => Ok(None),
    Some(Value::Array(items)) => items
      .into_iter()
      .map(|i| match i {
        Value::String(s) => Ok(s),
        _ => Err(bad()),
      })
      .collect::<Result<Vec<_>, _>>()
      .map(Some),
    Some(_) => Err(bad()),
  }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum IoParams {
  Pipe {
    #[serde(default)]
    stdin: StdinParam,
  },
  Pty {
    rows: u16,
    cols: u16,
  },
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
enum StdinParam {
  Open,
  #[default]
  Closed,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IdParams {
  process_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WriteParams {
  process_id: String,
  data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResizeParams {
  process_id: String,
  rows: u16,
  cols: u16,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum ModeParam {
  Graceful,
  Force,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TerminateParams {
  process_id: String,
  mode: Option<ModeParam>,
  #[serde(default, deserialize_with = "integral")]
  timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WaitParams {
  process_id: String,
  #[serde(default, deserialize_with = "integral")]
  timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadParams {
  process_id: String,
  #[serde(default, deserialize_with = "integral")]
  after_seq: Option<u64>,
  #[serde(default, deserialize_with = "integral")]
  max_bytes: Option<u64>,
  #[serde(default, deserialize_with = "integral")]
  wait_ms: Option<u64>,
}

pub use crate::manager::{DEFAULT_READ_MAX_BYTES, DEFAULT_TERMINATE_TIMEOUT_MS};
/// Upper bound of one long poll, so a request cannot be parked for ever.
pub const MAX_WAIT_MS: u64 = 24 * 3600 * 1000;

/// The answer of `initialize`: the protocol, the server, its limits. What
/// this build can start: a PTY where the system has one (ConPTY on
/// Windows); on Windows no shell session yet (issue 25).
fn initialize_json(m: &ProcessManager) -> Value {
  let c = m.config();
  let pty = crate::platform::pty_available();
  let sessions = if crate::platform::WINDOWS {
    json!(["python", "node"])
  } else {
    json!(["python", "node", "shell"])
  };
  json!({
    "protocolVersion": PROTOCOL_VERSION,
    "serverInfo": { "name": "exec-native", "version": env!("CARGO_PKG_VERSION") },
    "capabilities": { "pty": pty, "pipes": true, "sessions": sessions },
    "limits": {
      "retainedOutputBytes": c.retained_output_bytes,
      "maxProcesses": c.max_processes,
      "exitedRetentionMs": c.exited_retention.as_millis() as u64,
    },
  })
}

fn terminate_mode(p: &TerminateParams) -> TerminateMode {
  match p.mode {
    Some(ModeParam::Force) => TerminateMode::Force,
    None | Some(ModeParam::Graceful) => TerminateMode::Graceful {
      timeout: Duration::from_millis(p.timeout_ms.unwrap_or(DEFAULT_TERMINATE_TIMEOUT_MS)),
    },
  }
}

fn snapshot_json(s: crate::manager::Snapshot) -> Value {
  let mut v = json!({
    "stdout": b64(&s.stdout),
    "stderr": b64(&s.stderr),
    "terminal": b64(&s.terminal),
    "truncated": s.truncated,
    "omittedBytes": s.omitted_bytes,
    "running": s.running,
    "nextSeq": s.next_seq,
  });
  exit_fields(&mut v, &s.exit);
  v
}

fn list_json(list: Vec<crate::manager::ProcessInfo>) -> Value {
  let list: Vec<Value> = list
    .into_iter()
    .map(|i| {
      let mut v = json!({
        "processId": i.process_id,
        "pid": i.pid,
        "argv": i.argv,
        "pty": i.pty,
        "running": i.running,
      });
      exit_fields(&mut v, &i.exit);
      v
    })
    .collect();
  json!({ "processes": list })
}

fn wait_json(r: WaitResult) -> Value {
  let mut v = json!({ "running": r.running });
  exit_fields(&mut v, &r.exit);
  v
}

fn read_json(r: ReadResult) -> Value {
  let chunks: Vec<Value> = r
    .chunks
    .iter()
    .map(|c| json!({ "seq": c.seq, "stream": c.stream.as_str(), "data": b64(&c.data) }))
    .collect();
  let mut v = json!({
    "chunks": chunks,
    "lastSeq": r.last_seq,
    "truncated": r.truncated,
    "running": r.exit.is_none(),
    "closed": r.closed,
  });
  exit_fields(&mut v, &r.exit);
  v
}

/// `sandbox`: `true`, `false`, or `{ mode, writableRoots, excludeTmp, network,
/// onUnavailable }` as in the addon.
pub(crate) fn sandbox_param(
  v: Option<Value>,
) -> Result<Option<crate::process::sandbox::SandboxPolicy>, RpcError> {
  use crate::process::sandbox::{OnUnavailable, SandboxMode, SandboxPolicy};
  let bad = |what: String| RpcError::invalid_params(format!("sandbox{what}"));
  let o = match v {
    None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
    Some(Value::Bool(true)) => return Ok(Some(SandboxPolicy::default())),
    Some(Value::Object(o)) => o,
    Some(other) => {
      return Err(bad(format!(
        " must be true or an object, got {}",
        kind(&other)
      )))
    }
  };
  let mut p = SandboxPolicy::default();
  for (k, v) in o {
    match (k.as_str(), v) {
      ("mode", Value::String(m)) => {
        p.mode = SandboxMode::parse(&m).map_err(|e| bad(format!(".mode {e}")))?
      }
      ("writableRoots", Value::Array(a)) => {
        for r in a {
          match r {
            Value::String(s) => p.writable_roots.push(PathBuf::from(s)),
            other => {
              return Err(bad(format!(
                ".writableRoots entries must be strings, got {}",
                kind(&other)
              )))
            }
          }
        }
      }
      ("excludeTmp", Value::Bool(b)) => p.exclude_tmp = b,
      ("protect", Value::Array(a)) => {
        for r in a {
          match r {
            Value::String(s) => p.protect.push(PathBuf::from(s)),
            other => {
              return Err(bad(format!(
                ".protect entries must be strings, got {}",
                kind(&other)
              )))
            }
          }
        }
      }
      ("network", Value::Bool(b)) => p.network = b,
      ("onUnavailable", Value::String(u)) => {
        p.on_unavailable =
          OnUnavailable::parse(&u).map_err(|e| bad(format!(".onUnavailable {e}")))?
      }
      (k, v) => return Err(bad(format!(".{k}: unknown or invalid ({})", kind(&v)))),
    }
  }
  Ok(Some(p))
}

/// The process fields of a start's params (`process/start`,
/// `session/start`), each parsed; checked with the defaults by
/// `ProcessOptions::try_from`, as the addon's are.
pub(crate) fn process_fields(
  cwd: Option<PathBuf>,
  env: Option<HashMap<String, Option<String>>>,
  extend_env: Option<bool>,
  (allow, deny): (Option<Value>, Option<Value>),
  limits: Option<Value>,
  die_with_parent: Option<bool>,
  sandbox: Option<Value>,
) -> Result<ProcessFields, RpcError> {
  Ok(ProcessFields {
    cwd,
    env: env.map(|e| e.into_iter().collect()),
    extend_env,
    env_allowlist: patterns_param(allow, "envAllowlist")?,
    env_denylist: patterns_param(deny, "envDenylist")?,
    limits: Some(limits_param(limits)?),
    die_with_parent,
    sandbox: Some(sandbox_param(sandbox)?),
  })
}

pub fn start_spec(p: Value) -> Result<(StartSpec, bool), RpcError> {
  let p: StartParams = params(p)?;
  let fields = process_fields(
    p.cwd.map(PathBuf::from),
    p.env,
    p.extend_env,
    (p.env_allowlist, p.env_denylist),
    p.limits,
    p.die_with_parent,
    p.sandbox,
  )?;
  let io = match p.io {
    None => ProcessIo::Pipe { stdin_open: false },
    Some(IoParams::Pipe { stdin }) => ProcessIo::Pipe {
      stdin_open: matches!(stdin, StdinParam::Open),
    },
    Some(IoParams::Pty { rows, cols }) => ProcessIo::Pty { rows, cols },
  };
  Ok((
    StartSpec {
      process_id: p.process_id,
      argv: p.argv,
      arg0: p.arg0,
      io,
      process: ProcessOptions::try_from(fields)?,
      // no run params in the protocol: a managed process's defaults
      run: RunOptions::managed(),
    },
    p.events.unwrap_or(true),
  ))
}

/// Run one method. `events` receives the notifications of started processes.
pub async fn dispatch(
  m: &ProcessManager,
  events: &crate::manager::EventSender,
  method: &str,
  p: Value,
) -> Result<Value, RpcError> {
  let done = |()| json!({});
  match method {
    "initialize" => Ok(initialize_json(m)),
    "process/start" => {
      let (spec, notify) = start_spec(p)?;
      let s = m.start(spec, notify.then(|| events.clone()))?;
      Ok(json!({ "processId": s.process_id, "pid": s.pid }))
    }
    "process/write" => {
      let p: WriteParams = params(p)?;
      let data = B64
        .decode(p.data.as_bytes())
        .map_err(|e| RpcError::invalid_params(format!("data is not base64: {e}")))?;
      Ok(m.write(&p.process_id, &data).await.map(done)?)
    }
    "process/closeStdin" => {
      let p: IdParams = params(p)?;
      Ok(m.close_stdin(&p.process_id).await.map(done)?)
    }
    "process/resize" => {
      let p: ResizeParams = params(p)?;
      Ok(m.resize(&p.process_id, p.rows, p.cols).map(done)?)
    }
    "process/terminate" => {
      let p: TerminateParams = params(p)?;
      Ok(wait_json(
        m.terminate(&p.process_id, terminate_mode(&p)).await?,
      ))
    }
    "process/wait" => {
      let p: WaitParams = params(p)?;
      let t = p
        .timeout_ms
        .map(|t| Duration::from_millis(t.min(MAX_WAIT_MS)));
      Ok(wait_json(m.wait(&p.process_id, t).await?))
    }
    "process/read" => {
      let p: ReadParams = params(p)?;
      let max = p.max_bytes.map_or(DEFAULT_READ_MAX_BYTES, |n| {
        n.min(usize::MAX as u64) as usize
      });
      let wait = Duration::from_millis(p.wait_ms.unwrap_or(0).min(MAX_WAIT_MS));
      let r = m
        .read(&p.process_id, p.after_seq.unwrap_or(0), max, wait)
        .await?;
      Ok(read_json(r))
    }
    "process/snapshot" => {
      let p: IdParams = params(p)?;
      Ok(snapshot_json(m.snapshot(&p.process_id)?))
    }
    "process/list" => Ok(list_json(m.list())),
    _ => Err(RpcError::new(
      METHOD_NOT_FOUND,
      format!("exec: unknown method '{method}' (EINVAL)"),
    )),
  }
}
