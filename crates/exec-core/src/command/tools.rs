//! The model's tool set, beyond the seed's single `bash` definition
//! ([`super::tool`]): `bash` with `workdir` and an output budget,
//! `exec_command` / `write_stdin` for interactive commands (codex's unified
//! exec), their descriptions (which say what the model must know: a fresh
//! shell per call, stdin at EOF, background jobs, the limits, the sandbox),
//! and the shapes each harness wants ([`ToolFormat`]). The MCP server and
//! `commandTools()` both take their definitions from here.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::error::ExecError;

use super::truncate::format_size;
use super::{OutputLimits, DEFAULT_TIMEOUT};

/// Bytes a token stands for when the model gives `max_output_tokens`.
pub const BYTES_PER_TOKEN: usize = 4;

/// Where the tools run and what they allow: the defaults and caps the
/// descriptions state and the calls are held to.
#[derive(Debug, Clone)]
pub struct ToolSettings {
  /// `timeout` of `bash` when the call gives none.
  pub default_timeout: Duration,
  /// The longest wait a call may ask for (`None`: any, and 0 waits for the
  /// end). An MCP client gives up on a request after 60 s by default.
  pub max_timeout: Option<Duration>,
  /// The output shown per call when the call names no budget.
  pub limits: OutputLimits,
  /// The largest budget a call may ask for, in bytes.
  pub max_output_bytes: usize,
  /// Commands share one shell (`cd`, `export` carry over).
  pub stateful: bool,
  /// What the sandbox allows, in a sentence (`None`: no sandbox).
  pub sandbox: Option<String>,
  /// The directory commands run in, named in the descriptions.
  pub cwd: Option<PathBuf>,
}

impl ToolSettings {
  /// The JavaScript API's: the runner's timeout (120 s), no cap.
  pub fn api() -> Self {
    ToolSettings {
      default_timeout: DEFAULT_TIMEOUT,
      max_timeout: None,
      limits: OutputLimits::default(),
      max_output_bytes: 4 * OutputLimits::default().max_bytes,
      stateful: false,
      sandbox: None,
      cwd: None,
    }
  }

  /// An MCP server's: an answer well before a client's 60 s request
  /// timeout (30 s by default, at most 50 s; codex yields after 10 s).
  pub fn mcp() -> Self {
    ToolSettings {
      default_timeout: MCP_DEFAULT_TIMEOUT,
      max_timeout: Some(MCP_MAX_TIMEOUT),
      ..ToolSettings::api()
    }
  }

  /// The wait of a call: its `timeout` (0: no timeout), else `fallback`
  /// (the runner's); held to the cap.
  pub fn timeout(&self, asked: Option<Duration>, fallback: Option<Duration>) -> Option<Duration> {
    let t = match asked {
      None => fallback,
      Some(t) if t.is_zero() => None,
      Some(t) => Some(t),
    };
    match (t, self.max_timeout) {
      (None, cap) => cap,
      (Some(t), Some(cap)) => Some(t.min(cap)),
      (Some(t), None) => Some(t),
    }
  }

  /// The output limits of a call that asked for `tokens` (else `fallback`,
  /// the runner's), held to the cap.
  pub fn output_limits(&self, tokens: Option<u64>, fallback: OutputLimits) -> OutputLimits {
    match tokens {
      None => fallback,
      Some(t) => OutputLimits {
        max_lines: fallback.max_lines,
        mode: fallback.mode,
        max_bytes: (t.min(u64::MAX / 8) as usize)
          .saturating_mul(BYTES_PER_TOKEN)
          .clamp(1, self.max_output_bytes),
      },
    }
  }
}

