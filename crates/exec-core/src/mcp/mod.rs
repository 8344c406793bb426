//! `exec-native mcp`: a Model Context Protocol server (stdio) on the official
//! Rust SDK (`rmcp`). Its tools:
//!
//! - `bash`, `exec_command`, `write_stdin`: the command tool set as
//!   [`crate::command::tools`] defines it, on one [`CommandRunner`] per
//!   connection (background jobs and sessions live as long as it);
//! - `execute_code`: `{ code, language, timeout? }` in a fresh process
//!   (bash, javascript, typescript, python), with the same text format.
//!
//! A call runs until its answer; `notifications/cancelled` kills what it
//! started; a call with a `progressToken` gets `notifications/progress`
//! while it runs. [`transport`] answers malformed lines as JSON-RPC says.

pub mod transport;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
  CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
  InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
  ServerCapabilities, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use crate::buffer::HeadTailBuffer;
use crate::command::format::{format_finished, Shown};
use crate::command::offload::LogStatus;
use crate::command::tool::{self, ToolOutcome};
use crate::command::tools::{self, ToolFormat, ToolSettings, TOOL_NAMES};
use crate::command::{
  CallOptions, CommandDefaults, CommandRunner, CommandSpec, OutputLimits, RunnerConfig,
};
use crate::error::{ErrorCode, ExecError};
use crate::language::{self, Language, Toolchain};
use crate::process::supervise::{run, RunPolicy};
use crate::CancellationToken;

/// Settings of the MCP server.
#[derive(Debug, Clone)]
pub struct McpConfig {
  /// Working directory of every command and code run (a call's `workdir`
  /// is relative to it).
  pub cwd: PathBuf,
  pub runner: RunnerConfig,
  pub toolchain: Toolchain,
  /// The environment, limits and sandbox of every command (its `cwd` is
  /// `cwd`); a call can only narrow them.
  pub defaults: CommandDefaults,
  /// The waits, budgets and descriptions of the tools.
  pub settings: ToolSettings,
}

impl McpConfig {
  /// A server for `cwd` with the defaults: no sandbox, MCP's waits.
  pub fn new(cwd: PathBuf) -> Self {
    let defaults = CommandDefaults {
      process: crate::process::ProcessOptions::in_dir(cwd.clone()),
      run: crate::process::RunOptions {
        timeout: Some(tools::MCP_DEFAULT_TIMEOUT),
        ..crate::process::RunOptions::command()
      },
      ..Default::default()
    };
    McpConfig {
      settings: ToolSettings {
        cwd: Some(cwd.clone()),
        ..ToolSettings::mcp()
      },
      cwd,
      runner: RunnerConfig::default(),
      toolchain: Toolchain::default(),
      defaults,
    }
  }

  /// Refuse to start rather than fail every call: the directory must exist.
  pub fn check(&self) -> Result<(), ExecError> {
    crate::process::spec::check_cwd(&self.cwd)?;
    if self.runner.stateful && crate::platform::WINDOWS {
      return Err(ExecError::new(
        crate::ErrorCode::ENOTSUP,
        "--stateful is not supported on Windows yet: each command runs in a fresh shell there",
      ));
    }
    if self.runner.shell == crate::command::Shell::Cmd {
      if self.runner.stateful {
        return Err(ExecError::invalid(
          "--stateful needs bash: cmd runs each command in its own process",
        ));
      }
      if !crate::platform::WINDOWS {
        return Err(ExecError::new(
          crate::ErrorCode::ENOENT,
          "--shell cmd: cmd is Windows' shell, there is no cmd.exe on this system: use --shell bash",
        ));
      }
    }
    if self.runner.shell == crate::command::Shell::PowerShell {
      if self.runner.stateful {
        return Err(ExecError::invalid(
          "--stateful needs bash: PowerShell runs each command in its own process",
        ));
      }
      crate::language::find_powershell(&self.defaults.process.env, &self.cwd).map_err(|_| {
        ExecError::new(
          crate::ErrorCode::ENOENT,
          "--shell powershell: PowerShell was not found (neither pwsh nor powershell is on PATH): install PowerShell 7 (https://aka.ms/powershell) or use --shell bash",
        )
      })?;
    }
    if self.runner.stateful {
      crate::command::stateful::check_writable(
        &self.runner.output_dir,
        self.defaults.process.sandbox.as_ref(),
        &self.cwd,
      )?;
    }
    Ok(())
  }
}

