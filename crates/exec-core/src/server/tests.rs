use super::*;
use base64::Engine;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

struct Client {
  w: tokio::io::WriteHalf<tokio::io::DuplexStream>,
  r: BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
  notes: Vec<Value>,
  server: tokio::task::JoinHandle<()>,
}

impl Client {
  fn new() -> Self {
    let (a, b) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(b);
    let server = tokio::spawn(serve_lines(ManagerConfig::default(), sr, sw));
    let (r, w) = tokio::io::split(a);
    Client {
      w,
      r: BufReader::new(r),
      notes: Vec::new(),
      server,
    }
  }

  async fn send_raw(&mut self, line: &str) {
    self.w.write_all(line.as_bytes()).await.unwrap();
    self.w.write_all(b"\n").await.unwrap();
  }

  async fn recv(&mut self) -> Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), self.r.read_line(&mut line))
      .await
      .expect("no answer")
      .unwrap();
    serde_json::from_str(&line).unwrap()
  }

  /// Answer to request `id`, keeping notifications.
  async fn answer(&mut self, id: i64) -> Value {
    loop {
      let v = self.recv().await;
      if v.get("id") == Some(&json!(id)) {
        return v;
      }
      assert!(v.get("method").is_some(), "{v}");
      self.notes.push(v);
    }
  }

  async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
    let msg = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    self.send_raw(&msg.to_string()).await;
    self.answer(id).await
  }
}

fn b64d(v: &Value) -> String {
  let bytes = base64::engine::general_purpose::STANDARD
    .decode(v.as_str().unwrap())
    .unwrap();
  String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn cat_session_over_lines() {
  let mut c = Client::new();
  let r = c.call(1, "initialize", json!({})).await;
  assert_eq!(r["result"]["protocolVersion"], "1");
  let r = c
    .call(
      2,
      "process/start",
      json!({ "processId": "cat", "argv": ["cat"], "io": { "type": "pipe", "stdin": "open" } }),
    )
    .await;
  assert_eq!(r["result"]["processId"], "cat");
  assert!(r["result"]["pid"].as_u64().unwrap() > 0);
  let data = base64::engine::general_purpose::STANDARD.encode("hi there");
  let r = c
    .call(
      3,
      "process/write",
      json!({ "processId": "cat", "data": data }),
    )
    .await;
  assert_eq!(r["result"], json!({}));
  c.call(4, "process/closeStdin", json!({ "processId": "cat" }))
    .await;
  let r = c
    .call(
      5,
      "process/wait",
      json!({ "processId": "cat", "timeoutMs": 10000 }),
    )
    .await;
  assert_eq!(r["result"]["exitCode"], 0);
  let r = c
    .call(6, "process/snapshot", json!({ "processId": "cat" }))
    .await;
  assert_eq!(b64d(&r["result"]["stdout"]), "hi there");
  // notifications arrive in seq order, output before exited
  while !c.notes.iter().any(|n| n["method"] == "process/closed") {
    let v = c.recv().await;
    c.notes.push(v);
  }
  let methods: Vec<&str> = c
    .notes
    .iter()
    .map(|n| n["method"].as_str().unwrap())
    .collect();
  assert_eq!(
    methods,
    [
      "process/started",
      "process/output",
      "process/exited",
      "process/closed"
    ]
  );
  assert_eq!(b64d(&c.notes[1]["params"]["data"]), "hi there");
  let r = c.call(7, "process/list", json!(null)).await;
  assert_eq!(r["result"]["processes"][0]["processId"], "cat");
}

#[tokio::test]
async fn errors_never_kill_the_server() {
  let mut c = Client::new();
  c.send_raw("{not json").await;
  let r = c.recv().await;
  assert_eq!(r["error"]["code"], PARSE_ERROR);
  assert_eq!(r["id"], Value::Null);
  c.send_raw("[1,2]").await;
  assert_eq!(c.recv().await["error"]["code"], INVALID_REQUEST);
  c.send_raw(r#"{"jsonrpc":"1.0","id":9,"method":"x"}"#).await;
  let r = c.recv().await;
  assert_eq!(r["error"]["code"], INVALID_REQUEST);
  assert_eq!(r["id"], 9);
  let r = c.call(1, "process/nope", json!({})).await;
  assert_eq!(r["error"]["code"], protocol::METHOD_NOT_FOUND);
  let r = c.call(2, "process/start", json!(null)).await;
  assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS);
  let r = c.call(3, "process/start", json!({ "argv": "ls" })).await;
  assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS);
  let r = c
    .call(4, "process/wait", json!({ "processId": "ghost" }))
    .await;
  assert_eq!(r["error"]["code"], -32001);
  assert_eq!(r["error"]["data"]["errorCode"], "ESRCH");
  let r = c
    .call(
      5,
      "process/start",
      json!({ "argv": ["no-such-program-xyz"] }),
    )
    .await;
  assert_eq!(r["error"]["data"]["errorCode"], "ENOENT");
  let r = c
    .call(
      6,
      "process/write",
      json!({ "processId": "x", "data": "!!" }),
    )
    .await;
  assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS);
  // a notification (no id) gets no answer; the next request still works
  c.send_raw(r#"{"jsonrpc":"2.0","method":"process/list"}"#)
    .await;
  let r = c.call(7, "process/list", json!({})).await;
  assert!(r["result"]["processes"].is_array());
}