/// What a sandbox allows, in the words of the tool descriptions.
pub fn sandbox_summary(
  p: &crate::process::sandbox::SandboxPolicy,
  cwd: &std::path::Path,
) -> String {
  use crate::process::sandbox::SandboxMode;
  let writes = match p.mode {
    SandboxMode::ReadOnly => "Commands run in a read-only sandbox: they can read files but write none (only /dev/null and the like).".to_owned(),
    SandboxMode::WorkspaceWrite => {
      let mut roots = vec![cwd.display().to_string()];
      roots.extend(p.writable_roots.iter().map(|r| r.display().to_string()));
      if !p.exclude_tmp {
        roots.push("/tmp".into());
      }
      format!(
        "Commands run in a sandbox: they can write only under {} (each .git stays read-only).",
        roots.join(", ")
      )
    }
  };
  let net = if p.network {
    "The network is allowed."
  } else {
    "The network is blocked (no downloads, no package installs, no connections, localhost included)."
  };
  format!("{writes} {net}")
}

/// `bash`'s wait before backgrounding over MCP, when the call gives none.
pub const MCP_DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest wait a call may ask for over MCP.
pub const MCP_MAX_TIMEOUT: Duration = Duration::from_secs(50);

/// The names of the tool set, in order.
pub const TOOL_NAMES: [&str; 3] = ["bash", "exec_command", "write_stdin"];

fn secs(d: Duration) -> String {
  crate::process::supervise::format_duration(d)
}

fn where_it_runs(s: &ToolSettings) -> String {
  match &s.cwd {
    Some(c) => format!(" in {}", c.display()),
    None => String::new(),
  }
}

fn sandbox_sentence(s: &ToolSettings) -> String {
  match &s.sandbox {
    Some(text) => format!("\n- Sandbox: {text} A denied write or connection fails with an error and the result says so; no argument widens the sandbox."),
    None => String::new(),
  }
}

/// What the model must know about `bash`.
pub fn bash_description(s: &ToolSettings) -> String {
  let shell = if s.stateful {
    "Stateful: all calls share one shell state, as in one terminal: `cd`, `export`, variables, functions, aliases and shell options carry over to the next call (workdir is a `cd` that carries over too). Each command still runs in its own bash process; one that moves to the background keeps its changes to itself.".to_owned()
  } else {
    "Each call is a fresh `bash -c`: `cd`, `export` and functions do not carry over to the next call (use workdir, or `cd dir && cmd` in one call).".to_owned()
  };
  let wait = match s.max_timeout {
    Some(cap) => format!("default {}, at most {}", secs(s.default_timeout), secs(cap)),
    None => format!("default {}", secs(s.default_timeout)),
  };
  format!(
    "Run a bash command{} and return its output (stdout, stderr, exit code).\n\
- {shell}\n\
- stdin is /dev/null: a command that reads input gets EOF at once. For interactive programs (prompts, REPLs, anything needing keys or Ctrl-C) use exec_command and write_stdin.\n\
- Output is cleaned of terminal escapes and cut to the last {} lines / {} (both streams together; max_output_tokens sets another budget, up to {}). truncation \"head_tail\" keeps the first lines too (half the budget; a compiler's first error is at the top) and marks the cut: [... N lines (size) omitted ...]. When anything is cut, the full output is saved to a log file whose path the result gives.\n\
- A command still running after `timeout` ms ({wait}) is not killed: it moves to the background and the result gives its pid. Processes a command leaves running with `&` are taken over and listed with their pids. Call again with check_pid (its new output since the last check) or kill_pid (stop it and its children). Give exactly one of command, check_pid, kill_pid.{}",
    where_it_runs(s),
    s.limits.max_lines,
    format_size(s.limits.max_bytes),
    format_size(s.max_output_bytes),
    sandbox_sentence(s),
  )
}

/// What the tools say of `tty`, whose default is the platform's
/// ([`super::interactive::DEFAULT_TTY`]).
#[cfg(not(windows))]
const TTY_SENTENCE: &str = "tty (default true) gives it a terminal;";
#[cfg(windows)]
const TTY_SENTENCE: &str =
  "tty (default false on Windows) gives it a terminal (a ConPTY console, whose output is its screen's rendering);";
