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
  assert!(crate::group::group_alive(pid));
  c.w.shutdown().await.unwrap();
  tokio::time::timeout(Duration::from_secs(10), c.server)
    .await
    .expect("server returns at EOF")
    .unwrap();
  let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
  while crate::group::group_alive(pid) && tokio::time::Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(!crate::group::group_alive(pid));
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
