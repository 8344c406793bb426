//! Sessions against a real python3 and a real bash.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::Signal;

use super::worker::live_members;
use super::*;
use crate::error::{ErrorCode, ExecError};
use crate::process::supervise::{Discard, OutputSink};
use crate::process::{RunFields, RunOptions};

fn opts(timeout_ms: u64) -> CellOptions {
  CellOptions {
    run: RunFields {
      timeout: Some((timeout_ms > 0).then(|| Duration::from_millis(timeout_ms))),
      max_output_bytes: Some(1 << 20),
      ..Default::default()
    },
    ..Default::default()
  }
}

/// A session's run options with `grace` between a timeout's interrupt and
/// the kill.
fn grace(ms: u64) -> RunOptions {
  RunOptions {
    kill_grace: Duration::from_millis(ms),
    ..RunOptions::session()
  }
}

async fn py() -> Arc<PythonSession> {
  Arc::new(
    PythonSession::start(PythonOptions {
      run: grace(500),
      ..Default::default()
    })
    .await
    .expect("python3 starts"),
  )
}

async fn cell(s: &Arc<PythonSession>, code: &str) -> CellResult {
  s.execute(code.into(), opts(10_000), Discard, Discard)
    .await
    .unwrap()
}

async fn sh() -> Arc<ShellSession> {
  Arc::new(
    ShellSession::start(ShellOptions {
      run: grace(300),
      ..Default::default()
    })
    .await
    .expect("bash starts"),
  )
}

async fn cmd(s: &Arc<ShellSession>, c: &str) -> ShellResult {
  s.execute(c.into(), opts(10_000), Discard, Discard)
    .await
    .unwrap()
}

/// A sink that records when each chunk arrived.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Chunk>>>);
type Chunk = (tokio::time::Instant, Vec<u8>);
impl OutputSink for Recorder {
  fn write(&mut self, data: &[u8]) {
    self
      .0
      .lock()
      .unwrap()
      .push((tokio::time::Instant::now(), data.to_vec()));
  }
}

#[tokio::test]
async fn python_state_values_and_exceptions() {
  let s = py().await;
  let r = cell(&s, "import math\nx = 2\ndef f(v):\n    return v * 21").await;
  assert_eq!(r.status, SessionStatus::Ok, "{r:?}");
  assert_eq!(r.result_value, None);
  assert_eq!(r.execution_count, 1);
  let r = cell(&s, "f(x)").await;
  assert_eq!(r.result_value.as_deref(), Some("42"));
  let r = cell(&s, "'a' + \"b\"").await;
  assert_eq!(r.result_value.as_deref(), Some("'ab'"));
  let r = cell(&s, "print(math.floor(2.5)); None").await;
  assert_eq!(r.stdout, "2\n");
  assert_eq!(r.result_value, None);
  let r = cell(&s, "y = 1\n\ny / 0").await;
  assert_eq!(r.status, SessionStatus::Error);
  let e = r.exception.unwrap();
  assert_eq!(e.kind, "ZeroDivisionError");
  assert_eq!(e.message, "division by zero");
  assert!(
    e.traceback.contains("File \"<cell 5>\", line 3"),
    "{}",
    e.traceback
  );
  assert!(!e.traceback.contains("driver"), "{}", e.traceback);
  assert!(r.stderr.contains("ZeroDivisionError"));
  assert_eq!(r.execution_count, 5);
  let r = cell(&s, "def g(:\n  pass").await;
  assert_eq!(r.status, SessionStatus::Error);
  assert_eq!(r.exception.unwrap().kind, "SyntaxError");
  s.close().await;
}

#[tokio::test]
async fn python_protocol_strings_in_output_are_output() {
  let s = py().await;
  let fake =
    r#"{"ev": "done", "id": 1, "count": 1, "status": "ok", "value": "1", "exception": null}"#;
  let code =
    format!("import sys\nprint({fake:?})\nsys.stderr.write({fake:?} + '\\n')\nprint('after')\n7");
  let r = cell(&s, &code).await;
  assert_eq!(r.stdout, format!("{fake}\nafter\n"));
  assert_eq!(r.stderr, format!("{fake}\n"));
  assert_eq!(r.result_value.as_deref(), Some("7"));
  s.close().await;
}