#[tokio::test]
async fn eof_terminates_the_connections_processes() {
  let mut c = Client::new();
  let r = c
    .call(
      1,
      "process/start",
      json!({ "argv": ["sh", "-c", "trap '' TERM; sleep 30"] }),
    )
    .await;
  let pid = r["result"]["pid"].as_i64().unwrap() as i32;
  assert!(crate::process::registry::group_alive(pid));
  c.w.shutdown().await.unwrap();
  tokio::time::timeout(Duration::from_secs(10), c.server)
    .await
    .expect("server returns at EOF")
    .unwrap();
  let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
  while crate::process::registry::group_alive(pid) && tokio::time::Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(!crate::process::registry::group_alive(pid));
}

#[test]
fn listen_addresses() {
  assert_eq!(
    parse_listen("ws://127.0.0.1:8080", false).unwrap(),
    "127.0.0.1:8080".parse().unwrap()
  );
  assert!(parse_listen("ws://[::1]:9/", false).is_ok());
  let e = parse_listen("ws://0.0.0.0:8080", false).unwrap_err();
  assert!(e.message().contains("--allow-remote"), "{}", e.message());
  assert!(parse_listen("ws://0.0.0.0:8080", true).is_ok());
  assert_eq!(
    parse_listen("http://127.0.0.1:1", false).unwrap_err().code,
    ErrorCode::EINVAL
  );
}

/// Notifications of `id` until (and with) its `process/closed`.
async fn notes_until_closed(c: &mut Client, id: &str) -> Vec<Value> {
  while !c
    .notes
    .iter()
    .any(|n| n["method"] == "process/closed" && n["params"]["processId"] == id)
  {
    let v = c.recv().await;
    c.notes.push(v);
  }
  c.notes
    .iter()
    .filter(|n| n["params"]["processId"] == id)
    .cloned()
    .collect()
}

