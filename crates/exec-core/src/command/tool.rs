//! The command tool as a model calls it: the seed's tool definition (name,
//! description, JSON schema of `{ command, timeout?, check_pid?, kill_pid? }`)
//! and [`call`], which dispatches one call's arguments to a [`CommandRunner`].

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::ExecError;

use super::tools::ToolSettings;
use super::{CommandRunner, CommandSpec};

/// The tool's name.
pub const TOOL_NAME: &str = "bash";

/// The tool's description, as the seed gives it.
pub const TOOL_DESCRIPTION: &str = "Execute a bash command. Output truncated to last 2000 lines or 50KB; if truncated, full output saved to temp file. Commands exceeding timeout are auto-backgrounded.";

/// The JSON schema of the tool's arguments, exactly as the seed's "Tool Schema".
pub fn tool_parameters() -> Value {
  json!({
    "type": "object",
    "properties": {
      "command": { "type": "string", "description": "The bash command to execute" },
      "timeout": { "type": "integer", "description": "Timeout in ms before auto-backgrounding (default: 120000)" },
      "check_pid": { "type": "integer", "description": "Check on a backgrounded process, return new output" },
      "kill_pid": { "type": "integer", "description": "Kill a backgrounded process, return final output" }
    }
  })
}

/// `{ name, description, parameters }`.
pub fn tool_definition() -> Value {
  json!({
    "name": TOOL_NAME,
    "description": TOOL_DESCRIPTION,
    "parameters": tool_parameters(),
  })
}

/// What the model reads back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
  pub text: String,
  pub is_error: bool,
}

impl ToolResult {
  fn error(e: ExecError) -> Self {
    ToolResult {
      text: e.message(),
      is_error: true,
    }
  }
}

/// One call's arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCall {
  Run {
    command: String,
    timeout: Option<Duration>,
  },
  Check(u32),
  Kill(u32),
}

pub(crate) fn integer(
  args: &serde_json::Map<String, Value>,
  key: &str,
) -> Result<Option<u64>, ExecError> {
  match args.get(key) {
    None | Some(Value::Null) => Ok(None),
    Some(v) => v
      .as_u64()
      .or_else(|| {
        v.as_f64()
          .filter(|f| f.fract() == 0.0 && *f >= 0.0)
          .map(|f| f as u64)
      })
      .map(Some)
      .ok_or_else(|| ExecError::invalid(format!("{key} must be a non-negative integer, got {v}"))),
  }
}

fn pid(args: &serde_json::Map<String, Value>, key: &str) -> Result<Option<u32>, ExecError> {
  match integer(args, key)? {
    None => Ok(None),
    Some(n) if (1..=i32::MAX as u64).contains(&n) => Ok(Some(n as u32)),
    Some(n) => Err(ExecError::invalid(format!("{key} must be a pid, got {n}"))),
  }
}

/// Check a call's arguments: exactly one of `command`, `check_pid`, `kill_pid`.
pub fn parse_call(args: &Value) -> Result<ToolCall, ExecError> {
  parse_args(args).map(|(c, _)| c)
}

/// The arguments of a call beyond the seed's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunExtras {
  /// `workdir`: where the command runs (relative to the runner's cwd).
  pub workdir: Option<String>,
  /// `max_output_tokens`: the output budget the model asks for.
  pub max_output_tokens: Option<u64>,
  /// `truncation`: `tail` or `head_tail`.
  pub truncation: Option<super::TruncationMode>,
}

/// Every argument the tool knows: the seed's and [`RunExtras`].
pub const KNOWN_ARGS: &[&str] = &[
  "command",
  "timeout",
  "check_pid",
  "kill_pid",
  "workdir",
  "max_output_tokens",
  "truncation",
];

/// `args` as an object (`null`: no arguments).
pub(crate) fn args_object(
  args: &Value,
) -> Result<std::borrow::Cow<'_, serde_json::Map<String, Value>>, ExecError> {
  match args {
    Value::Object(m) => Ok(std::borrow::Cow::Borrowed(m)),
    Value::Null => Ok(std::borrow::Cow::Owned(serde_json::Map::new())),
    other => Err(ExecError::invalid(format!(
      "the arguments must be an object, got {other}"
    ))),
  }
}