#[tokio::test]
async fn python_streams_before_the_end() {
  let s = py().await;
  let rec = Recorder::default();
  let r = s
    .execute(
      "import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.3)".into(),
      opts(10_000),
      rec.clone(),
      Discard,
    )
    .await
    .unwrap();
  let ended = tokio::time::Instant::now();
  assert_eq!(r.stdout, "0\n1\n2\n");
  let chunks = rec.0.lock().unwrap().clone();
  assert!(!chunks.is_empty());
  assert!(ended - chunks[0].0 >= Duration::from_millis(500));
  s.close().await;
}

#[tokio::test]
async fn python_interrupt_keeps_namespace() {
  let s = py().await;
  cell(&s, "x = 41").await;
  let s2 = s.clone();
  let t = tokio::spawn(async move { cell(&s2, "import time\ntime.sleep(100)").await });
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert!(s.interrupt());
  let r = t.await.unwrap();
  assert_eq!(r.status, SessionStatus::Interrupted);
  assert_eq!(r.exception.unwrap().kind, "KeyboardInterrupt");
  assert!(r.execution_time < Duration::from_secs(5));
  let r = cell(&s, "x + 1").await;
  assert_eq!(r.result_value.as_deref(), Some("42"));
  s.close().await;
}

#[tokio::test]
async fn python_timeout_kills_stubborn_cell_and_restarts() {
  let s = Arc::new(
    PythonSession::start(PythonOptions {
      run: grace(300),
      init_code: Some("boot = 'yes'".into()),
      ..Default::default()
    })
    .await
    .unwrap(),
  );
  cell(&s, "x = 1").await;
  let pid = s.pid();
  let r = s
    .execute(
      "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
        .into(),
      opts(300),
      Discard,
      Discard,
    )
    .await
    .unwrap();
  assert_eq!(r.status, SessionStatus::Timeout);
  assert!(r.state_lost);
  assert_eq!(r.error.unwrap().code, ErrorCode::TIMEOUT);
  assert_eq!(running_members(pid), Vec::<i32>::new());
  let r = cell(&s, "boot, 'x' in globals()").await;
  assert!(r.restarted);
  assert_eq!(r.result_value.as_deref(), Some("('yes', False)"));
  s.close().await;
}

#[tokio::test]
async fn python_timeout_that_interrupt_stops_keeps_state() {
  let s = py().await;
  cell(&s, "x = 5").await;
  let r = s
    .execute(
      "import time\ntime.sleep(10)".into(),
      opts(300),
      Discard,
      Discard,
    )
    .await
    .unwrap();
  assert_eq!(r.status, SessionStatus::Timeout);
  assert!(!r.state_lost);
  assert_eq!(cell(&s, "x").await.result_value.as_deref(), Some("5"));
  s.close().await;
}

#[tokio::test]
async fn python_os_exit_dies_and_restarts() {
  let s = py().await;
  let r = cell(&s, "import os\nprint('bye', flush=True)\nos._exit(3)").await;
  assert_eq!(r.status, SessionStatus::Died);
  assert_eq!(r.exit_code, Some(3));
  assert_eq!(r.stdout, "bye\n");
  assert!(r.state_lost);
  let r = cell(&s, "1 + 1").await;
  assert!(r.restarted);
  assert_eq!(r.result_value.as_deref(), Some("2"));
  s.close().await;
}

#[tokio::test]
async fn python_missing_interpreter_is_enoent() {
  let e = PythonSession::start(PythonOptions {
    python: "no-such-python-xyz".into(),
    ..Default::default()
  })
  .await
  .err()
  .unwrap();
  assert_eq!(e.code, ErrorCode::ENOENT);
}