#[tokio::test]
async fn memory_limit_is_reported_in_wait_and_exited() {
  let mut c = Client::new();
  let r = c
    .call(
      1,
      "process/start",
      json!({
        "processId": "big",
        "argv": ["python3", "-c", "x = bytearray(400 * 1024 * 1024); import time; time.sleep(10)"],
        "limits": { "memoryBytes": 128 << 20 },
      }),
    )
    .await;
  assert!(r["result"]["pid"].as_u64().is_some(), "{r}");
  let r = c
    .call(
      2,
      "process/wait",
      json!({ "processId": "big", "timeoutMs": 15000 }),
    )
    .await;
  let w = &r["result"];
  assert_eq!(w["running"], false, "{r}");
  assert_eq!(w["signal"], "SIGKILL");
  assert_eq!(w["errorCode"], "ELIMIT");
  assert_eq!(
    w["error"],
    "exec: memory limit of 128 MiB exceeded (ELIMIT)"
  );
  let notes = notes_until_closed(&mut c, "big").await;
  let exited = notes
    .iter()
    .find(|n| n["method"] == "process/exited")
    .unwrap();
  assert_eq!(exited["params"]["errorCode"], "ELIMIT");
  assert_eq!(exited["params"]["error"], w["error"]);
  // snapshot, read and list say it too
  let r = c
    .call(3, "process/snapshot", json!({ "processId": "big" }))
    .await;
  assert_eq!(r["result"]["errorCode"], "ELIMIT");
  let r = c.call(4, "process/list", json!({})).await;
  assert_eq!(r["result"]["processes"][0]["errorCode"], "ELIMIT");
}

#[tokio::test]
async fn file_size_and_cpu_limits_are_reported() {
  let mut c = Client::new();
  let dir = tempfile::tempdir().unwrap();
  let big = dir.path().join("big");
  for (id, argv, limits, signal, message) in [
    (
      "fsize",
      json!([
        "sh",
        "-c",
        format!("exec head -c 10000000 /dev/zero > {}", big.display())
      ]),
      json!({ "fileSizeBytes": 1 << 20 }),
      "SIGXFSZ",
      "exec: file size limit of 1 MiB exceeded (ELIMIT)",
    ),
    (
      "cpu",
      json!(["python3", "-c", "while True: pass"]),
      json!({ "cpuSeconds": 1 }),
      "SIGXCPU",
      "exec: CPU time limit of 1s exceeded (ELIMIT)",
    ),
  ] {
    let r = c
      .call(
        1,
        "process/start",
        json!({ "processId": id, "argv": argv, "limits": limits }),
      )
      .await;
    assert!(r["result"]["pid"].as_u64().is_some(), "{r}");
    let r = c
      .call(
        2,
        "process/wait",
        json!({ "processId": id, "timeoutMs": 15000 }),
      )
      .await;
    assert_eq!(r["result"]["signal"], signal, "{r}");
    assert_eq!(r["result"]["errorCode"], "ELIMIT");
    assert_eq!(r["result"]["error"], message);
  }
  assert_eq!(std::fs::metadata(&big).unwrap().len(), 1 << 20);
}

#[tokio::test]
async fn a_normal_exit_has_no_error_fields() {
  let mut c = Client::new();
  c.call(
    1,
    "process/start",
    json!({ "processId": "ok", "argv": ["true"], "limits": { "openFiles": 64 } }),
  )
  .await;
  let r = c
    .call(
      2,
      "process/wait",
      json!({ "processId": "ok", "timeoutMs": 10000 }),
    )
    .await;
  assert_eq!(
    r["result"],
    json!({ "running": false, "exitCode": 0, "signal": null })
  );
}