/// Timeout of `execute_code` when the call gives none.
pub const EXECUTE_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a call with a `progressToken` hears that it still runs.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

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

  /// The options every command of a call starts from.
  fn base(&self) -> Result<CommandSpec, ExecError> {
    let cwd = self.config.cwd.clone();
    self
      .config
      .defaults
      .merge(CallOptions::default(), move || Ok(cwd))
  }
}

/// The tools, as `tools/list` gives them.
pub fn tools(settings: &ToolSettings) -> Vec<Tool> {
  let mut list: Vec<Tool> = tools::definitions(settings, ToolFormat::Mcp, false)
    .into_iter()
    .map(|d| serde_json::from_value(d).expect("a tool definition is a Tool"))
    .collect();
  let code = json!({
    "name": "execute_code",
    "title": "Run a code snippet",
    "description": "Run code in a fresh process and return its output (same format and limits as bash). Languages: bash, javascript (node), typescript, python (python3).",
    "inputSchema": {
      "type": "object",
      "properties": {
        "code": { "type": "string", "description": "The code to run" },
        "language": { "type": "string", "enum": ["bash", "javascript", "typescript", "python"], "description": "Its language" },
        "timeout": { "type": "integer", "minimum": 0, "description": "Timeout in ms; the process is killed after it (default: 30000)" }
      },
      "required": ["code", "language"],
      "additionalProperties": false
    },
    "annotations": { "title": "Run a code snippet", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true }
  });
  list.push(serde_json::from_value(code).expect("a tool definition is a Tool"));
  list
}

fn result(outcome: ToolOutcome) -> CallToolResponse {
  let content = vec![ContentBlock::text(outcome.result.text)];
  let mut r = if outcome.result.is_error {
    CallToolResult::error(content)
  } else {
    CallToolResult::success(content)
  };
  r.structured_content = outcome.structured;
  r.into()
}

fn text_outcome(text: String, is_error: bool) -> ToolOutcome {
  ToolOutcome {
    result: tool::ToolResult { text, is_error },
    structured: None,
  }
}

/// `execute_code`'s arguments: what to launch and the timeout.
fn execute_args(
  config: &McpConfig,
  args: &Value,
) -> Result<(language::Launch, Duration), ExecError> {
  if let Value::Object(m) = args {
    tool::reject_unknown(m, &["code", "language", "timeout"])?;
  }
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
  let env = crate::command::command_env(config.defaults.process.env.clone());
  let launch = language::prepare(lang, code, &config.cwd, &env, &config.toolchain)?;
  Ok((launch, timeout))
}

