use super::*;
use crate::error::ErrorCode;
use tokio::sync::mpsc;
use tokio::time::Instant;

fn spec(argv: &[&str], io: ProcessIo) -> StartSpec {
  StartSpec {
    process_id: None,
    argv: argv.iter().map(|s| s.to_string()).collect(),
    arg0: None,
    io,
    process: Default::default(),
    run: crate::process::RunOptions::managed(),
  }
}

fn pipe(argv: &[&str]) -> StartSpec {
  spec(argv, ProcessIo::Pipe { stdin_open: false })
}

fn small(cap: usize) -> ProcessManager {
  ProcessManager::new(ManagerConfig {
    retained_output_bytes: cap,
    ..Default::default()
  })
}

const LONG: Option<Duration> = Some(Duration::from_secs(20));

#[tokio::test]
async fn cat_over_pipes() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m
    .start(spec(&["cat"], ProcessIo::Pipe { stdin_open: true }), None)
    .unwrap();
  m.write(&s.process_id, b"hello ").await.unwrap();
  m.write(&s.process_id, b"world").await.unwrap();
  m.close_stdin(&s.process_id).await.unwrap();
  let w = m.wait(&s.process_id, LONG).await.unwrap();
  assert_eq!(w.exit.unwrap().exit_code, 0);
  let snap = m.snapshot(&s.process_id).unwrap();
  assert_eq!(snap.stdout, b"hello world");
  let e = m.write(&s.process_id, b"x").await.unwrap_err();
  assert_eq!(e.code, ErrorCode::EPIPE);
}

#[tokio::test]
async fn closed_stdin_by_default() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m.start(pipe(&["cat"]), None).unwrap();
  let e = m.write(&s.process_id, b"x").await.unwrap_err();
  assert_eq!(e.code, ErrorCode::EPIPE);
  assert_eq!(
    m.wait(&s.process_id, LONG)
      .await
      .unwrap()
      .exit
      .unwrap()
      .exit_code,
    0
  );
}

#[tokio::test]
async fn a_start_specs_run_is_honoured_or_refused() {
  let m = ProcessManager::new(ManagerConfig::default());
  // a timeout kills the tree as a run's does
  let mut s = pipe(&["sleep", "30"]);
  s.run.timeout = Some(Duration::from_millis(200));
  let t = Instant::now();
  let p = m.start(s, None).unwrap();
  let x = m.wait(&p.process_id, LONG).await.unwrap().exit.unwrap();
  assert_eq!(x.exit_code, 124, "{x:?}");
  assert_eq!(x.error.map(|e| e.code), Some(ErrorCode::TIMEOUT));
  assert!(t.elapsed() < Duration::from_secs(10));
  // an input is fed to the stdin nobody else writes, then EOF
  let mut s = pipe(&["cat"]);
  s.run.input = Some(b"fed".to_vec());
  let p = m.start(s, None).unwrap();
  let x = m.wait(&p.process_id, LONG).await.unwrap().exit.unwrap();
  assert_eq!(x.exit_code, 0);
  assert_eq!(m.snapshot(&p.process_id).unwrap().stdout, b"fed");
  // its own cap on what it retains, within the manager's
  let mut s = pipe(&["head", "-c", "1000", "/dev/zero"]);
  s.run.max_output_bytes = 100;
  let p = m.start(s, None).unwrap();
  m.wait(&p.process_id, LONG).await.unwrap();
  let snap = m.snapshot(&p.process_id).unwrap();
  assert!(snap.truncated && snap.omitted_bytes >= 900, "{snap:?}");
  // refused where the caller writes the stdin
  for io in [
    ProcessIo::Pipe { stdin_open: true },
    ProcessIo::Pty { rows: 24, cols: 80 },
  ] {
    let mut s = spec(&["cat"], io);
    s.run.input = Some(b"x".to_vec());
    let e = m.start(s, None).unwrap_err();
    assert_eq!(e.code, ErrorCode::EINVAL, "{e:?}");
  }
}