#[tokio::test]
async fn open_files_and_env_lists_reach_the_child() {
  std::env::set_var("EXEC_NATIVE_SRV_TOKEN", "secret");
  std::env::set_var("EXEC_NATIVE_SRV_KEEP", "kept");
  let mut c = Client::new();
  let script = "ulimit -n; echo \"t=${EXEC_NATIVE_SRV_TOKEN-unset} k=${EXEC_NATIVE_SRV_KEEP-unset} p=${PATH:+set} e=$EXTRA\"";
  for (id, extra) in [
    (
      "deny",
      json!({ "envDenylist": ["*_SRV_TOKEN"], "limits": { "openFiles": 77 } }),
    ),
    (
      "allow",
      json!({ "envAllowlist": ["PATH", "EXEC_NATIVE_SRV_K*"], "env": { "EXTRA": "given" } }),
    ),
  ] {
    let mut p = json!({ "processId": id, "argv": ["sh", "-c", script], "dieWithParent": true });
    for (k, v) in extra.as_object().unwrap() {
      p[k] = v.clone();
    }
    let r = c.call(1, "process/start", p).await;
    assert!(r["result"]["pid"].as_u64().is_some(), "{r}");
    c.call(
      2,
      "process/wait",
      json!({ "processId": id, "timeoutMs": 10000 }),
    )
    .await;
  }
  let r = c
    .call(3, "process/snapshot", json!({ "processId": "deny" }))
    .await;
  assert_eq!(
    b64d(&r["result"]["stdout"]),
    "77\nt=unset k=kept p=set e=\n"
  );
  let r = c
    .call(4, "process/snapshot", json!({ "processId": "allow" }))
    .await;
  let text = b64d(&r["result"]["stdout"]);
  assert!(text.ends_with("t=unset k=kept p=set e=given\n"), "{text}");
  assert_ne!(text.lines().next(), Some("77"));
}

#[tokio::test]
async fn bad_limits_and_lists_are_invalid_params() {
  let mut c = Client::new();
  let cases = [
    (
      json!({ "limits": { "memoryBytes": 0 } }),
      "exec: invalid params: limits.memoryBytes must be at least 1, got 0 (EINVAL)",
    ),
    (
      json!({ "limits": { "cpuSeconds": -2 } }),
      "exec: invalid params: limits.cpuSeconds must not be negative, got -2 (EINVAL)",
    ),
    (
      json!({ "limits": { "openFiles": "64" } }),
      "exec: invalid params: limits.openFiles must be a number, got a string (EINVAL)",
    ),
    (
      json!({ "limits": { "memory": 1 } }),
      "exec: invalid params: unknown limit `memory`, expected memoryBytes, cpuSeconds, maxProcesses, fileSizeBytes or openFiles (EINVAL)",
    ),
    (
      json!({ "limits": [1] }),
      "exec: invalid params: limits must be an object, got an array (EINVAL)",
    ),
    (
      json!({ "envAllowlist": "PATH" }),
      "exec: invalid params: envAllowlist must be an array of strings (EINVAL)",
    ),
    (
      json!({ "envDenylist": ["A", 1] }),
      "exec: invalid params: envDenylist must be an array of strings (EINVAL)",
    ),
  ];
  for (i, (extra, message)) in cases.into_iter().enumerate() {
    let mut p = json!({ "argv": ["true"] });
    for (k, v) in extra.as_object().unwrap() {
      p[k] = v.clone();
    }
    let r = c.call(i as i64 + 1, "process/start", p).await;
    assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS, "{r}");
    assert_eq!(r["error"]["data"]["errorCode"], "EINVAL");
    assert_eq!(r["error"]["message"], message);
  }
  let r = c
    .call(
      20,
      "process/start",
      json!({ "argv": ["true"], "dieWithParent": "yes" }),
    )
    .await;
  assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS, "{r}");
  // a value the child could not set is refused before spawning
  let r = c
    .call(
      19,
      "process/start",
      json!({ "argv": ["true"], "limits": { "openFiles": 1e12 } }),
    )
    .await;
  assert_eq!(r["error"]["code"], protocol::INVALID_PARAMS, "{r}");
  let m = r["error"]["message"].as_str().unwrap();
  assert!(
    m.starts_with("exec: limits.openFiles of 1000000000000 is above "),
    "{m}"
  );
  // nothing was started; null means none
  let r = c
    .call(
      21,
      "process/start",
      json!({ "argv": ["true"], "limits": { "memoryBytes": null }, "envAllowlist": null }),
    )
    .await;
  assert!(r["result"]["pid"].as_u64().is_some(), "{r}");
  let r = c.call(22, "process/list", json!({})).await;
  assert_eq!(r["result"]["processes"].as_array().unwrap().len(), 1);
}
