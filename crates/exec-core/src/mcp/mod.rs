//! `exec-native mcp`: a Model Context Protocol server (stdio) on the official
//! Rust SDK (`rmcp`). It exposes two tools:
//!
//! - `bash`: the command tool exactly as [`crate::command::tool`] defines it
//!   (`{ command, timeout?, check_pid?, kill_pid? }`), on one
//!   [`CommandRunner`] per connection (background jobs live as long as it);
//! - `execute_code`: `{ code, language, timeout? }` in a fresh process
//!   (bash, javascript, typescript, python), with the same text format.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
  CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
  InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::buffer::HeadTailBuffer;
use crate::command::format::{format_finished, Shown};
use crate::command::offload::LogStatus;
use crate::command::tool::{self, TOOL_DESCRIPTION, TOOL_NAME};
use crate::command::{CommandOptions, CommandRunner, OutputLimits, RunnerConfig};
use crate::error::{ErrorCode, ExecError};
use crate::language::{self, Language, Toolchain};
use crate::process::supervise::{run, RunPolicy};
use crate::CancellationToken;

/// Settings of the MCP server.
#[derive(Debug, Clone)]
pub struct McpConfig {
  /// Working directory of every command and code run.
  pub cwd: PathBuf,
  pub runner: RunnerConfig,
  pub toolchain: Toolchain,
}

/// Timeout of `execute_code` when the call gives none.
pub const EXECUTE_TIMEOUT: Duration = Duration::from_secs(30);

/// The MCP handler: one per connection.
#[derive(Clone)]
pub struct ExecMcp {
  config: Arc<McpConfig>,
  runner: CommandRunner,
}

impl ExecMcp {
  pub fn new(config: McpConfig) -> Self {
    let runner = CommandRunner::new(config.runner.clone());
    ExecMcp {
      config: Arc::new(config),
      runner,
    }
  }

  pub fn runner(&self) -> &CommandRunner {
    &self.runner
  }
}

fn object(v: Value) -> JsonObject {
  match v {
    Value::Object(m) => m,
    _ => JsonObject::new(),
  }
}

/// The two tools, as `tools/list` gives them.
pub fn tools() -> Vec<Tool> {
  vec![
    Tool::new(TOOL_NAME, TOOL_DESCRIPTION, object(tool::tool_parameters())),
    Tool::new(
      "execute_code",
      "Run code in a fresh process and return its output (same format and limits as bash). Languages: bash, javascript (node), typescript, python (python3).",
      object(json!({
        "type": "object",
        "properties": {
          "code": { "type": "string", "description": "The code to run" },
          "language": { "type": "string", "enum": ["bash", "javascript", "typescript", "python"], "description": "Its language" },
          "timeout": { "type": "integer", "description": "Timeout in ms; the process is killed after it (default: 30000)" }
        },
        "required": ["code", "language"]
      })),
    ),
  ]
}

fn result(text: String, is_error: bool) -> CallToolResponse {
  let content = vec![ContentBlock::text(text)];
  if is_error {
    CallToolResult::error(content).into()
  } else {
    CallToolResult::success(content).into()
  }
}

/// `execute_code`: run, capture, format like the command tool.
pub async fn execute_code(config: &McpConfig, args: &Value) -> (String, bool) {
  let parsed = (|| -> Result<_, ExecError> {
    let code = args
      .get("code")
      .and_then(Value::as_str)
      .ok_or_else(|| ExecError::invalid("code must be a string"))?;
    let lang: Language = args
      .get("language")
      .and_then(Value::as_str)
      .ok_or_else(|| ExecError::invalid("language must be a string"))?
      .parse()?;
    let timeout = match args.get("timeout") {
      None | Some(Value::Null) => EXECUTE_TIMEOUT,
      Some(v) => Duration::from_millis(v.as_u64().ok_or_else(|| {
        ExecError::invalid(format!("timeout must be a non-negative integer, got {v}"))
      })?),
    };
    let env = crate::command::command_env(crate::process::spec::EnvSpec::inherit());
    let launch = language::prepare(lang, code, &config.cwd, &env, &config.toolchain)?;
    Ok((launch, timeout))
  })();
  let (launch, timeout) = match parsed {
    Ok(p) => p,
    Err(e) => return (e.message(), true),
  };
  let mut spec = launch.spec;
  spec.cwd = Some(config.cwd.clone());
  let policy = RunPolicy {
    timeout: (!timeout.is_zero()).then_some(timeout),
    owner: config.runner.owner,
    ..Default::default()
  };
  let limits = OutputLimits::default();
  let cap = limits.max_bytes * 2;
  let f = match run(
    &spec,
    &policy,
    HeadTailBuffer::new(cap),
    HeadTailBuffer::new(cap),
    &CancellationToken::new(),
  )
  .await
  {
    Ok(f) => f,
    Err(e) => return (e.message(), true),
  };
  drop(launch.temp);
  let (o, e) = crate::command::offload::render_bytes(
    &f.stdout.render().bytes,
    f.outcome.stdout_bytes,
    &f.stderr.render().bytes,
    f.outcome.stderr_bytes,
    limits,
  );
  let streams = [
    Shown {
      name: "stdout",
      text: &o.text,
      truncation: &o.truncation,
      binary: o.binary,
    },
    Shown {
      name: "stderr",
      text: &e.text,
      truncation: &e.truncation,
      binary: e.binary,
    },
  ];
  let out = &f.outcome;
  let mut text = format_finished(
    &streams,
    out.exit_code,
    out.signal.as_deref(),
    limits.max_bytes,
    &LogStatus::NotNeeded,
  );
  if let Some(err) = &out.error {
    text.push_str("\n\n");
    text.push_str(&err.message());
  }
  (text, out.exit_code != 0 || out.error.is_some())
}