#[tokio::test]
async fn shell_state_exit_codes_and_stdin() {
  let s = sh().await;
  let r = cmd(&s, "cd /tmp").await;
  assert_eq!(r.cwd, "/tmp");
  assert_eq!(cmd(&s, "pwd").await.stdout, "/tmp\n");
  cmd(
    &s,
    "export A=1; B=2; alias hi='echo hi'; f() { echo \"f$1\"; }",
  )
  .await;
  let r = cmd(&s, "echo $A$B; hi; f 3").await;
  assert_eq!(r.stdout, "12\nhi\nf3\n");
  let r = cmd(&s, "false").await;
  assert_eq!(r.exit_code, 1);
  assert_eq!(r.status, SessionStatus::Error);
  let r = cmd(&s, "read x; echo \"read:$?\"").await;
  assert_eq!(r.stdout, "read:1\n");
  let r = cmd(&s, "echo 'it''s' \"$'x'\" \\\\ ; printf 'a\\tb\\n'").await;
  assert_eq!(r.stdout, "its $'x' \\\na\tb\n");
  let r = cmd(&s, "printf '\\0D 99 0 /\\0'; echo done").await;
  assert_eq!(r.stdout, "\0D 99 0 /\0done\n");
  let r = cmd(&s, "if then").await;
  assert_eq!(r.exit_code, 2);
  assert_eq!(cmd(&s, "echo still").await.stdout, "still\n");
  s.close().await;
}

#[tokio::test]
async fn shell_interrupt_keeps_cwd() {
  let s = sh().await;
  cmd(&s, "cd /tmp; X=7").await;
  let s2 = s.clone();
  let t = tokio::spawn(async move { cmd(&s2, "sleep 100").await });
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert!(s.interrupt());
  let r = t.await.unwrap();
  assert_eq!(r.status, SessionStatus::Interrupted);
  assert_eq!(r.exit_code, 130);
  assert!(r.execution_time < Duration::from_secs(5));
  let r = cmd(&s, "pwd; echo $X").await;
  assert_eq!(r.stdout, "/tmp\n7\n");
  s.close().await;
}

#[tokio::test]
async fn shell_timeout_kills_command_keeps_shell() {
  let s = sh().await;
  cmd(&s, "cd /tmp").await;
  let r = s
    .execute(
      "python3 -c 'import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(100)'"
        .into(),
      opts(300),
      Discard,
      Discard,
    )
    .await
    .unwrap();
  assert_eq!(r.status, SessionStatus::Timeout);
  assert_eq!(r.exit_code, 124);
  assert!(!r.state_lost, "{r:?}");
  assert_eq!(cmd(&s, "pwd").await.stdout, "/tmp\n");
  s.close().await;
}

#[tokio::test]
async fn shell_exit_dies_and_restarts() {
  let s = sh().await;
  cmd(&s, "cd /tmp").await;
  let r = cmd(&s, "echo out; exit 4").await;
  assert_eq!(r.status, SessionStatus::Died);
  assert_eq!(r.exit_code, 4);
  assert_eq!(r.stdout, "out\n");
  let r = cmd(&s, "echo again").await;
  assert!(r.restarted);
  assert_eq!(r.stdout, "again\n");
  s.close().await;
}

#[tokio::test]
async fn shell_background_job_does_not_hold_completion() {
  let s = sh().await;
  let r = cmd(&s, "sleep 30 & echo started").await;
  assert_eq!(r.stdout, "started\n");
  assert!(r.execution_time < Duration::from_secs(2));
  let pid = s.pid();
  s.close().await;
  assert_eq!(running_members(pid), Vec::<i32>::new());
}

