//! Unit tests of `crate::process::sandbox`.

use super::*;

#[test]
fn writable_paths_by_mode() {
  let cwd = std::env::temp_dir();
  let ro = SandboxPolicy {
    mode: SandboxMode::ReadOnly,
    ..Default::default()
  };
  let paths = ro.writable_paths(&cwd).unwrap();
  assert!(paths.contains(&PathBuf::from("/dev/null")));
  assert!(!paths.contains(&cwd));
  let ww = SandboxPolicy::default().writable_paths(&cwd).unwrap();
  assert!(ww.contains(&cwd) && ww.contains(&PathBuf::from("/tmp")));
  let no_tmp = SandboxPolicy {
    exclude_tmp: true,
    ..Default::default()
  };
  assert!(!no_tmp
    .writable_paths(Path::new("/"))
    .unwrap()
    .contains(&PathBuf::from("/tmp")));
  let missing = SandboxPolicy {
    writable_roots: vec![PathBuf::from("/nonexistent/root")],
    ..Default::default()
  };
  assert_eq!(
    missing.writable_paths(&cwd).unwrap_err().code,
    ErrorCode::ENOENT
  );
}

#[test]
fn a_call_may_only_narrow() {
  let base = SandboxPolicy {
    writable_roots: vec![PathBuf::from("/repo")],
    ..Default::default()
  };
  let ro = SandboxPolicy {
    mode: SandboxMode::ReadOnly,
    ..Default::default()
  };
  assert!(ro.narrows(&base));
  assert!(base.narrows(&base));
  let sub = SandboxPolicy {
    writable_roots: vec![PathBuf::from("/repo/src")],
    ..Default::default()
  };
  assert!(sub.narrows(&base));
  let other = SandboxPolicy {
    writable_roots: vec![PathBuf::from("/home")],
    ..Default::default()
  };
  assert!(!other.narrows(&base));
  let net = SandboxPolicy {
    network: true,
    ..base.clone()
  };
  assert!(!net.narrows(&base));
  let fallback = SandboxPolicy {
    on_unavailable: OnUnavailable::RunUnsandboxed,
    ..base.clone()
  };
  assert!(!fallback.narrows(&base));
  assert!(!base.narrows(&ro));
}