/// An argument no parameter of the tool has: named, with its near miss.
pub(crate) fn reject_unknown(
  args: &serde_json::Map<String, Value>,
  known: &[&str],
) -> Result<(), ExecError> {
  for key in args.keys() {
    if known.contains(&key.as_str()) {
      continue;
    }
    let hint = match key.as_str() {
      "cwd" | "dir" | "directory" | "working_directory" if known.contains(&"workdir") => {
        " (use workdir)"
      }
      "cmd" if known.contains(&"command") => " (use command)",
      "command" if known.contains(&"cmd") => " (use cmd)",
      _ => "",
    };
    return Err(ExecError::invalid(format!(
      "unknown argument {key}{hint}; the parameters are {}",
      known.join(", ")
    )));
  }
  Ok(())
}

/// A string argument (absent or null: `None`).
pub(crate) fn string(
  args: &serde_json::Map<String, Value>,
  key: &str,
) -> Result<Option<String>, ExecError> {
  match args.get(key) {
    None | Some(Value::Null) => Ok(None),
    Some(Value::String(s)) => Ok(Some(s.clone())),
    Some(v) => Err(ExecError::invalid(format!(
      "{key} must be a string, got {v}"
    ))),
  }
}

/// `truncation`: `tail` or `head_tail` (absent or null: `None`).
pub(crate) fn truncation(
  args: &serde_json::Map<String, Value>,
) -> Result<Option<super::TruncationMode>, ExecError> {
  string(args, "truncation")?
    .map(|s| {
      s.parse()
        .map_err(|e: ExecError| ExecError::invalid(format!("truncation {}", e.what)))
    })
    .transpose()
}

/// [`parse_call`] with the arguments beyond the seed's. An argument the tool
/// does not have is an error that names it.
pub fn parse_args(args: &Value) -> Result<(ToolCall, RunExtras), ExecError> {
  let args = args_object(args)?;
  let args = args.as_ref();
  reject_unknown(args, KNOWN_ARGS)?;
  let extras = RunExtras {
    workdir: string(args, "workdir")?,
    max_output_tokens: match integer(args, "max_output_tokens")? {
      Some(0) => return Err(ExecError::invalid("max_output_tokens must be at least 1")),
      n => n,
    },
    truncation: truncation(args)?,
  };
  parse_seed(args).map(|c| (c, extras))
}

fn parse_seed(args: &serde_json::Map<String, Value>) -> Result<ToolCall, ExecError> {
  let command = match args.get("command") {
    None | Some(Value::Null) => None,
    Some(Value::String(s)) => Some(s.clone()),
    Some(v) => {
      return Err(ExecError::invalid(format!(
        "command must be a string, got {v}"
      )))
    }
  };
  let timeout = integer(args, "timeout")?;
  let check = pid(args, "check_pid")?;
  let kill = pid(args, "kill_pid")?;
  match (command, check, kill) {
    (Some(command), None, None) => Ok(ToolCall::Run {
      command,
      timeout: timeout.map(Duration::from_millis),
    }),
    (None, Some(p), None) => Ok(ToolCall::Check(p)),
    (None, None, Some(p)) => Ok(ToolCall::Kill(p)),
    _ => Err(ExecError::invalid(
      "give exactly one of command, check_pid, kill_pid",
    )),
  }
}

/// Dispatch one call of the tool. `base` holds the options of a `command`
/// run (its `timeout` is replaced by the call's, 0 meaning none). Never fails:
/// bad arguments and unknown pids come back as `is_error` text.
pub async fn call(runner: &CommandRunner, args: &Value, base: CommandSpec) -> ToolResult {
  call_with(runner, args, base, &ToolSettings::api())
    .await
    .result
}

/// A call's answer with its structured form (MCP's `structuredContent`,
/// see [`super::tools::bash_output_schema`]); `None` for bad arguments.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
  pub result: ToolResult,
  pub structured: Option<Value>,
}

