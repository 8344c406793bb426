//! Unit tests of `crate::command`.

use super::*;
use crate::process::sandbox::{SandboxMode, SandboxPolicy};

fn host() -> Result<PathBuf, ExecError> {
  Ok(PathBuf::from("/host"))
}

/// A call that gives only `sandbox` (`None`: `sandbox: false`).
fn sandboxed(sandbox: Option<SandboxPolicy>) -> CallOptions {
  CallOptions {
    process: ProcessFields {
      sandbox: Some(sandbox),
      ..Default::default()
    },
    ..Default::default()
  }
}

#[test]
fn a_call_adds_to_the_runners_env_and_replaces_its_lists() {
  let runner = CommandDefaults::new(CallOptions {
    process: ProcessFields {
      env: Some(vec![("A".into(), Some("1".into()))]),
      env_denylist: Some(vec!["X_*".into()]),
      ..Default::default()
    },
    max_lines: Some(10),
    ..Default::default()
  })
  .unwrap();
  let o = runner
    .merge(
      CallOptions {
        process: ProcessFields {
          env: Some(vec![("B".into(), Some("2".into())), ("A".into(), None)]),
          env_allowlist: Some(vec!["PATH".into()]),
          ..Default::default()
        },
        ..Default::default()
      },
      host,
    )
    .unwrap();
  assert_eq!(o.process.cwd(), std::path::Path::new("/host"));
  assert_eq!(
    o.process.env.vars,
    vec![
      ("A".to_owned(), "1".to_owned()),
      ("B".to_owned(), "2".to_owned())
    ]
  );
  assert_eq!(o.process.env.remove, vec!["A".to_owned()]);
  assert_eq!(
    o.process.env.deny,
    vec!["X_*".to_owned()],
    "a list not given stays the runner's"
  );
  assert_eq!(o.process.env.allow, Some(vec!["PATH".to_owned()]));
  assert_eq!(o.max_lines, 10);
  assert_eq!(o.run.timeout, Some(DEFAULT_TIMEOUT));
  let none = runner
    .merge(
      CallOptions {
        run: RunFields {
          timeout: Some(None),
          ..Default::default()
        },
        process: ProcessFields {
          cwd: Some("/c".into()),
          ..Default::default()
        },
        ..Default::default()
      },
      || panic!("the host's cwd is not asked for when a cwd is given"),
    )
    .unwrap();
  assert_eq!(none.run.timeout, None);
}

#[test]
fn a_call_may_only_narrow_the_runners_sandbox() {
  let runner = CommandDefaults::new(sandboxed(Some(SandboxPolicy::default()))).unwrap();
  assert!(
    !runner.process.env.deny.is_empty(),
    "a sandboxed runner drops the host's secrets"
  );
  let read_only = SandboxPolicy {
    mode: SandboxMode::ReadOnly,
    ..Default::default()
  };
  let narrowed = sandboxed(Some(read_only));
  assert_eq!(
    runner
      .merge(narrowed, host)
      .unwrap()
      .process
      .sandbox
      .unwrap()
      .mode,
    SandboxMode::ReadOnly
  );
  let off = sandboxed(None);
  assert!(runner
    .merge(off, host)
    .unwrap_err()
    .message()
    .contains("cannot turn off"));
  let wider = sandboxed(Some(SandboxPolicy {
    network: true,
    ..Default::default()
  }));
  assert!(runner
    .merge(wider, host)
    .unwrap_err()
    .message()
    .contains("may only narrow"));
}
