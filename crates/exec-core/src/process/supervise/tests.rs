//! Tests of a run: capture, timeout, cancel, kill, the drain (here), resource
//! limits (`limit_tests`), the fork bomb (`bomb_test`) and the capture of big
//! output, skimmed or read (`capture_tests`).

use std::mem::MaybeUninit;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::ErrorCode;
use crate::platform;

use super::*;
use crate::buffer::HeadTailBuffer;

fn sh(script: &str) -> ProcessSpec {
  ProcessSpec::new("/bin/sh").arg("-c").arg(script)
}

async fn capture(spec: &ProcessSpec, policy: &RunPolicy) -> (RunOutcome, String, String) {
  let f = run(
    spec,
    policy,
    HeadTailBuffer::new(1 << 20),
    HeadTailBuffer::new(1 << 20),
    &CancellationToken::new(),
  )
  .await
  .unwrap();
  (
    f.outcome,
    String::from_utf8(f.stdout.render().bytes).unwrap(),
    String::from_utf8(f.stderr.render().bytes).unwrap(),
  )
}

#[tokio::test]
async fn captures_both_streams_and_exit_code() {
  let (o, out, err) = capture(&sh("echo out; echo err >&2; exit 3"), &RunPolicy::default()).await;
  assert_eq!(out, "out\n");
  assert_eq!(err, "err\n");
  assert_eq!(o.exit_code, 3);
  assert_eq!(o.stdout_bytes, 4);
  assert!(o.error.is_none());
}

#[tokio::test]
async fn timeout_kills_group_and_keeps_output() {
  let mut spec = sh("echo before; sleep 10");
  spec.run.timeout = Some(Duration::from_millis(300));
  let (o, out, _) = capture(&spec, &RunPolicy::default()).await;
  assert!(o.timed_out);
  assert_eq!(o.exit_code, 124);
  assert_eq!(out, "before\n");
  assert_eq!(
    o.error.unwrap().message(),
    "exec: Process timeout after 0.3s (TIMEOUT)"
  );
  assert!(o.duration < Duration::from_secs(5));
}

#[tokio::test]
async fn sigterm_ignoring_child_is_killed() {
  let mut spec = sh("trap '' TERM; echo ready; sleep 10 & wait; sleep 10");
  spec.run.timeout = Some(Duration::from_millis(200));
  spec.run.kill_grace = Duration::from_millis(200);
  let (o, out, _) = capture(&spec, &RunPolicy::default()).await;
  assert!(o.timed_out);
  assert_eq!(o.signal.as_deref(), Some("SIGKILL"));
  assert_eq!(out, "ready\n");
  assert!(o.duration < Duration::from_secs(5));
}

#[tokio::test]
async fn grandchild_holding_pipe_does_not_delay() {
  // the grandchild escapes the group, so only the drain bounds the wait
  let spec = sh("echo hi; setsid sleep 5 & exit 0");
  let (o, out, _) = capture(&spec, &RunPolicy::default()).await;
  assert_eq!(out, "hi\n");
  assert_eq!(o.exit_code, 0);
  assert!(o.duration < Duration::from_secs(2), "{:?}", o.duration);
}

#[tokio::test]
async fn a_cancel_before_the_start_spawns_nothing() {
  let dir = tempfile::tempdir().unwrap();
  let file = dir.path().join("ran");
  let cancel = CancellationToken::new();
  cancel.cancel();
  for _ in 0..20 {
    let spec = sh(&format!("touch '{}'", file.display()));
    let r = run(&spec, &RunPolicy::default(), Discard, Discard, &cancel).await;
    assert_eq!(r.err().map(|e| e.code), Some(ErrorCode::ECANCELED));
  }
  tokio::time::sleep(Duration::from_millis(100)).await;
  assert!(!file.exists());
}

#[tokio::test]
async fn cancel_reports_canceled() {
  let cancel = CancellationToken::new();
  let c2 = cancel.clone();
  tokio::spawn(async move {
    tokio::time::sleep(Duration::from_millis(100)).await;
    c2.cancel();
  });
  let f = run(
    &sh("sleep 10"),
    &RunPolicy::default(),
    Discard,
    Discard,
    &cancel,
  )
  .await
  .unwrap();
  assert!(f.outcome.canceled);
  assert_eq!(f.outcome.exit_code, 128 + 15);
  assert_eq!(f.outcome.error.unwrap().code, ErrorCode::ECANCELED);
}