impl ToolOutcome {
  fn error(e: ExecError) -> Self {
    ToolOutcome {
      result: ToolResult::error(e),
      structured: None,
    }
  }
}

/// `workdir` of a call: relative to `base`, an existing directory, and
/// inside what the sandbox lets the command write when one is set.
pub fn resolve_workdir(base: &CommandSpec, workdir: &str) -> Result<PathBuf, ExecError> {
  let dir = base.process.cwd().join(workdir);
  crate::process::spec::check_cwd(&dir)
    .map_err(|e| ExecError::new(e.code, format!("workdir: {}", e.what)))?;
  let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
  if let Some(sb) = &base.process.sandbox {
    let mut roots: Vec<PathBuf> = vec![
      (base.process.cwd().canonicalize()).unwrap_or_else(|_| base.process.cwd().to_path_buf())
    ];
    for r in sb.writable_paths(base.process.cwd())? {
      // the writable devices (/dev/null, ...) are no place to work in
      if r.is_dir() && !roots.contains(&r) {
        roots.push(r);
      }
    }
    if !roots.iter().any(|r| real.starts_with(r)) {
      return Err(ExecError::invalid(format!(
        "workdir {} lies outside the sandbox's roots ({})",
        real.display(),
        roots
          .iter()
          .map(|r| r.display().to_string())
          .collect::<Vec<_>>()
          .join(", ")
      )));
    }
  }
  Ok(real)
}

/// One call of `bash` under `settings` (the wait's default and cap, the
/// output budget's cap).
pub async fn call_with(
  runner: &CommandRunner,
  args: &Value,
  base: CommandSpec,
  settings: &ToolSettings,
) -> ToolOutcome {
  let (parsed, extras) = match parse_args(args) {
    Ok(c) => c,
    Err(e) => return ToolOutcome::error(e),
  };
  match parsed {
    ToolCall::Run { command, timeout } => {
      let mut opts = base;
      opts.vocabulary = super::Vocabulary::Tool;
      opts.run.timeout = settings.timeout(timeout, opts.run.timeout);
      let shown = settings.output_limits(extras.max_output_tokens, opts.limits());
      opts.run.max_output_bytes = shown.max_bytes;
      if let Some(mode) = extras.truncation {
        opts.truncation = mode;
      }
      if let Some(w) = &extras.workdir {
        match resolve_workdir(&opts, w) {
          Ok(dir) => {
            opts.process.cwd = Some(dir);
            opts.cwd_given = true;
          }
          Err(e) => return ToolOutcome::error(e),
        }
      }
      let r = runner.run(&command, opts).await;
      ToolOutcome {
        structured: Some(run_structured(&r)),
        result: ToolResult {
          text: r.text,
          is_error: r.is_error,
        },
      }
    }
    ToolCall::Check(pid) => match runner.check(pid) {
      Ok(c) => checked(c),
      Err(e) => ToolOutcome::error(e),
    },
    ToolCall::Kill(pid) => match runner.kill(pid).await {
      Ok(c) => checked(c),
      Err(e) => ToolOutcome::error(e),
    },
  }
}

fn checked(c: super::CheckResult) -> ToolOutcome {
  let truncated = c.stdout.truncation.truncated()
    || c.stderr.truncation.truncated()
    || c.stdout.binary
    || c.stderr.binary;
  ToolOutcome {
    structured: Some(json!({
      "exit_code": c.exit_code,
      "signal": c.signal,
      "pid": c.pid,
      "running": c.running,
      "backgrounded": c.running,
      "truncated": truncated,
      "log_path": c.log.path().map(|p| p.display().to_string()),
      "adopted": [],
    })),
    result: ToolResult {
      text: c.text,
      is_error: c.is_error,
    },
  }
}