/// `execute_code`: run, capture, format like the command tool.
pub async fn execute_code(
  config: &McpConfig,
  args: &Value,
  cancel: &CancellationToken,
) -> (String, bool) {
  let parsed = execute_args(config, args);
  let (launch, timeout) = match parsed {
    Ok(p) => p,
    Err(e) => return (e.message(), true),
  };
  let mut spec = launch.spec;
  spec.process.cwd = Some(config.cwd.clone());
  spec.process.sandbox = config.defaults.process.sandbox.clone();
  spec.process.limits = config.defaults.process.limits.clone();
  let limits = OutputLimits::default();
  spec.run.timeout = (!timeout.is_zero()).then_some(timeout);
  spec.run.max_output_bytes = limits.max_bytes * 2;
  let policy = RunPolicy {
    owner: config.runner.owner,
    ..Default::default()
  };
  let cap = spec.run.max_output_bytes;
  let f = match run(
    &spec,
    &policy,
    HeadTailBuffer::new(cap),
    HeadTailBuffer::new(cap),
    cancel,
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

/// Tell the client, every [`PROGRESS_EVERY`], that the call still runs.
fn progress_ticker(
  peer: Peer<RoleServer>,
  token: rmcp::model::ProgressToken,
) -> tokio::task::JoinHandle<()> {
  tokio::spawn(async move {
    let started = tokio::time::Instant::now();
    loop {
      tokio::time::sleep(PROGRESS_EVERY).await;
      let secs = started.elapsed().as_secs();
      let note = ProgressNotificationParam::new(token.clone(), secs as f64)
        .with_message(format!("still running after {secs} s"));
      if peer.notify_progress(note).await.is_err() {
        return;
      }
    }
  })
}

fn instructions(settings: &ToolSettings) -> String {
  let shell = if settings.stateful {
    "one bash session shared by all calls (cd and export carry over)"
  } else {
    "a fresh bash -c per call (cd and export do not carry over)"
  };
  format!(
    "bash runs shell commands ({shell}); a command still running after its timeout moves to the background: manage it with check_pid / kill_pid. exec_command and write_stdin run interactive commands (prompts, REPLs). execute_code runs a snippet in a language.{}",
    settings
      .sandbox
      .as_ref()
      .map(|s| format!(" Sandbox: {s}"))
      .unwrap_or_default()
  )
}

impl ServerHandler for ExecMcp {
  fn get_info(&self) -> InitializeResult {
    InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
      .with_server_info(Implementation::new(
        "exec-native",
        env!("CARGO_PKG_VERSION"),
      ))
      .with_instructions(match self.config.runner.shell {
        crate::command::Shell::Bash => instructions(&self.config.settings),
        crate::command::Shell::PowerShell => format!(
          "{} The bash and exec_command tools run their commands in PowerShell (-NoProfile -NonInteractive -Command), not bash: write PowerShell.",
          instructions(&self.config.settings)
        ),
        crate::command::Shell::Cmd => format!(
          "{} The bash and exec_command tools run their commands in Windows' cmd.exe (cmd /d /s /c), not bash: write cmd syntax.",
          instructions(&self.config.settings)
        ),
      })
  }

  async fn list_tools(
    &self,
    _request: Option<PaginatedRequestParams>,
    _context: RequestContext<RoleServer>,
  ) -> Result<ListToolsResult, ErrorData> {
    Ok(ListToolsResult::with_all_items(tools(
      &self.config.settings,
    )))
  }

  async fn call_tool(
    &self,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
  ) -> Result<CallToolResponse, ErrorData> {
    let args = Value::Object(request.arguments.unwrap_or_default());
    let name = request.name.as_ref();
    if name != "execute_code" && !TOOL_NAMES.contains(&name) {
      return Err(ErrorData::invalid_params(
        format!(
          "no tool named '{name}' (tools: {}, execute_code)",
          TOOL_NAMES.join(", ")
        ),
        None,
      ));
    }
    let ticker = context
      .meta
      .get_progress_token()
      .map(|t| progress_ticker(context.peer.clone(), t));
    let cancel = context.ct.clone();
    let outcome = if name == "execute_code" {
      let (text, is_error) = execute_code(&self.config, &args, &cancel).await;
      text_outcome(text, is_error)
    } else {
      match self.base() {
        Ok(mut base) => {
          base.cancel = Some(cancel);
          tool::dispatch(&self.runner, name, &args, base, &self.config.settings)
            .await
            .unwrap_or_else(|e| text_outcome(e.message(), true))
        }
        Err(e) => text_outcome(e.message(), true),
      }
    };
    if let Some(t) = ticker {
      t.abort();
    }
    Ok(result(outcome))
  }
}

/// Serve one MCP connection over `transport` until the peer closes it; then
/// kill what the connection's runner still runs.
pub async fn serve_on<T, E, A>(config: McpConfig, transport: T) -> Result<(), ExecError>
where
  T: rmcp::transport::IntoTransport<RoleServer, E, A>,
  E: std::error::Error + Send + Sync + 'static,
{
  config.check()?;
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
  config.check()?;
  let transport = transport::LineTransport::new(tokio::io::stdin(), tokio::io::stdout());
  serve_on(config, transport).await
}

#[cfg(test)]
mod tests;