#[tokio::test]
async fn stdin_bytes_and_null() {
  let mut spec = ProcessSpec::new("/bin/cat");
  spec.run.input = Some(b"piped in".to_vec());
  let (_, out, _) = capture(&spec, &RunPolicy::default()).await;
  assert_eq!(out, "piped in");
  let (o, out, _) = capture(&sh("read x; echo \"got:$x:$?\""), &RunPolicy::default()).await;
  assert_eq!(out, "got::1\n");
  assert_eq!(o.exit_code, 0);
}

#[tokio::test]
async fn large_output_is_bounded() {
  let f = run(
    &sh("head -c 50000000 /dev/zero"),
    &RunPolicy::default(),
    HeadTailBuffer::new(1000),
    Discard,
    &CancellationToken::new(),
  )
  .await
  .unwrap();
  assert_eq!(f.outcome.stdout_bytes, 50_000_000);
  assert_eq!(f.stdout.total(), 50_000_000);
  assert!(f.stdout.held() <= 1000);
}

#[test]
fn durations() {
  assert_eq!(format_duration(Duration::from_millis(1000)), "1s");
  assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
  assert_eq!(format_duration(Duration::from_millis(250)), "0.25s");
}

#[cfg(test)]
mod limit_tests {
  use super::*;
  use crate::process::limits::Limits;

  pub(super) async fn run_limited(script: &str, limits: Limits) -> RunOutcome {
    let mut spec = ProcessSpec::new("/bin/bash").arg("-c").arg(script);
    spec.process.limits = limits;
    spec.run.timeout = Some(Duration::from_secs(20));
    spec.run.kill_grace = Duration::from_millis(200);
    run(
      &spec,
      &RunPolicy::default(),
      Discard,
      Discard,
      &CancellationToken::new(),
    )
    .await
    .unwrap()
    .outcome
  }