#[cfg(not(windows))]
const TTY_PARAMETER: &str = "A terminal (true, the default) or pipes with stdin open (false)";
#[cfg(windows)]
const TTY_PARAMETER: &str =
  "Pipes with stdin open (false, the default on Windows) or a terminal (true: a ConPTY console)";

fn exec_command_description(s: &ToolSettings) -> String {
  format!(
    "Start an interactive command{} (bash -c) and return its output once it ends, waits for input, or yield_time_ms passes. While it runs the answer gives a session_id: send keys and read new output with write_stdin. Use it for prompts, REPLs and programs that need Ctrl-C; use bash for everything else. {} with tty false it gets pipes, and \"\\u0004\" in write_stdin closes its stdin.{}",
    where_it_runs(s),
    TTY_SENTENCE,
    sandbox_sentence(s),
  )
}

const WRITE_STDIN_DESCRIPTION: &str = "Send keys to a session of exec_command and return the output since the last call (an empty chars only polls). \"\\r\" is Enter, \"\\u0003\" Ctrl-C, \"\\u0004\" Ctrl-D (on pipes it closes stdin: EOF). The answer comes when the command ends, waits for input again, or yield_time_ms passes.";

fn int(description: String) -> Value {
  json!({ "type": "integer", "minimum": 0, "description": description })
}

fn bash_parameters(s: &ToolSettings) -> Value {
  let wait = match s.max_timeout {
    Some(cap) => format!(
      "Milliseconds to wait before the command moves to the background (default {}, at most {}; 0: the most)",
      s.default_timeout.as_millis(),
      cap.as_millis()
    ),
    None => format!(
      "Milliseconds to wait before the command moves to the background (default {}; 0: wait for the end)",
      s.default_timeout.as_millis()
    ),
  };
  json!({
    "type": "object",
    "properties": {
      "command": { "type": "string", "description": "The bash command to run" },
      "timeout": int(wait),
      "workdir": { "type": "string", "description": if s.stateful { format!("Directory to cd to before the command (it carries over to later calls), absolute or relative to the server's working directory{} (default: where the last call left the shell)", where_it_runs(s)) } else { format!("Directory to run in, absolute or relative to the server's working directory{} (default: that directory)", where_it_runs(s)) } },
      "max_output_tokens": int(format!("Output budget in tokens (about {BYTES_PER_TOKEN} bytes each; default {}, at most {})", s.limits.max_bytes / BYTES_PER_TOKEN, s.max_output_bytes / BYTES_PER_TOKEN)),
      "truncation": truncation_parameter(s),
      "check_pid": int("A background process's pid: return its state and new output".into()),
      "kill_pid": int("A background process's pid: kill it and its children, return its final output".into()),
    },
    "additionalProperties": false
  })
}

fn truncation_parameter(s: &ToolSettings) -> Value {
  json!({
    "type": "string",
    "enum": ["tail", "head_tail"],
    "description": format!("Which part of a long output to show: tail (the last lines) or head_tail (the first lines and the last, the middle marked as omitted; the budget is shared between them). Default: {}", s.limits.mode.as_str()),
  })
}

fn exec_command_parameters(s: &ToolSettings) -> Value {
  json!({
    "type": "object",
    "properties": {
      "cmd": { "type": "string", "description": "The command to start" },
      "workdir": { "type": "string", "description": "Directory to run in (default: the server's working directory)" },
      "tty": { "type": "boolean", "description": TTY_PARAMETER },
      "yield_time_ms": int("Milliseconds to wait for output before answering (default 10000, at most 50000)".into()),
      "max_output_tokens": int(format!("Output budget of each answer in tokens (about {BYTES_PER_TOKEN} bytes each)")),
      "truncation": truncation_parameter(s),
    },
    "required": ["cmd"],
    "additionalProperties": false
  })
}