#[tokio::test]
async fn events_in_order_with_output_before_exit() {
  let m = ProcessManager::new(ManagerConfig::default());
  let (tx, mut rx) = mpsc::channel(4);
  let s = m
    .start(pipe(&["sh", "-c", "echo a; echo b >&2; exit 7"]), Some(tx))
    .unwrap();
  let mut names = Vec::new();
  let mut seqs = Vec::new();
  while let Some(ev) = rx.recv().await {
    assert_eq!(&*ev.process_id, s.process_id);
    seqs.push(ev.seq);
    names.push(ev.kind.name());
    if let EventKind::Exited(x) = &ev.kind {
      assert_eq!(x.exit_code, 7);
    }
    if ev.kind == EventKind::Closed {
      break;
    }
  }
  assert_eq!(names.first(), Some(&"started"));
  assert_eq!(&names[names.len() - 2..], &["exited", "closed"]);
  assert_eq!(names.iter().filter(|n| **n == "output").count(), 2);
  assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
}

#[tokio::test]
async fn stderr_flood_does_not_deadlock() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m
    .start(
      pipe(&[
        "python3",
        "-c",
        "import sys\nfor _ in range(64): sys.stderr.buffer.write(b'e' * 65536); sys.stderr.flush()",
      ]),
      None,
    )
    .unwrap();
  let w = m.wait(&s.process_id, LONG).await.unwrap();
  assert_eq!(w.exit.unwrap().exit_code, 0);
  let snap = m.snapshot(&s.process_id).unwrap();
  assert!(snap.stdout.is_empty());
  assert!(snap.truncated);
  assert_eq!(snap.omitted_bytes + (1 << 20), 64 * 65536);
}

#[tokio::test]
async fn huge_output_is_bounded() {
  let m = small(4096);
  let s = m
    .start(
      pipe(&[
        "sh",
        "-c",
        "echo START; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo END",
      ]),
      None,
    )
    .unwrap();
  m.wait(&s.process_id, Some(Duration::from_secs(60)))
    .await
    .unwrap();
  let snap = m.snapshot(&s.process_id).unwrap();
  let text = String::from_utf8(snap.stdout).unwrap();
  assert!(text.starts_with("START\nxxx"));
  assert!(text.contains("[Output truncated]"));
  assert!(text.ends_with("xxx\nEND\n"));
  assert!(text.len() <= 4096 + 50);
  let r = m
    .read(&s.process_id, 0, usize::MAX, Duration::ZERO)
    .await
    .unwrap();
  assert!(r.truncated);
  let held: usize = r.chunks.iter().map(|c| c.data.len()).sum();
  assert!(held <= 4096);
  assert!(r.chunks.last().unwrap().data.ends_with(b"END\n"));
}

#[tokio::test]
async fn read_after_seq_is_exactly_once() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m
    .start(
      pipe(&[
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.02; done",
      ]),
      None,
    )
    .unwrap();
  let mut after = 0;
  let mut text = Vec::new();
  let mut last_seq_seen = 0;
  loop {
    let r = m
      .read(&s.process_id, after, 1 << 20, Duration::from_secs(5))
      .await
      .unwrap();
    for c in &r.chunks {
      assert!(c.seq > last_seq_seen);
      last_seq_seen = c.seq;
      text.extend_from_slice(&c.data);
    }
    assert!(!r.truncated);
    after = r.last_seq;
    if r.closed {
      break;
    }
  }
  let expected: String = (1..=10).map(|i| format!("line{i}\n")).collect();
  assert_eq!(String::from_utf8(text).unwrap(), expected);
  // a late reader gets what was retained
  let r = m
    .read(&s.process_id, 0, 1 << 20, Duration::ZERO)
    .await
    .unwrap();
  let all: Vec<u8> = r.chunks.iter().flat_map(|c| c.data.clone()).collect();
  assert_eq!(String::from_utf8(all).unwrap(), expected);
}

#[tokio::test]
async fn long_poll_waits_for_output() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m
    .start(pipe(&["sh", "-c", "sleep 0.3; echo late; sleep 5"]), None)
    .unwrap();
  let t0 = Instant::now();
  let r = m
    .read(&s.process_id, 1, 1 << 20, Duration::from_secs(10))
    .await
    .unwrap();
  assert!(t0.elapsed() >= Duration::from_millis(200));
  assert!(t0.elapsed() < Duration::from_secs(4));
  assert_eq!(r.chunks[0].data, b"late\n");
  // nothing new: returns after waitMs
  let t0 = Instant::now();
  let r = m
    .read(
      &s.process_id,
      r.last_seq,
      1 << 20,
      Duration::from_millis(200),
    )
    .await
    .unwrap();
  assert!(r.chunks.is_empty());
  assert!(t0.elapsed() >= Duration::from_millis(150));
  m.close().await;
}

