use std::path::PathBuf;

use super::command::ChildRoutine;
use super::*;
use crate::error::ErrorCode;
use crate::process::marks::MARK_VAR;
use crate::process::spec::EnvSpec;

/// The owner of these tests' runs: none of another test's.
const OWNER: u64 = 0x5e70b;

fn setup(limits: &Limits) -> ChildSetup<'_> {
  ChildSetup {
    owner: OWNER,
    limits,
    die_with_parent: false,
    sandbox: None,
    cwd: Path::new("/"),
  }
}

fn sh<'a>(args: &'a [OsString], env: &'a EnvSpec) -> ChildCommand<'a> {
  ChildCommand {
    program: Path::new("/bin/sh"),
    argv0: None,
    args,
    env: ChildEnv::Spec(env),
    cwd: Some(Path::new("/")),
  }
}

/// What `sh -c script` printed, spawned with `leader` through `setup`; the
/// spawn's mark and whether it was registered.
fn run_sh(setup: &ChildSetup, script: &str) -> (String, String, bool) {
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  rt.block_on(async {
    let args = [OsString::from("-c"), OsString::from(script)];
    let env = EnvSpec::default();
    let stdio = [Stdio::null(), Stdio::piped(), Stdio::null()];
    let spawned = setup.spawn(&sh(&args, &env), Leader::Group, stdio).unwrap();
    let registered = crate::process::registry::is_registered(spawned.pid);
    assert_eq!(spawned.guard.mark(), spawned.mark);
    let out = spawned.child.wait_with_output().await.unwrap();
    crate::process::registry::unregister(spawned.pid);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (text, spawned.mark, registered)
  })
}

#[test]
fn a_child_is_registered_under_its_pid_with_its_mark_in_its_environment() {
  let limits = Limits::default();
  let (out, mark, registered) = run_sh(&setup(&limits), &format!("echo ${MARK_VAR}"));
  assert!(registered);
  assert_eq!(out, mark);
}

#[test]
fn a_mark_the_host_carries_is_replaced_in_the_image() {
  let vars = [
    (OsString::from(MARK_VAR), OsString::from("1.2.3")),
    (OsString::from("A"), OsString::from("b")),
  ];
  let block = mark::block(&ChildEnv::Vars(&vars), "9.9.9").unwrap();
  let env: Vec<(&[u8], &[u8])> = block
    .entries()
    .map(|e| e.split_at(e.iter().position(|&c| c == b'=').unwrap()))
    .map(|(k, v)| (k, &v[1..]))
    .collect();
  let marks: Vec<_> = env
    .iter()
    .filter(|(k, _)| *k == MARK_VAR.as_bytes())
    .collect();
  assert_eq!(marks.len(), 1);
  assert_eq!(marks[0].1, b"9.9.9");
  assert!(env.iter().any(|(k, v)| *k == b"A" && *v == b"b"));
}

#[test]
fn the_routine_applies_the_limits_in_the_child() {
  // a limit: a fork whose one pre_exec runs the plan, then execs the image
  let limits = Limits {
    open_files: Some(64),
    ..Default::default()
  };
  let (out, mark, registered) = run_sh(&setup(&limits), &format!("ulimit -n; echo ${MARK_VAR}"));
  assert!(registered);
  assert_eq!(out, format!("64\n{mark}"));
}

#[test]
fn a_failed_spawn_registers_nothing() {
  let limits = Limits::default();
  let s = setup(&limits);
  let r = s.start(
    "m".into(),
    LimitGuard::new(&limits, "m"),
    None,
    || -> Result<((), i32), ExecError> { Err(ExecError::invalid("no")) },
  );
  assert!(r.is_err());
  assert_eq!(crate::process::registry::live_count_of(OWNER), 0);
}

#[test]
fn a_missing_program_is_the_spawns_error_and_nothing_is_registered() {
  let limits = Limits::default();
  let s = setup(&limits);
  let rt = tokio::runtime::Builder::new_current_thread()
    .enable_all()
    .build()
    .unwrap();
  let env = EnvSpec::default();
  let cmd = ChildCommand {
    program: Path::new("/nonexistent/program"),
    ..sh(&[], &env)
  };
  let stdio = [Stdio::null(), Stdio::null(), Stdio::null()];
  let r = rt.block_on(async { s.spawn(&cmd, Leader::Group, stdio).map(|_| ()) });
  assert_eq!(r.unwrap_err().code, ErrorCode::ENOENT);
  assert_eq!(crate::process::registry::live_count_of(OWNER), 0);
}

#[test]
fn what_asks_for_a_step_in_the_child() {
  let plan = || {
    let limits = Limits {
      open_files: Some(64),
      ..Default::default()
    };
    LimitGuard::new(&limits, "m").child_plan(false).unwrap()
  };
  assert!(plan().is_some());
  assert!(
    ChildRoutine::new(Leader::Group, None, None).is_empty(),
    "the fast path"
  );
  assert!(!ChildRoutine::new(Leader::Terminal, None, None).is_empty());
  assert!(!ChildRoutine::new(Leader::Group, plan(), None).is_empty());
  let none = Limits::default();
  let dwp = LimitGuard::new(&none, "m").child_plan(true).unwrap();
  assert!(dwp.is_some(), "dieWithParent forks");
}

#[test]
fn a_sandboxed_spawn_runs_only_the_sandboxs_command_line() {
  let limits = Limits::default();
  let policy = SandboxPolicy::default();
  let s = ChildSetup {
    sandbox: Some(&policy),
    ..setup(&limits)
  };
  let env = EnvSpec::default();
  let cmd = sh(&[], &env);
  let e = sandbox::line(&s, &cmd, None, None).err().unwrap();
  assert_eq!(e.code, ErrorCode::ESANDBOX);
  let inv = Invocation {
    program: PathBuf::from("/helper"),
    argv0: None,
    args: Vec::new(),
  };
  let e = sandbox::line(&s, &cmd, Some(&inv), None).err().unwrap();
  assert_eq!(e.code, ErrorCode::ESANDBOX, "no report: not the sandbox's");
  let plain = sandbox::line(&setup(&limits), &cmd, None, None).unwrap();
  assert_eq!(plain.program, Path::new("/bin/sh"));
}
