//! The MCP server's transport: newline-delimited JSON-RPC over a reader and
//! a writer (stdio), as rmcp's own, except for the lines rmcp would answer
//! wrongly. A line that is not JSON gets `-32700` (rmcp drops it and the
//! client waits for its timeout); a `tools/call` whose `params` or
//! `arguments` is not an object gets `-32602` (rmcp reads it as an unknown
//! method, `-32601`); a request of no shape rmcp knows gets `-32600`.

use std::sync::Arc;

use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// JSON-RPC's codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// Lines longer than this are refused (`-32600`) rather than held.
const MAX_LINE: usize = 64 * 1024 * 1024;

pub struct LineTransport<R, W> {
  reader: BufReader<R>,
  writer: Arc<Mutex<W>>,
  line: Vec<u8>,
}

impl<R, W> LineTransport<R, W> {
  pub fn new(reader: R, writer: W) -> Self
  where
    R: AsyncRead,
  {
    LineTransport {
      reader: BufReader::new(reader),
      writer: Arc::new(Mutex::new(writer)),
      line: Vec::new(),
    }
  }
}

async fn write_line<W: AsyncWrite + Unpin>(
  w: &Mutex<W>,
  mut bytes: Vec<u8>,
) -> std::io::Result<()> {
  bytes.push(b'\n');
  let mut w = w.lock().await;
  w.write_all(&bytes).await?;
  w.flush().await
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
  json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// A message for rmcp, or the error to answer it with (`Err(None)`: drop it,
/// as rmcp does with a notification it does not know).
pub fn check_line(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Option<Value>> {
  let value: Value = serde_json::from_slice(line).map_err(|e| {
    Some(error_reply(
      Value::Null,
      PARSE_ERROR,
      format!("Parse error: {e}"),
    ))
  })?;
  let id = value.get("id").cloned();
  let method = value.get("method").and_then(Value::as_str);
  if let (Some(id), Some("tools/call")) = (&id, method) {
    if let Some(msg) = tools_call_shape(&value) {
      return Err(Some(error_reply(id.clone(), INVALID_PARAMS, msg)));
    }
  }
  match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
    Ok(m) => Ok(m),
    Err(e) => match id {
      Some(id) => Err(Some(error_reply(
        id,
        INVALID_REQUEST,
        format!("Invalid Request: {e}"),
      ))),
      None => Err(None),
    },
  }
}

/// What is wrong with a `tools/call`'s params, if anything.
fn tools_call_shape(v: &Value) -> Option<String> {
  let params = match v.get("params") {
    None => return Some("Invalid params: tools/call needs params { name, arguments }".into()),
    Some(Value::Object(p)) => p,
    Some(other) => {
      return Some(format!(
        "Invalid params: params must be an object, got {other}"
      ))
    }
  };
  if !params.get("name").is_some_and(Value::is_string) {
    return Some("Invalid params: params.name must be the tool's name (a string)".into());
  }
  match params.get("arguments") {
    None | Some(Value::Null) | Some(Value::Object(_)) => None,
    Some(other) => Some(format!(
      "Invalid params: arguments must be an object, got {other}"
    )),
  }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
  R: AsyncRead + Unpin + Send + 'static,
  W: AsyncWrite + Unpin + Send + 'static,
{
  type Error = std::io::Error;

  fn send(
    &mut self,
    item: TxJsonRpcMessage<RoleServer>,
  ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
    let w = self.writer.clone();
    let bytes = serde_json::to_vec(&item);
    async move { write_line(&w, bytes.map_err(std::io::Error::other)?).await }
  }

  async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
    loop {
      // cancel-safe: rmcp drops this future when something else is ready,
      // and a long line arrives in many reads; what was read stays in
      // `self.line` for the next call, which goes on appending (clearing it
      // at the start lost the front of a 200 KiB request under load)
      let n = self.reader.read_until(b'\n', &mut self.line).await.ok()?;
      if n == 0 && self.line.is_empty() {
        return None;
      }
      if n != 0 && !self.line.ends_with(b"\n") {
        continue;
      }
      let whole = std::mem::take(&mut self.line);
      let mut line: &[u8] = &whole;
      while let Some(rest) = line
        .strip_suffix(b"\n")
        .or_else(|| line.strip_suffix(b"\r"))
      {
        line = rest;
      }
      if line.iter().all(u8::is_ascii_whitespace) {
        continue;
      }
      let reply = if line.len() > MAX_LINE {
        Some(error_reply(
          Value::Null,
          INVALID_REQUEST,
          format!("Invalid Request: a message longer than {MAX_LINE} bytes"),
        ))
      } else {
        match check_line(line) {
          Ok(m) => return Some(m),
          Err(reply) => reply,
        }
      };
      if let Some(r) = reply {
        let bytes = serde_json::to_vec(&r).unwrap_or_default();
        if write_line(&self.writer, bytes).await.is_err() {
          return None;
        }
      }
    }
  }

  async fn close(&mut self) -> Result<(), Self::Error> {
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn code(line: &str) -> Option<i64> {
    match check_line(line.as_bytes()) {
      Ok(_) => None,
      Err(r) => r.and_then(|v| v["error"]["code"].as_i64()),
    }
  }

  #[test]
  fn bad_lines_get_the_json_rpc_codes() {
    assert_eq!(code("not json"), Some(PARSE_ERROR));
    assert_eq!(
      code(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":"ls"}}"#
      ),
      Some(INVALID_PARAMS)
    );
    assert_eq!(
      code(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"ls"}}}"#
      ),
      None
    );
    assert_eq!(code(r#"{"jsonrpc":"2.0","id":4}"#), Some(INVALID_REQUEST));
  }
}
