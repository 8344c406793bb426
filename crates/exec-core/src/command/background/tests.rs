//! Tests of the runner: results and their text, offloading, the environment,
//! timeouts and the background, kill and close, adoption, the cleanup, the
//! sweep of old logs.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::adopt::still_alive;
use crate::command::offload::LogStatus;
use crate::command::CommandSpec;
use crate::error::ErrorCode;
use crate::process::marks;

use super::*;

fn runner(dir: &Path) -> CommandRunner {
  CommandRunner::new(RunnerConfig {
    output_dir: dir.to_owned(),
    ..Default::default()
  })
}

fn opts(dir: &Path) -> CommandSpec {
  CommandSpec::new(dir)
}

#[tokio::test]
async fn runs_and_formats() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let res = r
    .run(
      "printf '\\e[31mred\\e[0m\\n'; echo err >&2; exit 3",
      opts(dir.path()),
    )
    .await;
  assert_eq!(res.stdout.text, "red\n");
  assert_eq!(res.stderr.text, "err\n");
  assert_eq!(res.exit_code, Some(3));
  assert!(res.is_error);
  assert_eq!(res.text, "stdout:\nred\n\nstderr:\nerr\n\nexit code: 3");
  assert_eq!(res.log, LogStatus::NotNeeded);
}

#[tokio::test]
async fn line_truncation_offloads_everything() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let res = r.run("seq 1 8500", opts(dir.path())).await;
  let path = res.log.path().expect("a log").to_owned();
  assert!(res.text.ends_with(&format!(
    "[stdout: Showing last 2000 of 8500 lines. Full output: {}]",
    path.display()
  )));
  let full = std::fs::read_to_string(&path).unwrap();
  assert_eq!(full.lines().count(), 8500);
  assert!(res.stdout.text.starts_with("6501\n"));
}

#[tokio::test]
async fn env_is_non_interactive_and_overridable() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let mut o = opts(dir.path());
  o.process.env.vars.push(("PAGER".into(), "less".into()));
  let res = r
    .run(
      "echo $PAGER $GIT_PAGER $GIT_TERMINAL_PROMPT $TERM $NO_COLOR",
      o,
    )
    .await;
  assert_eq!(res.stdout.text, "less cat 0 dumb 1\n");
}

#[tokio::test]
async fn read_gets_eof() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let t = Instant::now();
  let res = r.run("read x; echo \"status $?\"", opts(dir.path())).await;
  assert_eq!(res.stdout.text, "status 1\n");
  assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_commands_input_and_kill_grace_are_its_own() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let mut o = opts(dir.path());
  o.run.input = Some(b"hi\n".to_vec());
  let res = r.run("read x; echo \"got $x\"", o).await;
  assert_eq!(res.stdout.text, "got hi\n");
  let mut o = opts(dir.path());
  o.background = true;
  o.run.kill_grace = Duration::from_millis(1500);
  let res = r
    .run("trap '' TERM; echo ready; while :; do sleep 0.05; done", o)
    .await;
  let t = Instant::now();
  while !r.check(res.pid).unwrap().stdout.text.contains("ready") {
    assert!(t.elapsed() < Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  let t = Instant::now();
  let c = r.kill(res.pid).await.unwrap();
  assert!(
    t.elapsed() >= Duration::from_millis(1400),
    "{:?}",
    t.elapsed()
  );
  assert_eq!(c.signal.as_deref(), Some("SIGKILL"), "{c:?}");
}

#[tokio::test]
async fn timeout_backgrounds_then_check_and_list() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let mut o = opts(dir.path());
  o.run.timeout = Some(Duration::from_millis(300));
  let res = r.run("echo start; sleep 1; echo done", o).await;
  let pid = res.background.as_ref().unwrap().pid;
  assert!(res.timed_out);
  assert_eq!(res.exit_code, None);
  assert_eq!(res.stdout.text, "start\n");
  assert!(res.text.starts_with(&format!(
    "[Command backgrounded after 0.3s timeout (pid {pid})"
  )));
  assert!(res.log.path().is_some());
  let c = r.check(pid).unwrap();
  assert!(c.running);
  assert_eq!(r.list()[0].pid, pid);
  assert!(r.list()[0].running);
  tokio::time::sleep(Duration::from_millis(1500)).await;
  let c = r.check(pid).unwrap();
  assert!(!c.running);
  assert_eq!(c.exit_code, Some(0));
  assert_eq!(c.stdout.text, "done\n");
  assert!(c
    .text
    .starts_with(&format!("[Process {pid} exited with code 0.")));
  let again = r.check(pid).unwrap();
  assert_eq!(again.stdout.text, "");
  assert!(again.text.contains("No new output since last check."));
  let log = std::fs::read_to_string(res.log.path().unwrap()).unwrap();
  assert_eq!(log, "start\ndone\n");
  assert_eq!(r.check(1).unwrap_err().code, ErrorCode::ESRCH);
}