#[tokio::test]
async fn terminate_graceful_and_force() {
  let m = ProcessManager::new(ManagerConfig::default());
  // handles TERM: exits cleanly on its own
  let polite = m
    .start(
      pipe(&[
        "sh",
        "-c",
        "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
      ]),
      None,
    )
    .unwrap();
  // ignores TERM: needs the SIGKILL
  let stubborn = m
    .start(
      pipe(&[
        "sh",
        "-c",
        "trap '' TERM; echo ready; while :; do sleep 0.05; done",
      ]),
      None,
    )
    .unwrap();
  for id in [&polite.process_id, &stubborn.process_id] {
    let r = m
      .read(id, 0, 1 << 20, Duration::from_secs(5))
      .await
      .unwrap();
    assert_eq!(r.chunks[0].data, b"ready\n");
  }
  let t0 = Instant::now();
  let r = m
    .terminate(
      &polite.process_id,
      TerminateMode::Graceful {
        timeout: Duration::from_secs(5),
      },
    )
    .await
    .unwrap();
  assert_eq!(r.exit.unwrap().exit_code, 0);
  assert!(t0.elapsed() < Duration::from_secs(3));
  assert!(
    String::from_utf8(m.snapshot(&polite.process_id).unwrap().stdout)
      .unwrap()
      .contains("bye")
  );

  let t0 = Instant::now();
  let r = m
    .terminate(
      &stubborn.process_id,
      TerminateMode::Graceful {
        timeout: Duration::from_millis(300),
      },
    )
    .await
    .unwrap();
  assert_eq!(r.exit.unwrap().signal.as_deref(), Some("SIGKILL"));
  assert!(t0.elapsed() >= Duration::from_millis(300));

  let s = m
    .start(pipe(&["sh", "-c", "trap '' TERM; sleep 30"]), None)
    .unwrap();
  let t0 = Instant::now();
  let r = m
    .terminate(&s.process_id, TerminateMode::Force)
    .await
    .unwrap();
  assert_eq!(r.exit.unwrap().signal.as_deref(), Some("SIGKILL"));
  assert!(t0.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn wait_times_out_while_running() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m.start(pipe(&["sleep", "30"]), None).unwrap();
  let r = m
    .wait(&s.process_id, Some(Duration::from_millis(100)))
    .await
    .unwrap();
  assert!(r.running);
  assert!(r.exit.is_none());
  m.close().await;
  assert!(!m.wait(&s.process_id, LONG).await.unwrap().running);
  assert_eq!(
    m.start(pipe(&["true"]), None).unwrap_err().code,
    ErrorCode::EINVAL
  );
}

#[tokio::test]
async fn limits_duplicates_and_expiry() {
  let m = ProcessManager::new(ManagerConfig {
    max_processes: 2,
    exited_retention: Duration::from_millis(300),
    ..Default::default()
  });
  let mut a = pipe(&["sleep", "30"]);
  a.process_id = Some("a".into());
  m.start(a.clone(), None).unwrap();
  assert_eq!(m.start(a, None).unwrap_err().code, ErrorCode::EEXIST);
  let b = m.start(pipe(&["true"]), None).unwrap();
  let e = m.start(pipe(&["true"]), None).unwrap_err();
  assert_eq!(e.code, ErrorCode::EBUSY);
  assert!(e.message().contains("maxProcesses is 2"), "{}", e.message());
  m.wait(&b.process_id, LONG).await.unwrap();
  // an exited process frees its slot but stays readable for a while
  let c = m.start(pipe(&["true"]), None).unwrap();
  assert!(m.snapshot(&b.process_id).is_ok());
  m.wait(&c.process_id, LONG).await.unwrap();
  tokio::time::sleep(Duration::from_millis(600)).await;
  assert_eq!(
    m.snapshot(&b.process_id).unwrap_err().code,
    ErrorCode::ESRCH
  );
  assert_eq!(m.list().len(), 1);
  m.terminate("a", TerminateMode::Force).await.unwrap();
}

#[tokio::test]
async fn spawn_failure_reports_failed() {
  let m = ProcessManager::new(ManagerConfig::default());
  let (tx, mut rx) = mpsc::channel(4);
  let e = m
    .start(pipe(&["no-such-program-xyz"]), Some(tx))
    .unwrap_err();
  assert_eq!(e.code, ErrorCode::ENOENT);
  let ev = rx.recv().await.unwrap();
  assert_eq!(ev.kind.name(), "failed");
  assert!(m.list().is_empty());
  // the handle is free again
  let mut s = pipe(&["true"]);
  s.process_id = Some(ev.process_id.to_string());
  assert!(m.start(s, None).is_ok());
}

#[tokio::test]
async fn pty_output_tail_is_delivered_on_fast_exit() {
  let m = ProcessManager::new(ManagerConfig::default());
  for _ in 0..5 {
    let s = m
      .start(
        spec(
          &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo LAST",
          ],
          ProcessIo::Pty { rows: 24, cols: 80 },
        ),
        None,
      )
      .unwrap();
    let w = m.wait(&s.process_id, LONG).await.unwrap();
    assert_eq!(w.exit.unwrap().exit_code, 0);
    let t = String::from_utf8(m.snapshot(&s.process_id).unwrap().terminal).unwrap();
    assert!(
      t.contains("line1999\r\nLAST\r\n"),
      "{}",
      &t[t.len().saturating_sub(100)..]
    );
  }
}