fn write_stdin_parameters() -> Value {
  json!({
    "type": "object",
    "properties": {
      "session_id": int("The session_id exec_command gave".into()),
      "chars": { "type": "string", "description": "Keys to send (default: none, only read new output)" },
      "yield_time_ms": int("Milliseconds to wait for output after the write (default 250, at most 50000)".into()),
      "close_stdin": { "type": "boolean", "description": "After the write, close stdin so the program reads EOF (default false)" },
    },
    "required": ["session_id"],
    "additionalProperties": false
  })
}

/// The JSON schema of `bash`'s `structuredContent`.
pub fn bash_output_schema() -> Value {
  json!({
    "type": "object",
    "properties": {
      "exit_code": { "type": ["integer", "null"], "description": "null while it runs, or for a process this server did not start" },
      "signal": { "type": ["string", "null"] },
      "pid": { "type": ["integer", "null"] },
      "running": { "type": "boolean" },
      "backgrounded": { "type": "boolean", "description": "It runs on in the background: check_pid / kill_pid" },
      "truncated": { "type": "boolean" },
      "log_path": { "type": ["string", "null"], "description": "Every byte of the output" },
      "adopted": {
        "type": "array",
        "description": "Processes it left running, now background jobs",
        "items": {
          "type": "object",
          "properties": { "pid": { "type": "integer" }, "command": { "type": "string" } },
          "required": ["pid", "command"]
        }
      }
    },
    "required": ["exit_code", "signal", "pid", "running", "backgrounded", "truncated", "log_path", "adopted"]
  })
}

/// One tool, harness-neutral.
#[derive(Debug, Clone)]
pub struct ToolDef {
  pub name: &'static str,
  pub title: &'static str,
  pub description: String,
  pub parameters: Value,
  pub output_schema: Option<Value>,
  /// MCP's hints: may destroy data, talks to the open world.
  pub destructive: bool,
  pub open_world: bool,
}

/// `bash`, `exec_command`, `write_stdin`.
pub fn tool_set(s: &ToolSettings) -> Vec<ToolDef> {
  vec![
    ToolDef {
      name: "bash",
      title: "Run a shell command",
      description: bash_description(s),
      parameters: bash_parameters(s),
      output_schema: Some(bash_output_schema()),
      destructive: true,
      open_world: true,
    },
    ToolDef {
      name: "exec_command",
      title: "Start an interactive command",
      description: exec_command_description(s),
      parameters: exec_command_parameters(s),
      output_schema: None,
      destructive: true,
      open_world: true,
    },
    ToolDef {
      name: "write_stdin",
      title: "Send keys to an interactive command",
      description: WRITE_STDIN_DESCRIPTION.to_owned(),
      parameters: write_stdin_parameters(),
      output_schema: None,
      destructive: true,
      open_world: true,
    },
  ]
}

/// The shape a harness wants its tools in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
  /// `{ type: 'function', name, description, parameters, strict }`
  OpenAiResponses,
  /// `{ type: 'function', function: { name, description, parameters, strict } }`
  OpenAiChat,
  /// `{ name, description, input_schema }`
  Anthropic,
  /// `{ name, title, description, inputSchema, outputSchema, annotations }`
  Mcp,
}

impl std::str::FromStr for ToolFormat {
  type Err = ExecError;
  fn from_str(s: &str) -> Result<Self, ExecError> {
    Ok(match s {
      "openai-responses" => ToolFormat::OpenAiResponses,
      "openai-chat" => ToolFormat::OpenAiChat,
      "anthropic" => ToolFormat::Anthropic,
      "mcp" => ToolFormat::Mcp,
      other => {
        return Err(ExecError::invalid(format!(
          "must be 'openai-responses', 'openai-chat', 'anthropic' or 'mcp', got '{other}'"
        )))
      }
    })
  }
}