/// The worker's pipes are pumped for its whole life, into relays the
/// running request takes from: output written just before a completion,
/// more than a pipe and a relay hold (the pump waits for room while the
/// catch-up runs), is all in its own command, none in the next.
#[tokio::test]
async fn output_before_a_completion_stays_in_its_command() {
  let s = sh().await;
  for _ in 0..3 {
    let r = cmd(
      &s,
      "head -c 1000000 /dev/zero; head -c 700000 /dev/zero >&2",
    )
    .await;
    assert_eq!((r.stdout_bytes, r.stderr_bytes), (1_000_000, 700_000));
    let r = cmd(&s, "echo next").await;
    assert_eq!((r.stdout.as_str(), r.stderr_bytes), ("next\n", 0));
  }
  let p = py().await;
  for i in 0..20 {
    let r = cell(
      &p,
      &format!("import sys; sys.stdout.write('x' * {i}000); sys.stdout.flush()"),
    )
    .await;
    assert_eq!(r.stdout_bytes, i * 1000, "{}", r.stderr);
  }
  s.close().await;
  p.close().await;
}

fn running_members(pgid: i32) -> Vec<i32> {
  live_members(pgid)
}

#[tokio::test]
async fn queue_runs_in_call_order_and_interrupt_reaches_a_queued_cell() {
  let s = py().await;
  let a = s.execute(
    "import time\ntime.sleep(0.2)\nseq = [1]".into(),
    opts(10_000),
    Discard,
    Discard,
  );
  let b = s.execute("seq.append(2)".into(), opts(10_000), Discard, Discard);
  let c = s.execute("seq".into(), opts(10_000), Discard, Discard);
  // polled in reverse order: the queue still follows the call order
  let (c, b, a) = tokio::join!(tokio::spawn(c), tokio::spawn(b), tokio::spawn(a));
  assert_eq!(a.unwrap().unwrap().status, SessionStatus::Ok);
  assert_eq!(b.unwrap().unwrap().status, SessionStatus::Ok);
  assert_eq!(c.unwrap().unwrap().result_value.as_deref(), Some("[1, 2]"));
  // an interrupt right after the call, before the cell started
  let d = s.execute(
    "import time\ntime.sleep(100)".into(),
    opts(10_000),
    Discard,
    Discard,
  );
  assert!(s.interrupt());
  assert_eq!(d.await.unwrap().status, SessionStatus::Interrupted);
  assert!(!s.interrupt());
  s.close().await;
}

#[tokio::test]
async fn dropped_waiting_turn_does_not_block_the_queue() {
  let s = py().await;
  let a = s.execute(
    "import time\ntime.sleep(0.2)".into(),
    opts(10_000),
    Discard,
    Discard,
  );
  let b = s.execute("1".into(), opts(10_000), Discard, Discard);
  let c = s.execute("2".into(), opts(10_000), Discard, Discard);
  drop(b);
  assert_eq!(a.await.unwrap().status, SessionStatus::Ok);
  assert_eq!(c.await.unwrap().result_value.as_deref(), Some("2"));
  s.close().await;
}

#[test]
fn quoting() {
  assert_eq!(
    shell::ansi_c_quote("a'b\\c\nd\te"),
    "$'a\\'b\\\\c\\nd\\x09e'"
  );
}

fn limited(f: impl FnOnce(&mut crate::process::limits::Limits)) -> crate::process::limits::Limits {
  let mut l = crate::process::limits::Limits::default();
  f(&mut l);
  l
}

async fn py_start_error(python: &str, limits: crate::process::limits::Limits) -> ExecError {
  PythonSession::start(PythonOptions {
    python: python.into(),
    process: crate::process::ProcessOptions {
      limits,
      ..Default::default()
    },
    ..Default::default()
  })
  .await
  .err()
  .expect("the start fails")
}

async fn sh_start_error(limits: crate::process::limits::Limits) -> ExecError {
  ShellSession::start(ShellOptions {
    process: crate::process::ProcessOptions {
      limits,
      ..Default::default()
    },
    ..Default::default()
  })
  .await
  .err()
  .expect("the start fails")
}