impl ServerHandler for ExecMcp {
  fn get_info(&self) -> InitializeResult {
    InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
      .with_server_info(Implementation::new("exec-native", env!("CARGO_PKG_VERSION")))
      .with_instructions(
        "bash runs shell commands (stateless: a fresh bash -c per call); commands that outlive their timeout move to the background, manage them with check_pid / kill_pid. execute_code runs a snippet in a language.",
      )
  }

  async fn list_tools(
    &self,
    _request: Option<PaginatedRequestParams>,
    _context: RequestContext<RoleServer>,
  ) -> Result<ListToolsResult, ErrorData> {
    Ok(ListToolsResult::with_all_items(tools()))
  }

  async fn call_tool(
    &self,
    request: CallToolRequestParams,
    _context: RequestContext<RoleServer>,
  ) -> Result<CallToolResponse, ErrorData> {
    let args = Value::Object(request.arguments.unwrap_or_default());
    match request.name.as_ref() {
      TOOL_NAME => {
        let base = CommandOptions::new(&self.config.cwd);
        let r = tool::call(&self.runner, &args, base).await;
        Ok(result(r.text, r.is_error))
      }
      "execute_code" => {
        let (text, is_error) = execute_code(&self.config, &args).await;
        Ok(result(text, is_error))
      }
      other => Err(ErrorData::invalid_params(
        format!("no tool named '{other}' (tools: bash, execute_code)"),
        None,
      )),
    }
  }
}

/// Serve one MCP connection over `transport` until the peer closes it; then
/// kill what the connection's runner still runs.
pub async fn serve_on<T, E, A>(config: McpConfig, transport: T) -> Result<(), ExecError>
where
  T: rmcp::transport::IntoTransport<RoleServer, E, A>,
  E: std::error::Error + Send + Sync + 'static,
{
  let handler = ExecMcp::new(config);
  let runner = handler.runner.clone();
  let io = |e: String| ExecError::new(ErrorCode::EIO, format!("MCP: {e}"));
  let service = handler
    .serve(transport)
    .await
    .map_err(|e| io(e.to_string()))?;
  let r = service.waiting().await.map_err(|e| io(e.to_string()));
  runner.close().await;
  r.map(|_| ())
}

/// Serve MCP over stdin/stdout (`exec-native mcp`).
pub async fn serve_stdio(config: McpConfig) -> Result<(), ExecError> {
  serve_on(config, rmcp::transport::stdio()).await
}

#[cfg(test)]
mod tests {
  use super::*;

  fn text_of(r: &CallToolResult) -> String {
    r.content
      .iter()
      .filter_map(|c| match c {
        ContentBlock::Text(t) => Some(t.text.clone()),
        _ => None,
      })
      .collect()
  }

  #[tokio::test]
  async fn a_real_client_session() {
    let dir = tempfile::tempdir().unwrap();
    let config = McpConfig {
      cwd: dir.path().to_owned(),
      runner: RunnerConfig {
        output_dir: dir.path().to_owned(),
        ..Default::default()
      },
      toolchain: Toolchain::default(),
    };
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let server = tokio::spawn(serve_on(config, server_io));
    let client = ().serve(client_io).await.expect("initialize");
    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().unwrap().name, "exec-native");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["bash", "execute_code"]);
    assert_eq!(
      Value::Object((*tools[0].input_schema).clone()),
      tool::tool_parameters()
    );

    let call = |name: &'static str, args: Value| {
      CallToolRequestParams::new(name).with_arguments(object(args))
    };
    let r = client
      .call_tool(call(
        "bash",
        json!({"command": "echo hello; echo oops >&2; exit 3"}),
      ))
      .await
      .unwrap();
    assert_eq!(
      text_of(&r),
      "stdout:\nhello\n\nstderr:\noops\n\nexit code: 3"
    );
    assert_eq!(r.is_error, Some(true));

    let r = client
      .call_tool(call("bash", json!({"command": "sleep 5", "timeout": 200})))
      .await
      .unwrap();
    let t = text_of(&r);
    assert!(
      t.starts_with("[Command backgrounded after 0.2s timeout (pid "),
      "{t}"
    );
    let pid: u64 = t
      .split("(pid ")
      .nth(1)
      .unwrap()
      .split(')')
      .next()
      .unwrap()
      .parse()
      .unwrap();
    let r = client
      .call_tool(call("bash", json!({"kill_pid": pid})))
      .await
      .unwrap();
    assert!(text_of(&r).starts_with(&format!("[Process {pid} killed (SIGTERM")));

    let r = client
      .call_tool(call(
        "execute_code",
        json!({"code": "print(6*7)", "language": "python"}),
      ))
      .await
      .unwrap();
    assert_eq!(text_of(&r), "stdout:\n42\n\nexit code: 0");
    assert_eq!(r.is_error, Some(false));

    let r = client
      .call_tool(call("bash", json!({"command": "ls", "check_pid": 1})))
      .await
      .unwrap();
    assert_eq!(
      text_of(&r),
      "exec: give exactly one of command, check_pid, kill_pid (EINVAL)"
    );
    assert!(client.call_tool(call("nope", json!({}))).await.is_err());

    client.cancel().await.unwrap();
    server.await.unwrap().unwrap();
  }
}