#[tokio::test]
async fn pty_resize_and_term() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m
    .start(spec(&["sh"], ProcessIo::Pty { rows: 24, cols: 80 }), None)
    .unwrap();
  let id = &s.process_id;
  m.write(id, b"stty size; echo \"term=$TERM\"\n")
    .await
    .unwrap();
  let text = read_until(&m, id, "term=xterm").await;
  assert!(text.contains("24 80"), "{text}");
  m.resize(id, 30, 100).unwrap();
  m.write(id, b"stty size\n").await.unwrap();
  let text = read_until(&m, id, "30 100").await;
  assert!(text.contains("30 100"));
  m.write(id, b"exit 0\n").await.unwrap();
  assert_eq!(m.wait(id, LONG).await.unwrap().exit.unwrap().exit_code, 0);
  let pipe_proc = m.start(pipe(&["true"]), None).unwrap();
  assert_eq!(
    m.resize(&pipe_proc.process_id, 1, 1).unwrap_err().code,
    ErrorCode::EINVAL
  );
}

async fn read_until(m: &ProcessManager, id: &str, needle: &str) -> String {
  let mut after = 0;
  let mut text = String::new();
  let deadline = Instant::now() + Duration::from_secs(10);
  while Instant::now() < deadline {
    let r = m
      .read(id, after, 1 << 20, Duration::from_millis(500))
      .await
      .unwrap();
    for c in &r.chunks {
      text.push_str(&String::from_utf8_lossy(&c.data));
    }
    after = r.last_seq;
    if text.contains(needle) || r.closed {
      break;
    }
  }
  text
}

#[tokio::test]
async fn drop_kills_processes() {
  let m = ProcessManager::new(ManagerConfig::default());
  let s = m.start(pipe(&["sleep", "30"]), None).unwrap();
  let pid = s.pid as i32;
  drop(m);
  let deadline = Instant::now() + Duration::from_secs(5);
  while crate::process::registry::group_alive(pid) && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(!crate::process::registry::group_alive(pid));
}

fn pty(argv: &[&str]) -> StartSpec {
  spec(argv, ProcessIo::Pty { rows: 24, cols: 80 })
}

/// Ignore SIGXFSZ and SIGPIPE in this test process, as Node does (an ignored
/// disposition survives fork and exec).
fn ignore_like_node() {
  // SAFETY: SIG_IGN for two standard signals changes only their disposition in this test process;
  // no handler of ours depends on them.
  unsafe {
    libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
  }
}

