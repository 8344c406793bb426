//! The orphan reaper with the test process as a child subreaper. Its own test
//! binary (so its own process): being a subreaper changes the process for
//! every test in it.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use exec_core::buffer::HeadTailBuffer;
use exec_core::process::marks;
use exec_core::process::reaper;
use exec_core::process::registry;
use exec_core::process::supervise::{run, ProcessSpec, RunPolicy};
use exec_core::CancellationToken;

/// A child that exits once its parent has become `sleep` (which never reaps
/// it; the shell would if the child died before the exec), then the sleep
/// ends and the zombie is reparented.
const UNSEEN: &str = r#"(sh -c 'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.005; done' & echo $!; exec sleep 0.1) & wait"#;

fn me() -> i32 {
  std::process::id() as i32
}

fn exists(pid: i32) -> bool {
  Path::new(&format!("/proc/{pid}")).exists()
}

async fn bash(script: &str, cleanup: bool) -> (i32, String) {
  let spec = ProcessSpec::new("/bin/bash").arg("-c").arg(script);
  let policy = RunPolicy {
    cleanup_group_on_exit: cleanup,
    ..RunPolicy::default()
  };
  let f = run(
    &spec,
    &policy,
    HeadTailBuffer::new(1 << 16),
    HeadTailBuffer::new(1 << 16),
    &CancellationToken::new(),
  )
  .await
  .unwrap();
  let out = String::from_utf8(f.stdout.render().bytes).unwrap();
  (f.outcome.exit_code, out)
}