  #[tokio::test]
  async fn memory_limit_stops_the_tree() {
    let o = run_limited(
      "python3 -c 'x = bytearray(400 * 1024 * 1024); import time; time.sleep(10)'",
      Limits {
        memory_bytes: Some(128 << 20),
        ..Default::default()
      },
    )
    .await;
    let e = o.error.expect("limit error");
    assert_eq!(
      e.message(),
      "exec: memory limit of 128 MiB exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn process_limit_stops_a_fork_bomb() {
    // exponential but bounded (depth 10: at most ~2000 processes), so that a
    // failing watchdog cannot take the machine down
    let mark_probe = "b() { [ $1 -lt 10 ] && { b $(($1+1)) & b $(($1+1)) & }; sleep 5; }; b 0";
    let o = run_limited(
      mark_probe,
      Limits {
        max_processes: Some(30),
        ..Default::default()
      },
    )
    .await;
    let e = o.error.expect("limit error");
    assert_eq!(e.message(), "exec: process limit of 30 exceeded (ELIMIT)");
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn cpu_limit_is_reported() {
    let o = run_limited(
      "exec python3 -c 'while True: pass'",
      Limits {
        cpu_seconds: Some(1),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGXCPU"));
    assert_eq!(
      o.error.unwrap().message(),
      "exec: CPU time limit of 1s exceeded (ELIMIT)"
    );
  }

  #[tokio::test]
  async fn memory_limit_holds_for_a_scrubbed_environment() {
    // `env -i`: the mark is gone, the process is still in the tree
    let o = run_limited(
      "env -i python3 -c 'x = b\"a\" * (300 << 20); import time; time.sleep(10)'",
      Limits {
        memory_bytes: Some(50 << 20),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(
      o.error.expect("limit error").message(),
      "exec: memory limit of 50 MiB exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(8));
  }

  #[tokio::test]
  async fn cpu_hard_limit_is_reported_when_sigxcpu_is_ignored() {
    let o = run_limited(
      "trap '' XCPU; exec python3 -c 'import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass'",
      Limits {
        cpu_seconds: Some(1),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(
      o.error.expect("limit error").message(),
      "exec: CPU time limit of 1s exceeded (ELIMIT)"
    );
  }

  #[tokio::test]
  async fn the_fork_path_refuses_what_the_fast_path_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("no-shebang");
    std::fs::write(&script, "echo ran-by-sh\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for (limits, die) in [
      (Limits::default(), false),
      (
        Limits {
          cpu_seconds: Some(10),
          ..Default::default()
        },
        false,
      ),
      (Limits::default(), true),
    ] {
      let mut spec = ProcessSpec::new(&script);
      spec.process.limits = limits;
      spec.process.die_with_parent = die;
      let e = Execution::spawn(&spec, 0, Discard, Discard)
        .err()
        .expect("ENOEXEC");
      assert_eq!(e.code, ErrorCode::ESPAWN);
      assert!(
        e.what.ends_with("Exec format error (os error 8)"),
        "{}",
        e.what
      );
    }
  }

  #[tokio::test]
  async fn file_size_limit_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
      "exec head -c 10000000 /dev/zero > {}/big",
      dir.path().display()
    );
    let o = run_limited(
      &script,
      Limits {
        file_size_bytes: Some(1 << 20),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.signal.as_deref(), Some("SIGXFSZ"));
    assert_eq!(
      o.error.unwrap().message(),
      "exec: file size limit of 1 MiB exceeded (ELIMIT)"
    );
    assert_eq!(
      std::fs::metadata(dir.path().join("big")).unwrap().len(),
      1 << 20
    );
  }

  #[tokio::test]
  async fn open_files_limit_applies() {
    let o = run_limited(
      "ulimit -n",
      Limits {
        open_files: Some(64),
        ..Default::default()
      },
    )
    .await;
    assert_eq!(o.exit_code, 0);
  }
}

#[cfg(test)]
mod bomb_test {
  use super::*;
  use crate::process::limits::Limits;

  /// The classic, unbounded fork bomb: only where the kernel can cap it (a
  /// pids cgroup), never with the watchdog alone.
  #[tokio::test]
  async fn classic_fork_bomb_is_capped_and_stopped() {
    let mut probe = crate::process::cgroup::TreeCgroups::create("probe-bomb-test", Some(1), None);
    if !probe.has_pids() {
      eprintln!("no writable pids cgroup here: the unbounded bomb is not run");
      return;
    }
    probe.remove();
    // a limit kill has no grace: run_limited's 200 ms changes nothing here
    let limits = Limits {
      max_processes: Some(50),
      ..Default::default()
    };
    let o = super::limit_tests::run_limited(":(){ :|:& };:; sleep 10", limits).await;
    assert_eq!(
      o.error.unwrap().message(),
      "exec: process limit of 50 exceeded (ELIMIT)"
    );
    assert!(o.duration < Duration::from_secs(10), "{:?}", o.duration);
  }
}

#[cfg(test)]
mod capture_tests {
  //! The capture of big output: what a head+tail sink keeps, whether the
  //! pump skims (drops in the kernel) or reads every byte, must be the same,
  //! with the exact omitted count.
  use super::*;
  use crate::buffer::HeadTailBuffer;

  /// A head+tail buffer that counts what the pump skimmed.
  struct Counting(HeadTailBuffer, u64);
  impl OutputSink for Counting {
    fn write(&mut self, data: &[u8]) {
      self.0.push(data);
    }
    fn keeps_head_tail(&self) -> bool {
      true
    }
    fn tail_window(&self) -> Option<usize> {
      self.0.tail_window()
    }
    fn skipped(&mut self, n: u64) {
      self.1 += n;
      self.0.skip(n);
    }
  }

  /// The same buffer behind a sink that does not declare head+tail: every
  /// byte is read, as for streaming.
  struct ReadAll(HeadTailBuffer);
  impl OutputSink for ReadAll {
    fn write(&mut self, data: &[u8]) {
      self.0.push(data);
    }
  }

  /// A sink that lends room for the reads, as a streaming sink filling
  /// chunks does: rooms of `room` bytes at most, every other one declined
  /// (those reads go through `write`), and what is left of a room lent again.
  struct Lending {
    got: Vec<u8>,
    open: Vec<u8>,
    room: usize,
    lends: u64,
    writes: u64,
  }
  impl Lending {
    fn new(room: usize) -> Self {
      Lending {
        got: Vec::new(),
        open: Vec::with_capacity(room),
        room,
        lends: 0,
        writes: 0,
      }
    }
  }
  impl OutputSink for Lending {
    fn write(&mut self, data: &[u8]) {
      self.writes += 1;
      self.got.extend_from_slice(&self.open);
      self.open.clear();
      self.got.extend_from_slice(data);
    }
    fn lend(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
      if (self.lends + self.writes).is_multiple_of(2) && self.open.is_empty() {
        return None;
      }
      let left = self.room - self.open.len();
      Some(&mut self.open.spare_capacity_mut()[..left])
    }
    fn filled(&mut self, n: usize) {
      self.lends += 1;
      assert!(
        self.open.len() + n <= self.room,
        "a read fills at most the room lent"
      );
      // SAFETY: the pump wrote the first `n` bytes of the room
      unsafe { self.open.set_len(self.open.len() + n) };
      if self.open.len() == self.room {
        self.got.extend_from_slice(&self.open);
        self.open.clear();
      }
    }
    async fn finish(&mut self) {
      self.got.extend_from_slice(&self.open);
      self.open.clear();
    }
  }

  #[tokio::test]
  async fn a_sink_that_lends_room_gets_every_byte_in_order() {
    let all = seq(1, 300_000);
    let f = run(
      &bash("seq 1 300000; seq 1 300000 >&2"),
      &RunPolicy::default(),
      Lending::new(4093),
      Lending::new(65536),
      &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(f.outcome.exit_code, 0);
    for (sink, count) in [
      (&f.stdout, f.outcome.stdout_bytes),
      (&f.stderr, f.outcome.stderr_bytes),
    ] {
      assert_eq!(count, all.len() as u64);
      assert!(sink.got == all, "bytes lost or out of order");
      assert!(sink.lends > 0 && sink.writes > 0, "both ways were taken");
    }
  }

  /// What `seq from to` prints.
  fn seq(from: u64, to: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for i in from..=to {
      v.extend_from_slice(format!("{i}\n").as_bytes());
    }
    v
  }

  /// What a buffer of `cap` keeps of `all`.
  fn expected(all: &[u8], cap: usize) -> String {
    let h = cap / 2;
    let t = cap - h;
    let omitted = all.len() - cap;
    format!(
      "{}\n[Output truncated] {omitted} bytes omitted\n{}",
      String::from_utf8_lossy(&all[..h]),
      String::from_utf8_lossy(&all[all.len() - t..])
    )
  }

  fn bash(script: &str) -> ProcessSpec {
    ProcessSpec::new("/bin/bash").arg("-c").arg(script)
  }

  async fn both(
    spec: &ProcessSpec,
    policy: &RunPolicy,
    cap: usize,
  ) -> Finished<Counting, Counting> {
    run(
      spec,
      policy,
      Counting(HeadTailBuffer::new(cap), 0),
      Counting(HeadTailBuffer::new(cap), 0),
      &CancellationToken::new(),
    )
    .await
    .unwrap()
  }

  #[tokio::test]
  async fn skimmed_output_keeps_exact_head_tail_and_count_on_both_streams() {
    // 14.9 MB each, far more than the pipe holds
    let all = seq(1, 2_000_000);
    let f = both(
      &bash("seq 1 2000000; seq 1 2000000 >&2"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    assert_eq!(f.outcome.exit_code, 0);
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(f.outcome.stderr_bytes, all.len() as u64);
    for (name, s) in [("stdout", &f.stdout), ("stderr", &f.stderr)] {
      let r = s.0.render();
      assert_eq!(r.omitted, (all.len() - (1 << 20)) as u64, "{name}");
      assert_eq!(
        String::from_utf8(r.bytes).unwrap(),
        expected(&all, 1 << 20),
        "{name}"
      );
      if platform::ZERO_COPY_DISCARD {
        // most of it never reached user space
        assert!(s.1 > all.len() as u64 / 2, "{name}: skimmed {}", s.1);
      }
    }
  }

  #[tokio::test]
  async fn skimming_and_reading_every_byte_keep_the_same() {
    for cap in [1000usize, 64 << 10, 3 << 20] {
      let spec = bash("seq 1 1500000");
      let a = both(&spec, &RunPolicy::default(), cap).await;
      let b = run(
        &spec,
        &RunPolicy::default(),
        ReadAll(HeadTailBuffer::new(cap)),
        Discard,
        &CancellationToken::new(),
      )
      .await
      .unwrap();
      assert_eq!(a.outcome.stdout_bytes, b.outcome.stdout_bytes, "cap {cap}");
      // a sink that does not declare head+tail was handed every byte
      assert_eq!(b.stdout.0.total(), b.outcome.stdout_bytes, "cap {cap}");
      assert_eq!(b.outcome.stdout_bytes, seq(1, 1_500_000).len() as u64);
      assert_eq!(a.stdout.0.render(), b.stdout.0.render(), "cap {cap}");
      assert_eq!(
        String::from_utf8(a.stdout.0.render().bytes).unwrap(),
        expected(&seq(1, 1_500_000), cap),
        "cap {cap}"
      );
    }
  }

  #[tokio::test]
  async fn a_writer_that_pauses_with_the_tail_in_the_pipe_loses_nothing() {
    // the pauses leave bytes in the pipe with no wake-up: read at the recheck
    let f = both(
      &bash("seq 1 300000; sleep 0.2; seq 300001 600000; sleep 0.2; seq 600001 700000"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    let all = seq(1, 700_000);
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(
      String::from_utf8(f.stdout.0.render().bytes).unwrap(),
      expected(&all, 1 << 20)
    );
  }

  #[tokio::test]
  async fn a_grandchild_holding_the_pipe_neither_hangs_nor_loses_the_tail() {
    // the tail waits in the pipe; the shell exits; the pipe stays open
    let f = both(
      &bash("seq 1 400000; setsid sleep 5 & exit 0"),
      &RunPolicy::default(),
      1 << 20,
    )
    .await;
    let all = seq(1, 400_000);
    assert!(
      f.outcome.duration < Duration::from_secs(2),
      "{:?}",
      f.outcome.duration
    );
    assert_eq!(f.outcome.stdout_bytes, all.len() as u64);
    assert_eq!(
      String::from_utf8(f.stdout.0.render().bytes).unwrap(),
      expected(&all, 1 << 20)
    );
  }

  #[tokio::test]
  async fn a_timeout_mid_stream_keeps_an_exact_count_and_a_contiguous_tail() {
    let mut spec = bash("seq 1 1000000000");
    spec.run.timeout = Some(Duration::from_millis(400));
    spec.run.kill_grace = Duration::from_millis(100);
    let cap = 1 << 20;
    let f = both(&spec, &RunPolicy::default(), cap).await;
    assert!(f.outcome.timed_out);
    let total = f.outcome.stdout_bytes;
    assert_eq!(f.stdout.0.total(), total);
    assert!(total > 4 * cap as u64, "only {total} bytes in 400 ms");
    let r = f.stdout.0.render();
    let text = String::from_utf8(r.bytes).unwrap();
    let (head, tail) = text
      .split_once(&HeadTailBuffer::marker(r.omitted))
      .expect("marker");
    assert_eq!(head.as_bytes(), &seq(1, 200_000)[..cap / 2]);
    assert_eq!(tail.len(), cap - cap / 2);
    // the tail is what seq printed last: its last complete number ends at
    // the byte offset the count says
    let lines: Vec<&str> = tail.split('\n').collect();
    let last_full: u64 = lines[lines.len() - 2].parse().unwrap();
    let partial = lines[lines.len() - 1];
    let offset_after = |n: u64| -> u64 {
      // bytes `seq 1 n` prints
      let mut len = 0;
      let mut lo = 1u64;
      let mut digits = 1u64;
      while lo <= n {
        let hi = (lo * 10 - 1).min(n);
        len += (hi - lo + 1) * (digits + 1);
        lo *= 10;
        digits += 1;
      }
      len
    };
    assert_eq!(offset_after(last_full) + partial.len() as u64, total);
    for w in lines[1..lines.len() - 1].windows(2) {
      assert_eq!(
        w[0].parse::<u64>().unwrap() + 1,
        w[1].parse::<u64>().unwrap()
      );
    }
  }
}