/// OpenAI's strict mode: every property required, the optional ones
/// nullable (the model sends null for what it leaves out).
pub fn strict_schema(schema: &Value) -> Value {
  let mut out = schema.clone();
  let required: Vec<String> = schema["required"]
    .as_array()
    .map(|a| {
      a.iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
    })
    .unwrap_or_default();
  if let Some(props) = out["properties"].as_object_mut() {
    let names: Vec<String> = props.keys().cloned().collect();
    for (name, p) in props.iter_mut() {
      if required.contains(name) {
        continue;
      }
      if let Some(t) = p["type"].as_str().map(str::to_owned) {
        p["type"] = json!([t, "null"]);
      }
      // an enum must allow the null that stands for "not given"
      if let Some(values) = p["enum"].as_array_mut() {
        values.push(Value::Null);
      }
    }
    out["required"] = json!(names);
  }
  out["additionalProperties"] = json!(false);
  out
}

/// The tool set in `format` (`strict`: OpenAI's strict mode).
pub fn definitions(s: &ToolSettings, format: ToolFormat, strict: bool) -> Vec<Value> {
  tool_set(s)
    .into_iter()
    .map(|t| {
      let params = if strict {
        strict_schema(&t.parameters)
      } else {
        t.parameters.clone()
      };
      match format {
        ToolFormat::OpenAiResponses => json!({
          "type": "function",
          "name": t.name,
          "description": t.description,
          "parameters": params,
          "strict": strict,
        }),
        ToolFormat::OpenAiChat => json!({
          "type": "function",
          "function": {
            "name": t.name,
            "description": t.description,
            "parameters": params,
            "strict": strict,
          }
        }),
        ToolFormat::Anthropic => json!({
          "name": t.name,
          "description": t.description,
          "input_schema": params,
        }),
        ToolFormat::Mcp => {
          let mut m = Map::new();
          m.insert("name".into(), json!(t.name));
          m.insert("title".into(), json!(t.title));
          m.insert("description".into(), json!(t.description));
          m.insert("inputSchema".into(), params);
          if let Some(o) = &t.output_schema {
            m.insert("outputSchema".into(), o.clone());
          }
          m.insert(
            "annotations".into(),
            json!({
              "title": t.title,
              "readOnlyHint": false,
              "destructiveHint": t.destructive,
              "idempotentHint": false,
              "openWorldHint": t.open_world,
            }),
          );
          Value::Object(m)
        }
      }
    })
    .collect()
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn mcp_waits_are_capped_under_a_clients_minute() {
    let s = ToolSettings::mcp();
    let d = Some(s.default_timeout);
    assert_eq!(s.timeout(None, d), Some(Duration::from_secs(30)));
    assert_eq!(
      s.timeout(Some(Duration::from_secs(600)), d),
      Some(MCP_MAX_TIMEOUT)
    );
    assert_eq!(s.timeout(Some(Duration::ZERO), d), Some(MCP_MAX_TIMEOUT));
    assert_eq!(ToolSettings::api().timeout(Some(Duration::ZERO), d), None);
    let base = OutputLimits::default();
    assert_eq!(
      s.output_limits(Some(1_000_000), base).max_bytes,
      s.max_output_bytes
    );
    assert_eq!(s.output_limits(Some(10), base).max_bytes, 40);
  }

  #[test]
  fn strict_makes_every_property_required_and_optional_ones_nullable() {
    let d = definitions(&ToolSettings::api(), ToolFormat::OpenAiResponses, true);
    let p = &d[0]["parameters"];
    assert_eq!(p["required"].as_array().unwrap().len(), 7);
    assert_eq!(
      p["properties"]["truncation"]["enum"],
      json!(["tail", "head_tail", null])
    );
    assert_eq!(
      p["properties"]["command"]["type"],
      json!(["string", "null"])
    );
    assert_eq!(p["additionalProperties"], json!(false));
    let ex = &d[1]["parameters"];
    assert_eq!(ex["properties"]["cmd"]["type"], json!("string"));
  }
}