#[tokio::test]
async fn kill_and_close() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let mut o = opts(dir.path());
  o.background = true;
  let res = r
    .run("yes > /dev/null & yes > /dev/null & wait", o.clone())
    .await;
  let pid = res.pid;
  assert!(res
    .text
    .starts_with(&format!("[Command started in the background (pid {pid})")));
  tokio::time::sleep(Duration::from_millis(100)).await;
  assert!(crate::process::registry::group_alive(pid as i32));
  let k = r.kill(pid).await.unwrap();
  assert!(k.killed);
  assert!(!k.running);
  let t = Instant::now();
  while crate::process::registry::group_alive(pid as i32) && t.elapsed() < Duration::from_secs(3) {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(!crate::process::registry::group_alive(pid as i32));

  let res = r.run("sleep 30", o).await;
  assert_eq!(r.close().await, 1);
  assert!(!r.list().iter().any(|p| p.running));
  assert!(r.list().iter().any(|p| p.pid == res.pid && p.killed));
  let after = r.run("echo hi", opts(dir.path())).await;
  assert_eq!(after.error.unwrap().code, ErrorCode::ECANCELED);
}

#[tokio::test]
async fn what_a_command_leaves_running_is_adopted() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let res = r
    .run(
      "sleep 30 & setsid nohup sleep 31 >/dev/null 2>&1 & sleep 0.2; echo started",
      opts(dir.path()),
    )
    .await;
  assert_eq!(res.exit_code, Some(0));
  assert_eq!(res.adopted.len(), 2, "{}", res.text);
  let (a, b) = (res.adopted[0].0, res.adopted[1].0);
  assert!(
    res.text.contains("[Left running in the background:\n"),
    "{}",
    res.text
  );
  assert!(res.text.contains(&format!("pid {a}: sleep 3")));
  assert!(res.text.ends_with("Use check_pid or kill_pid to manage.]"));
  assert!(still_alive(a as i32, marks::stat(a as i32).unwrap().start));
  let c = r.check(a).unwrap();
  assert!(c.running);
  let k = r.kill(a).await.unwrap();
  assert!(k.killed && !k.running && k.exit_code.is_none());
  assert!(
    k.text
      .starts_with(&format!("[Process {a} killed (SIGTERM).")),
    "{}",
    k.text
  );
  assert!(marks::is_dead(a as i32));
  assert!(!marks::is_dead(b as i32));
  assert_eq!(r.close().await, 1);
  assert!(marks::is_dead(b as i32));
}

#[tokio::test]
async fn cleanup_takes_the_tree_down() {
  let dir = tempfile::tempdir().unwrap();
  let r = runner(dir.path());
  let mut o = opts(dir.path());
  o.cleanup = true;
  let res = r.run("sleep 30 & echo $!", o).await;
  assert!(res.adopted.is_empty());
  assert_eq!(
    res.text,
    format!("stdout:\n{}\nexit code: 0", res.stdout.text)
  );
  let pid: i32 = res.stdout.text.trim().parse().unwrap();
  let t = Instant::now();
  while !marks::is_dead(pid) && t.elapsed() < Duration::from_secs(3) {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(marks::is_dead(pid));
  assert!(r.list().is_empty());
}

#[test]
fn sweep_removes_only_old_logs() {
  let dir = tempfile::tempdir().unwrap();
  let old = dir.path().join("exec-native-00ff.log");
  let other = dir.path().join("other.log");
  std::fs::write(&old, "x").unwrap();
  std::fs::write(&other, "x").unwrap();
  assert_eq!(
    sweep_logs(dir.path(), Duration::from_secs(3600), &HashSet::new()),
    0
  );
  std::thread::sleep(Duration::from_millis(20));
  assert_eq!(
    sweep_logs(dir.path(), Duration::from_millis(1), &HashSet::new()),
    1
  );
  assert!(!old.exists());
  assert!(other.exists());
}