#[tokio::test]
async fn pty_child_starts_with_default_signal_dispositions() {
  ignore_like_node();
  let m = ProcessManager::new(ManagerConfig::default());
  let dir = tempfile::tempdir().unwrap();
  let script = format!(
    "grep SigIgn /proc/self/status; (ulimit -f 1; head -c 100000 /dev/zero > {}/f); echo rc=$?",
    dir.path().display()
  );
  let s = m.start(pty(&["bash", "-c", &script]), None).unwrap();
  let w = m.wait(&s.process_id, LONG).await.unwrap();
  assert_eq!(w.exit.unwrap().exit_code, 0);
  let t = String::from_utf8(m.snapshot(&s.process_id).unwrap().terminal).unwrap();
  let ign = t
    .lines()
    .find_map(|l| l.strip_prefix("SigIgn:"))
    .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
    .unwrap_or_else(|| panic!("{t}"));
  // bit N-1 is signal N
  assert_eq!(ign & (1 << (libc::SIGXFSZ - 1)), 0, "SIGXFSZ ignored: {t}");
  assert_eq!(ign & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored: {t}");
  // head is killed by SIGXFSZ (128+25) instead of seeing EFBIG
  assert!(t.contains("rc=153"), "{t}");
  assert_eq!(std::fs::metadata(dir.path().join("f")).unwrap().len(), 1024);
}

#[tokio::test]
async fn pty_limits_hold_before_exec() {
  ignore_like_node();
  let m = ProcessManager::new(ManagerConfig::default());
  let dir = tempfile::tempdir().unwrap();
  let mut s = pty(&[
    "sh",
    "-c",
    &format!(
      "exec head -c 10000000 /dev/zero > {}/big",
      dir.path().display()
    ),
  ]);
  s.process.limits.file_size_bytes = Some(1 << 20);
  let s = m.start(s, None).unwrap();
  let x = m.wait(&s.process_id, LONG).await.unwrap().exit.unwrap();
  assert_eq!(x.signal.as_deref(), Some("SIGXFSZ"));
  assert_eq!(
    x.error.unwrap().message(),
    "exec: file size limit of 1 MiB exceeded (ELIMIT)"
  );
  assert_eq!(
    std::fs::metadata(dir.path().join("big")).unwrap().len(),
    1 << 20
  );
  // the program's very first view of its limits
  let mut s = pty(&["sh", "-c", "ulimit -n; ulimit -t"]);
  s.process.limits.open_files = Some(33);
  s.process.limits.cpu_seconds = Some(7);
  let s = m.start(s, None).unwrap();
  m.wait(&s.process_id, LONG).await.unwrap();
  let t = String::from_utf8(m.snapshot(&s.process_id).unwrap().terminal).unwrap();
  assert_eq!(t, "33\r\n7\r\n");
}

#[tokio::test]
async fn pty_spawn_errors_and_leaked_fds() {
  let m = ProcessManager::new(ManagerConfig::default());
  let e = m.start(pty(&["no-such-program-xyz"]), None).unwrap_err();
  assert_eq!(e.code, ErrorCode::ENOENT);
  let dir = tempfile::tempdir().unwrap();
  let e = m
    .start(pty(&[dir.path().to_str().unwrap()]), None)
    .unwrap_err();
  assert!(
    matches!(e.code, ErrorCode::EACCES | ErrorCode::ESPAWN),
    "{e:?}"
  );
  // a descriptor of the host without FD_CLOEXEC does not reach the child
  // SAFETY: a literal NUL-terminated path; the test owns the descriptor and closes it below.
  let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY) };
  assert!(fd > 2);
  let s = m
    .start(
      pty(&[
        "sh",
        "-c",
        &format!("[ -e /proc/self/fd/{fd} ] && echo leaked || echo closed"),
      ]),
      None,
    )
    .unwrap();
  m.wait(&s.process_id, LONG).await.unwrap();
  // SAFETY: `fd` was opened above by this test, is owned by it and closed once.
  unsafe { libc::close(fd) };
  let t = String::from_utf8(m.snapshot(&s.process_id).unwrap().terminal).unwrap();
  assert_eq!(t, "closed\r\n");
}

#[test]
fn settings_are_checked_by_name() {
  let mut c = ManagerConfig::default();
  c.set("retainedOutputBytes", 4096.0).unwrap();
  c.set("exitedRetentionMs", 1.5).unwrap();
  assert_eq!(c.retained_output_bytes, 4096);
  assert_eq!(c.exited_retention, Duration::from_micros(1500));
  assert_eq!(
    c.set("maxProcesses", 0.0),
    Err("must be at least 1, got 0".into())
  );
  assert_eq!(
    c.set("maxProcesses", -1.0),
    Err("must not be negative, got -1".into())
  );
  assert_eq!(c.max_processes, DEFAULT_MAX_PROCESSES);
  assert!(c.set("maxProcs", 3.0).unwrap_err().contains("maxProcesses"));
}