fn run_structured(r: &super::CommandReport) -> Value {
  let truncated = r.stdout.truncation.truncated()
    || r.stderr.truncation.truncated()
    || r.stdout.binary
    || r.stderr.binary;
  json!({
    "exit_code": r.exit_code,
    "signal": r.signal,
    "pid": (r.pid != 0).then_some(r.pid),
    "running": r.background.is_some(),
    "backgrounded": r.background.is_some(),
    "truncated": truncated,
    "log_path": r.log.path().map(|p| p.display().to_string()),
    "adopted": r.adopted.iter().map(|(pid, command)| json!({ "pid": pid, "command": command })).collect::<Vec<_>>(),
  })
}

/// The arguments `exec_command` knows.
const EXEC_ARGS: &[&str] = &[
  "cmd",
  "workdir",
  "tty",
  "yield_time_ms",
  "max_output_tokens",
  "truncation",
];
/// The arguments `write_stdin` knows.
const WRITE_ARGS: &[&str] = &["session_id", "chars", "yield_time_ms", "close_stdin"];
/// The longest yield a call may ask for (an MCP client waits 60 s).
pub const MAX_YIELD: Duration = Duration::from_secs(50);

fn boolean(args: &serde_json::Map<String, Value>, key: &str) -> Result<Option<bool>, ExecError> {
  match args.get(key) {
    None | Some(Value::Null) => Ok(None),
    Some(Value::Bool(b)) => Ok(Some(*b)),
    Some(v) => Err(ExecError::invalid(format!(
      "{key} must be a boolean, got {v}"
    ))),
  }
}

fn yield_time(
  args: &serde_json::Map<String, Value>,
  default: Duration,
) -> Result<Duration, ExecError> {
  Ok(
    integer(args, "yield_time_ms")?
      .map_or(default, Duration::from_millis)
      .min(MAX_YIELD),
  )
}

fn interactive(r: super::InteractiveResult) -> ToolOutcome {
  ToolOutcome {
    result: ToolResult {
      text: r.text,
      is_error: r.is_error,
    },
    structured: None,
  }
}

/// `exec_command`: start an interactive command (see [`super::interactive`]).
pub async fn exec_command(
  runner: &CommandRunner,
  args: &Value,
  base: CommandSpec,
  settings: &ToolSettings,
) -> ToolOutcome {
  let parsed = (|| -> Result<_, ExecError> {
    let args = args_object(args)?;
    let args = args.as_ref();
    reject_unknown(args, EXEC_ARGS)?;
    let cmd = string(args, "cmd")?.ok_or_else(|| ExecError::invalid("cmd is required"))?;
    let workdir = string(args, "workdir")?;
    let cwd = match &workdir {
      Some(w) => resolve_workdir(&base, w)?,
      None => base.process.cwd().to_path_buf(),
    };
    let mut s = super::StartOptions::with_process(crate::process::ProcessOptions {
      cwd: Some(cwd),
      ..base.process.clone()
    });
    s.cwd_given = workdir.is_some() || base.cwd_given;
    s.limits = settings.output_limits(integer(args, "max_output_tokens")?, base.limits());
    if let Some(mode) = truncation(args)? {
      s.limits.mode = mode;
    }
    s.tty = boolean(args, "tty")?.unwrap_or(super::interactive::DEFAULT_TTY);
    s.yield_time = yield_time(args, super::interactive::DEFAULT_START_YIELD)?;
    s.vocabulary = super::Vocabulary::Tool;
    s.cancel = base.cancel.clone();
    Ok((cmd, s))
  })();
  match parsed {
    Ok((cmd, s)) => interactive(runner.start(&cmd, s).await),
    Err(e) => ToolOutcome::error(e),
  }
}

