//! The command tool as a model calls it: the seed's tool definition (name,
//! description, JSON schema of `{ command, timeout?, check_pid?, kill_pid? }`)
//! and [`call`], which dispatches one call's arguments to a [`CommandRunner`].

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::ExecError;

use super::{CommandOptions, CommandRunner};

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

fn integer(args: &serde_json::Map<String, Value>, key: &str) -> Result<Option<u64>, ExecError> {
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
  let empty = serde_json::Map::new();
  let args = match args {
    Value::Object(m) => m,
    Value::Null => &empty,
    other => {
      return Err(ExecError::invalid(format!(
        "the arguments must be an object, got {other}"
      )))
    }
  };
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
pub async fn call(runner: &CommandRunner, args: &Value, base: CommandOptions) -> ToolResult {
  let parsed = match parse_call(args) {
    Ok(c) => c,
    Err(e) => return ToolResult::error(e),
  };
  match parsed {
    ToolCall::Run { command, timeout } => {
      let mut opts = base;
      if let Some(t) = timeout {
        opts.timeout = (!t.is_zero()).then_some(t);
      }
      let r = runner.run(&command, opts).await;
      ToolResult {
        text: r.text,
        is_error: r.is_error,
      }
    }
    ToolCall::Check(pid) => match runner.check(pid) {
      Ok(c) => ToolResult {
        text: c.text,
        is_error: c.is_error,
      },
      Err(e) => ToolResult::error(e),
    },
    ToolCall::Kill(pid) => match runner.kill(pid).await {
      Ok(c) => ToolResult {
        text: c.text,
        is_error: c.is_error,
      },
      Err(e) => ToolResult::error(e),
    },
  }
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
    let base = CommandOptions::new(dir.path());
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