/// Wait until the reaper's count exceeds `before` (it counts just after its
/// waitpid, so a moment after the /proc entry went).
async fn counted_above(before: u64) -> bool {
  let end = Instant::now() + Duration::from_secs(2);
  while reaper::reaped_count() <= before && Instant::now() < end {
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  reaper::reaped_count() > before
}

/// Wait (on the runtime, so that the reaper task runs) until `pid` has no
/// /proc entry at all: not running, not a zombie.
async fn wait_no_entry(pid: i32, ms: u64) -> bool {
  let end = Instant::now() + Duration::from_millis(ms);
  while Instant::now() < end {
    if !exists(pid) {
      return true;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  !exists(pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_fork_orphan_is_reaped_with_cleanup_off() {
  assert!(reaper::set_subreaper(true).unwrap());
  let (code, out) = bash(
    "(sleep 0.3 >/dev/null 2>&1 </dev/null & echo $!) & wait",
    false,
  )
  .await;
  assert_eq!(code, 0);
  let pid: i32 = out.trim().parse().unwrap();
  // its parent (the subshell) is gone: it was reparented to us
  let st = marks::stat(pid).expect("the sleep still runs");
  assert_eq!(st.ppid, me(), "reparented to the subreaper");
  assert!(
    wait_no_entry(pid, 5000).await,
    "the orphan is reaped, not left a zombie"
  );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setsid_orphan_killed_by_the_sweep_is_reaped() {
  assert!(reaper::set_subreaper(true).unwrap());
  let before = reaper::reaped_count();
  let (code, out) = bash(
    "setsid sleep 100 >/dev/null 2>&1 </dev/null & echo $!",
    true,
  )
  .await;
  assert_eq!(code, 0);
  let pid: i32 = out.trim().parse().unwrap();
  assert!(wait_no_entry(pid, 5000).await, "killed and reaped");
  assert!(counted_above(before).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_without_our_mark_is_left_to_its_owner() {
  assert!(reaper::set_subreaper(true).unwrap());
  // a direct child of the host that does not carry our mark (as Node's
  // child_process children): it must stay a zombie until its owner waits
  let mut child = Command::new("sh")
    .arg("-c")
    .arg("exit 7")
    .env_remove(marks::MARK_VAR)
    .spawn()
    .unwrap();
  let pid = child.id() as i32;
  // and one that leads its own group, as a `detached` child_process child
  let mut leader = Command::new("sh")
    .arg("-c")
    .arg("exit 9")
    .env_remove(marks::MARK_VAR)
    .process_group(0)
    .spawn()
    .unwrap();
  let leader_pid = leader.id() as i32;
  // runs with orphans keep the reaper busy meanwhile
  for _ in 0..3 {
    let (code, _) = bash("(sleep 0.05 >/dev/null 2>&1 &) ; true", false).await;
    assert_eq!(code, 0);
  }
  tokio::time::sleep(reaper::INTERVAL * 3).await;
  for _ in 0..3 {
    reaper::pass();
  }
  assert_eq!(marks::stat(pid).map(|s| s.state), Some(b'Z'));
  assert_eq!(marks::stat(leader_pid).map(|s| s.state), Some(b'Z'));
  assert_eq!(
    child.wait().unwrap().code(),
    Some(7),
    "its owner gets the exit"
  );
  assert_eq!(leader.wait().unwrap().code(), Some(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_that_exits_unseen_in_the_run_group_is_reaped() {
  assert!(reaper::set_subreaper(true).unwrap());
  // the child exits as soon as its parent has exec'd sleep, which never
  // reaps it, so it comes to us as a zombie when the sleep ends: never seen
  // alive, its mark never read; its group (the run's) proves it ours
  for _ in 0..5 {
    let before = reaper::reaped_count();
    let (code, out) = bash(UNSEEN, false).await;
    assert_eq!(code, 0);
    let pid: i32 = out.trim().parse().unwrap();
    assert!(wait_no_entry(pid, 5000).await, "pid {pid} reaped");
    assert!(counted_above(before).await, "reaped here");
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_direct_child_with_our_mark_is_left_to_its_owner() {
  assert!(reaper::set_subreaper(true).unwrap());
  // like an execution's child: our mark, registered from before the spawn
  // guard is released until its owner reaped it
  let ticket = registry::begin_spawn(4242).unwrap();
  let mut child = Command::new("sh")
    .arg("-c")
    .arg("sleep 0.1; exit 3")
    .env(marks::MARK_VAR, marks::new_mark(4242))
    .spawn()
    .unwrap();
  let pid = child.id() as i32;
  ticket.register(pid);
  let end = Instant::now() + Duration::from_secs(3);
  while marks::stat(pid).map(|s| s.state) != Some(b'Z') && Instant::now() < end {
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  for _ in 0..3 {
    reaper::pass();
    tokio::time::sleep(reaper::INTERVAL).await;
  }
  assert_eq!(marks::stat(pid).map(|s| s.state), Some(b'Z'));
  assert_eq!(child.wait().unwrap().code(), Some(3));
  registry::unregister(pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_orphans_at_once() {
  assert!(reaper::set_subreaper(true).unwrap());
  let runs = (0..10).map(|i| {
    let script = if i % 2 == 0 {
      "(sleep 0.2 >/dev/null 2>&1 </dev/null & echo $!) & wait"
    } else {
      "setsid sleep 100 >/dev/null 2>&1 </dev/null & echo $!"
    };
    tokio::spawn(async move { bash(script, i % 2 == 1).await })
  });
  let mut pids = Vec::new();
  for r in runs {
    let (code, out) = r.await.unwrap();
    assert_eq!(code, 0);
    pids.push(out.trim().parse::<i32>().unwrap());
  }
  for pid in pids {
    assert!(wait_no_entry(pid, 5000).await, "pid {pid} reaped");
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_is_light() {
  assert!(reaper::set_subreaper(true).unwrap());
  // 20 live children that are not ours (each is looked at: stat, and its
  // environment once)
  let mut kids: Vec<_> = (0..20)
    .map(|_| {
      Command::new("sleep")
        .arg("30")
        .env_remove(marks::MARK_VAR)
        .spawn()
        .unwrap()
    })
    .collect();
  reaper::pass();
  let n = 200;
  let t0 = Instant::now();
  for _ in 0..n {
    reaper::pass();
  }
  let per = t0.elapsed() / n;
  let threads = std::fs::read_dir("/proc/self/task").unwrap().count();
  println!("one look with {threads} threads and 20 foreign children: {per:?}");
  assert!(per < Duration::from_millis(20), "{per:?}");
  for k in &mut kids {
    k.kill().unwrap();
    k.wait().unwrap();
  }
}