#[tokio::test]
async fn interpreters_stopped_by_a_limit_at_startup_say_which() {
  let mem = limited(|l| l.memory_bytes = Some(1 << 20));
  let e = py_start_error("python3", mem.clone()).await;
  assert_eq!(
    e.message(),
    "exec: python3 could not start: memory limit of 1 MiB exceeded (ELIMIT)"
  );
  let e = sh_start_error(mem).await;
  assert_eq!(
    e.message(),
    "exec: bash could not start: memory limit of 1 MiB exceeded (ELIMIT)"
  );
  // the dynamic loader (or the program) meets EMFILE; it is not killed
  let fds = limited(|l| l.open_files = Some(3));
  for e in [
    py_start_error("python3", fds.clone()).await,
    sh_start_error(fds).await,
  ] {
    assert_eq!(e.code, ErrorCode::ELIMIT, "{}", e.message());
    assert!(
      e.what
        .contains(" could not start: open files limit of 3 exceeded: "),
      "{}",
      e.message()
    );
  }
}

#[tokio::test]
async fn real_startup_failures_stay_espawn_under_limits() {
  // an "interpreter" that exits at once, with limits it does not hit
  let e = py_start_error(
    "false",
    limited(|l| {
      l.open_files = Some(256);
      l.memory_bytes = Some(1 << 30);
    }),
  )
  .await;
  assert_eq!(e.code, ErrorCode::ESPAWN, "{}", e.message());
  assert!(e
    .what
    .starts_with("false exited during startup (exit code 1)"));
  let e = py_start_error("no-such-python-xyz", limited(|l| l.open_files = Some(3))).await;
  assert_eq!(e.code, ErrorCode::ENOENT);
}

#[tokio::test]
async fn init_code_over_a_limit_is_elimit() {
  let e = PythonSession::start(PythonOptions {
    process: crate::process::ProcessOptions {
      limits: limited(|l| l.memory_bytes = Some(128 << 20)),
      ..Default::default()
    },
    init_code: Some("x = bytearray(400 * 1024 * 1024)\nimport time\ntime.sleep(10)".into()),
    ..Default::default()
  })
  .await
  .err()
  .expect("the start fails");
  assert_eq!(
    e.message(),
    "exec: initCode did not complete: memory limit of 128 MiB exceeded (ELIMIT)"
  );
}

