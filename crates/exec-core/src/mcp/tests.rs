//! Unit tests of `crate::mcp`.

use super::*;

fn object(v: Value) -> rmcp::model::JsonObject {
  match v {
    Value::Object(m) => m,
    _ => rmcp::model::JsonObject::new(),
  }
}

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
  let mut config = McpConfig::new(dir.path().to_owned());
  config.runner.output_dir = dir.path().to_owned();
  let (client_io, server_io) = tokio::io::duplex(1 << 16);
  let server = tokio::spawn(serve_on(config, server_io));
  let client = ().serve(client_io).await.expect("initialize");
  let info = client.peer_info().expect("server info");
  assert_eq!(info.server_info.as_ref().unwrap().name, "exec-native");
  let tools = client.list_all_tools().await.unwrap();
  let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
  assert_eq!(
    names,
    ["bash", "exec_command", "write_stdin", "execute_code"]
  );
  let settings = ToolSettings {
    cwd: Some(dir.path().to_owned()),
    ..ToolSettings::mcp()
  };
  assert_eq!(
    Value::Object((*tools[0].input_schema).clone()),
    tools::definitions(&settings, ToolFormat::Mcp, false)[0]["inputSchema"]
  );

  let call =
    |name: &'static str, args: Value| CallToolRequestParams::new(name).with_arguments(object(args));
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