/// `write_stdin`: keys to a session, and the output since the last call.
/// `cancel` (an MCP `notifications/cancelled`) kills the session's tree.
pub async fn write_stdin(
  runner: &CommandRunner,
  args: &Value,
  cancel: Option<&crate::CancellationToken>,
) -> ToolOutcome {
  let parsed = (|| -> Result<_, ExecError> {
    let args = args_object(args)?;
    let args = args.as_ref();
    reject_unknown(args, WRITE_ARGS)?;
    let id =
      pid(args, "session_id")?.ok_or_else(|| ExecError::invalid("session_id is required"))?;
    let chars = string(args, "chars")?.unwrap_or_default();
    let close = boolean(args, "close_stdin")?.unwrap_or(false);
    let wait = yield_time(args, super::interactive::DEFAULT_WRITE_YIELD)?;
    Ok((id, chars, close, wait))
  })();
  match parsed {
    Ok((id, chars, close, wait)) => interactive(
      runner
        .write_cancellable(id, chars.as_bytes(), wait, close, cancel)
        .await,
    ),
    Err(e) => ToolOutcome::error(e),
  }
}

/// One call of a tool of the set ([`super::tools::TOOL_NAMES`]).
pub async fn dispatch(
  runner: &CommandRunner,
  name: &str,
  args: &Value,
  base: CommandSpec,
  settings: &ToolSettings,
) -> Result<ToolOutcome, ExecError> {
  Ok(match name {
    "bash" => call_with(runner, args, base, settings).await,
    "exec_command" => exec_command(runner, args, base, settings).await,
    "write_stdin" => write_stdin(runner, args, base.cancel.as_ref()).await,
    other => {
      return Err(ExecError::invalid(format!(
        "no tool named '{other}' (tools: {})",
        super::tools::TOOL_NAMES.join(", ")
      )))
    }
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn schema_is_the_seeds() {
    let d = tool_definition();
    assert_eq!(d["name"], "bash");
    assert_eq!(
      d["parameters"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect::<Vec<_>>(),
      ["check_pid", "command", "kill_pid", "timeout"]
    );
    assert!(d["parameters"].get("required").is_none());
  }

  #[test]
  fn exactly_one_action() {
    assert_eq!(
      parse_call(&json!({"command": "ls", "timeout": 500})).unwrap(),
      ToolCall::Run {
        command: "ls".into(),
        timeout: Some(Duration::from_millis(500))
      }
    );
    assert_eq!(
      parse_call(&json!({"check_pid": 12})).unwrap(),
      ToolCall::Check(12)
    );
    let e = parse_call(&json!({"command": "ls", "kill_pid": 3})).unwrap_err();
    assert_eq!(
      e.message(),
      "exec: give exactly one of command, check_pid, kill_pid (EINVAL)"
    );
    assert!(parse_call(&json!({})).is_err());
    assert!(parse_call(&json!({"check_pid": -1})).is_err());
    assert!(parse_call(&json!({"command": 3})).is_err());
  }

  #[tokio::test]
  async fn call_dispatches() {
    let dir = tempfile::tempdir().unwrap();
    let r = CommandRunner::new(super::super::RunnerConfig {
      output_dir: dir.path().to_owned(),
      ..Default::default()
    });
    let base = CommandSpec::new(dir.path());
    let res = call(&r, &json!({"command": "echo hi; exit 2"}), base.clone()).await;
    assert_eq!(
      res,
      ToolResult {
        text: "stdout:\nhi\n\nexit code: 2".into(),
        is_error: true
      }
    );
    let res = call(
      &r,
      &json!({"command": "sleep 5", "timeout": 200}),
      base.clone(),
    )
    .await;
    assert!(res
      .text
      .starts_with("[Command backgrounded after 0.2s timeout (pid "));
    let pid: u64 = res
      .text
      .split("(pid ")
      .nth(1)
      .unwrap()
      .split(')')
      .next()
      .unwrap()
      .parse()
      .unwrap();
    let c = call(&r, &json!({"check_pid": pid}), base.clone()).await;
    assert!(c
      .text
      .starts_with(&format!("[Process {pid} still running.")));
    let k = call(&r, &json!({"kill_pid": pid}), base.clone()).await;
    assert!(
      k.text
        .starts_with(&format!("[Process {pid} killed (SIGTERM")),
      "{}",
      k.text
    );
    let u = call(&r, &json!({"check_pid": 999999}), base).await;
    assert!(u.is_error && u.text.ends_with("(ESRCH)"));
    r.close().await;
  }
}