/// Polls `f` until it is true, at most `limit`.
async fn eventually(limit: Duration, f: impl Fn() -> bool) -> bool {
  let until = tokio::time::Instant::now() + limit;
  while tokio::time::Instant::now() < until {
    if f() {
      return true;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  f()
}

#[tokio::test]
async fn python_that_dies_between_cells_is_seen_and_replaced() {
  let s = py().await;
  cell(&s, "x = 1").await;
  let pid = s.pid();
  nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
  assert!(eventually(Duration::from_secs(5), || s.pid() == 0).await);
  let r = cell(&s, "'x' in globals(), 6 * 7").await;
  assert_eq!(r.status, SessionStatus::Ok, "{r:?}");
  assert_eq!(r.result_value.as_deref(), Some("(False, 42)"));
  assert!(r.restarted && r.state_lost, "{r:?}");
  assert!(s.pid() > 0 && s.pid() != pid);
  // killed right before the call: the cell still runs, in a new interpreter
  let pid = s.pid();
  nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
  let r = cell(&s, "1 + 1").await;
  assert_eq!(r.status, SessionStatus::Ok, "{r:?}");
  assert_eq!(r.result_value.as_deref(), Some("2"));
  assert!(r.restarted && r.state_lost, "{r:?}");
  s.close().await;
}

#[tokio::test]
async fn shell_that_logs_itself_out_between_commands_is_seen_and_replaced() {
  let s = sh().await;
  cmd(&s, "cd /tmp; X=1").await;
  // bash's own idle logout, set by a command
  assert_eq!(cmd(&s, "TMOUT=1").await.status, SessionStatus::Ok);
  assert!(eventually(Duration::from_secs(10), || s.pid() == 0).await);
  let r = cmd(&s, "echo \"[$X]\"; pwd").await;
  assert_eq!(r.status, SessionStatus::Ok, "{r:?}");
  assert_eq!(
    r.stdout,
    format!("[]\n{}\n", std::env::current_dir().unwrap().display())
  );
  assert!(r.restarted && r.state_lost, "{r:?}");
  s.close().await;
}

#[tokio::test]
async fn interrupt_targets_the_execution_whose_ticket_is_held() {
  let s = py().await;
  let (ta, a) = s.execute_ticketed("pass".into(), opts(10_000), Discard, Discard, NoDisplay);
  let (tb, b) = s.execute_ticketed(
    "import time\ntime.sleep(1)\n'b'".into(),
    opts(10_000),
    Discard,
    Discard,
    NoDisplay,
  );
  let b = tokio::spawn(b);
  assert_eq!(a.await.unwrap().status, SessionStatus::Ok);
  // `a` is over but its caller still holds the ticket: nothing to interrupt
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert!(!s.interrupt());
  drop(ta);
  let r = b.await.unwrap().unwrap();
  assert_eq!(r.status, SessionStatus::Ok, "{r:?}");
  drop(tb);
  s.close().await;
}

#[tokio::test]
async fn a_command_takes_the_sessions_run_options_unless_it_gives_its_own() {
  let s = Arc::new(
    ShellSession::start(ShellOptions {
      run: RunOptions {
        timeout: Some(Duration::from_millis(300)),
        max_output_bytes: 64,
        ..grace(300)
      },
      ..Default::default()
    })
    .await
    .unwrap(),
  );
  let d = || CellOptions::default();
  let r = s
    .execute("sleep 5".into(), d(), Discard, Discard)
    .await
    .unwrap();
  assert_eq!(r.status, SessionStatus::Timeout, "{r:?}");
  assert_eq!(r.exit_code, 124);
  let r = s
    .execute(
      "head -c 1000 /dev/zero | tr '\\0' a".into(),
      d(),
      Discard,
      Discard,
    )
    .await
    .unwrap();
  assert!(r.truncated && r.stdout_bytes == 1000, "{r:?}");
  let untimed = CellOptions {
    run: RunFields {
      timeout: Some(None),
      ..Default::default()
    },
    ..Default::default()
  };
  let r = s
    .execute("sleep 0.5; echo done".into(), untimed, Discard, Discard)
    .await
    .unwrap();
  assert_eq!((r.status, r.stdout.as_str()), (SessionStatus::Ok, "done\n"));
  s.close().await;
}

#[tokio::test]
async fn an_input_is_refused_not_dropped() {
  let fed = RunOptions {
    input: Some(b"x".to_vec()),
    ..RunOptions::session()
  };
  let python = PythonOptions {
    run: fed.clone(),
    ..Default::default()
  };
  let e = PythonSession::start(python).await.err().unwrap();
  assert_eq!(e.code, ErrorCode::EINVAL, "{e:?}");
  let shell = ShellOptions {
    run: fed,
    ..Default::default()
  };
  let e = ShellSession::start(shell).await.err().unwrap();
  assert_eq!(e.code, ErrorCode::EINVAL, "{e:?}");
  let s = sh().await;
  let mut o = opts(10_000);
  o.run.input = Some(b"x".to_vec());
  let e = s
    .execute("cat".into(), o, Discard, Discard)
    .await
    .unwrap_err();
  assert_eq!(e.code, ErrorCode::EINVAL);
  assert!(e.message().contains("takes no input"), "{e:?}");
  assert_eq!(
    cmd(&s, "echo ok").await.stdout,
    "ok\n",
    "the session goes on"
  );
  s.close().await;
}

#[test]
fn status_names() {
  assert_eq!(SessionStatus::Interrupted.as_str(), "interrupted");
  assert_eq!(SessionStatus::Died.as_str(), "died");
}
