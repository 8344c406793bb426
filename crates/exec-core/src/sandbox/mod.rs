//! The opt-in sandbox for model-written code (Linux: Landlock + seccomp).
//!
//! A spawning thread restricts itself and then spawns: Landlock domains,
//! seccomp filters and `no_new_privs` belong to the calling thread, the child
//! inherits them, the host's other threads stay free, and the posix_spawn fast
//! path is kept (no fork of the host's memory). The fork path of `limits`
//! forks from that same thread, so its child inherits them too. A restricted
//! thread is kept for the next spawns of the same policy ([`threads`]).
//!
//! What it guarantees: writes only under the writable roots (and `/dev/null`,
//! `/dev/zero`, `/dev/full`, `/dev/tty`); no TCP bind/connect and no socket
//! other than Unix sockets unless `network`; no signal to processes outside the
//! sandbox and no abstract Unix socket outside it (Landlock ABI 6+); no
//! ptrace, `process_vm_*` or io_uring. What it does not: reads are not
//! restricted; pathname Unix sockets (e.g. a docker socket) stay reachable
//! below Landlock ABI 9; `.git` inside a writable root is writable.
//! It fails closed: what cannot be applied is `ESANDBOX` before anything runs.

use std::path::{Path, PathBuf};

mod report;
pub mod seatbelt;
pub mod threads;
/// What this system offers a sandbox (the platform layer's answer).
pub use crate::platform::{sandbox_support, SandboxSupport};
pub use report::{missing_for, SandboxReport, Violation, ViolationKind};

use crate::error::{ErrorCode, ExecError};
use crate::process::spec::EnvSpec;

/// Which writes are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxMode {
  /// Nothing writable but the device files.
  ReadOnly,
  /// The working directory, `writable_roots`, and `/tmp` + `$TMPDIR`
  /// (unless `exclude_tmp`).
  WorkspaceWrite,
}

/// What to do when the sandbox cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnavailable {
  /// `ESANDBOX`, nothing runs (the default).
  Error,
  /// Run without it, and say so: the result's `sandbox.warning`, and a line
  /// in `runCommand`'s text.
  Warn,
  /// Run without it (the caller accepted that); the result's `sandbox`
  /// still says it was not applied.
  RunUnsandboxed,
}

/// A sandbox as asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
  pub mode: SandboxMode,
  pub writable_roots: Vec<PathBuf>,
  pub exclude_tmp: bool,
  pub network: bool,
  pub on_unavailable: OnUnavailable,
}

impl Default for SandboxPolicy {
  fn default() -> Self {
    SandboxPolicy {
      mode: SandboxMode::WorkspaceWrite,
      writable_roots: Vec::new(),
      exclude_tmp: false,
      network: false,
      on_unavailable: OnUnavailable::Error,
    }
  }
}

impl SandboxMode {
  /// `'read-only'` or `'workspace-write'` (the option's spelling), or what
  /// the message says instead.
  pub fn parse(s: &str) -> Result<Self, String> {
    match s {
      "read-only" => Ok(SandboxMode::ReadOnly),
      "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
      other => Err(format!(
        "must be 'read-only' or 'workspace-write', got '{other}'"
      )),
    }
  }
}

impl OnUnavailable {
  /// `'error'` or `'run-unsandboxed'`, or what the message says instead.
  pub fn parse(s: &str) -> Result<Self, String> {
    match s {
      "error" => Ok(OnUnavailable::Error),
      "warn" => Ok(OnUnavailable::Warn),
      "run-unsandboxed" => Ok(OnUnavailable::RunUnsandboxed),
      other => Err(format!(
        "must be 'error', 'warn' or 'run-unsandboxed', got '{other}'"
      )),
    }
  }
}

/// A sandboxed run drops the host's secrets ([`SECRET_ENV`]) unless the
/// caller gave env lists of its own (`explicit_lists`).
pub fn drop_secrets(sandbox: &Option<SandboxPolicy>, explicit_lists: bool, env: &mut EnvSpec) {
  if sandbox.is_some() && !explicit_lists {
    env.deny = SECRET_ENV.iter().map(|s| (*s).to_owned()).collect();
  }
}

impl SandboxPolicy {
  /// Whether `self` gives no more than `base`: a per-call sandbox of a
  /// command runner may only narrow the runner's.
  pub fn narrows(&self, base: &SandboxPolicy) -> bool {
    let mode_ok = self.mode == SandboxMode::ReadOnly || base.mode == SandboxMode::WorkspaceWrite;
    let roots_ok = self.mode == SandboxMode::ReadOnly
      || self
        .writable_roots
        .iter()
        .all(|r| base.writable_roots.iter().any(|b| r.starts_with(b)));
    let tmp_ok = self.exclude_tmp || !base.exclude_tmp || self.mode == SandboxMode::ReadOnly;
    let net_ok = !self.network || base.network;
    // error < warn < run-unsandboxed: how much a missing sandbox is accepted
    let fallback_ok = self.on_unavailable as u8 <= base.on_unavailable as u8;
    mode_ok && roots_ok && tmp_ok && net_ok && fallback_ok
  }
}

/// Host variables a sandboxed run does not get unless the caller gives its
/// own lists: a sandbox that hands the child an API key protects nothing.
pub const SECRET_ENV: &[&str] = &[
  "*_TOKEN",
  "*_KEY",
  "*_SECRET",
  "*PASSWORD*",
  "*_CREDENTIALS",
  "AWS_*",
  "SSH_AUTH_SOCK",
  "DBUS_SESSION_BUS_ADDRESS",
  "TMUX",
];

/// Device files every sandboxed run may write (many programs break without
/// `/dev/null`).
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

impl SandboxPolicy {
  /// The writable paths for a run in `cwd`: checked to exist, made absolute.
  pub fn writable_paths(&self, cwd: &Path) -> Result<Vec<PathBuf>, ExecError> {
    let mut out: Vec<PathBuf> = DEVICES
      .iter()
      .map(PathBuf::from)
      .filter(|p| p.exists())
      .collect();
    if self.mode == SandboxMode::ReadOnly {
      return Ok(out);
    }
    out.push(cwd.to_path_buf());
    for r in &self.writable_roots {
      let abs = if r.is_absolute() {
        r.clone()
      } else {
        cwd.join(r)
      };
      if !abs.exists() {
        return Err(ExecError::new(
          ErrorCode::ENOENT,
          format!("sandbox.writableRoots: {} does not exist", abs.display()),
        ));
      }
      // a root that is itself a symlink (a sandboxed run may have planted
      // it in /tmp) would open its target to writes: refused, not followed
      if abs
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
      {
        let to = std::fs::read_link(&abs).unwrap_or_default();
        return Err(ExecError::invalid(format!(
          "sandbox.writableRoots: {} is a symlink (to {}); give the directory itself",
          abs.display(),
          to.display()
        )));
      }
      out.push(abs.canonicalize().unwrap_or(abs));
    }
    if !self.exclude_tmp {
      out.push(PathBuf::from("/tmp"));
      if let Some(t) = std::env::var_os("TMPDIR").filter(|t| !t.is_empty()) {
        let t = PathBuf::from(t);
        if t.exists() {
          out.push(t);
        }
      }
    }
    out.dedup();
    Ok(out)
  }
}

/// Restrict the calling thread to `policy` for a run in `cwd`. Call it on a
/// thread that does nothing else afterwards but spawn. Where a thread cannot
/// restrict itself (macOS: the sandbox wraps the command instead, see
/// [`wrap_command`]), `ESANDBOX`: the paths that restrict a thread (PTY,
/// sessions) refuse a sandbox there.
pub fn restrict_this_thread(policy: &SandboxPolicy, writable: &[PathBuf]) -> Result<(), ExecError> {
  if let Some(e) = simulated_unavailable() {
    return Err(e);
  }
  crate::platform::restrict_thread(policy.network, writable)
    .map_err(|what| ExecError::new(ErrorCode::ESANDBOX, format!("sandbox unavailable: {what}")))
}

/// Tests: `EXEC_NATIVE_TEST_NO_LANDLOCK` makes the sandbox answer as a
/// kernel without Landlock does.
fn simulated_unavailable() -> Option<ExecError> {
  std::env::var_os("EXEC_NATIVE_TEST_NO_LANDLOCK").map(|_| {
    ExecError::new(
      ErrorCode::ESANDBOX,
      "sandbox unavailable: Landlock is not enabled in this kernel (simulated)",
    )
  })
}

/// The kernel's Landlock ABI, asked once.
fn landlock_abi() -> u32 {
  static ABI: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
  *ABI.get_or_init(|| crate::platform::sandbox_support().landlock_abi)
}

/// Keeps the thread that spawned a sandboxed child with `dieWithParent`
/// alive: the parent-death signal follows that thread, not the process, so
/// it must live as long as the child may. Dropping it lets the thread end.
pub struct Anchor(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

/// The report of a run about to be restricted to `policy` in `cwd`.
fn new_report(policy: &SandboxPolicy, cwd: &Path, writable: Vec<PathBuf>) -> SandboxReport {
  let abi = landlock_abi();
  SandboxReport {
    applied: true,
    abi,
    missing: missing_for(abi),
    warn: policy.on_unavailable == OnUnavailable::Warn,
    network: policy.network,
    cwd: cwd.to_path_buf(),
    writable,
    ..Default::default()
  }
}

/// Restrict this thread and run `spawn` (see [`after_restriction`]).
fn restricted<T>(
  policy: &SandboxPolicy,
  writable: &[PathBuf],
  spawn: impl FnOnce() -> Result<T, ExecError>,
) -> Result<(T, Option<String>), ExecError> {
  after_restriction(
    restrict_this_thread(policy, writable),
    policy.on_unavailable,
    spawn,
  )
}

fn finish_report(mut report: SandboxReport, skipped: Option<String>) -> SandboxReport {
  if let Some(why) = skipped {
    report.applied = false;
    report.warning = Some(why);
  }
  report
}

/// Run `spawn` on a thread restricted to `policy` (see the module doc): one
/// kept for this policy and these roots, or a new one (see [`threads`]);
/// `extra` are files the child itself writes before its exec (its cgroups).
/// With `onUnavailable` `'warn'` or `'run-unsandboxed'`, a sandbox that
/// cannot be applied is skipped and `spawn` runs unrestricted; the report
/// says which happened.
pub fn spawn_in<T: Send + 'static>(
  policy: &SandboxPolicy,
  cwd: &Path,
  extra: &[PathBuf],
  spawn: impl FnOnce() -> Result<T, ExecError> + Send + 'static,
) -> Result<(T, SandboxReport), ExecError> {
  let mut writable = policy.writable_paths(cwd)?;
  writable.extend(extra.iter().cloned());
  let fallback = policy.on_unavailable;
  let (t, skipped) = if let Some(e) = simulated_unavailable() {
    // tests: no kept thread may answer for a kernel without Landlock
    after_restriction(Err(e), fallback, spawn)?
  } else {
    let handle = tokio::runtime::Handle::try_current().ok();
    let (policy_, writable_) = (policy.clone(), writable.clone());
    threads::run(
      threads::Key::new(policy.network, &writable),
      move || restrict_this_thread(&policy_, &writable_),
      move |restricted| {
        let _rt = handle.as_ref().map(|h| h.enter());
        after_restriction(restricted, fallback, spawn)
      },
    )??
  };
  Ok((t, finish_report(new_report(policy, cwd, writable), skipped)))
}

/// `spawn` after the restriction of this thread was tried: with
/// `onUnavailable` other than `'error'`, an unavailable sandbox is skipped
/// (the reason is returned).
fn after_restriction<T>(
  restricted: Result<(), ExecError>,
  fallback: OnUnavailable,
  spawn: impl FnOnce() -> Result<T, ExecError>,
) -> Result<(T, Option<String>), ExecError> {
  match restricted {
    Ok(()) => spawn().map(|t| (t, None)),
    Err(e) if e.code == ErrorCode::ESANDBOX && fallback != OnUnavailable::Error => {
      let why = e
        .what
        .trim_start_matches("sandbox unavailable: ")
        .to_owned();
      spawn().map(|t| (t, Some(why)))
    }
    Err(e) => Err(e),
  }
}

/// Like [`spawn_in`], but the spawning thread stays (parked) until the
/// returned [`Anchor`] is dropped: for a child with a parent-death signal.
pub fn spawn_anchored<T: Send + 'static>(
  policy: &SandboxPolicy,
  cwd: &Path,
  extra: &[PathBuf],
  spawn: impl FnOnce() -> Result<T, ExecError> + Send + 'static,
) -> Result<(T, SandboxReport, Anchor), ExecError> {
  let mut writable = policy.writable_paths(cwd)?;
  writable.extend(extra.iter().cloned());
  let handle = tokio::runtime::Handle::try_current().ok();
  let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
  let (anchor_tx, anchor_rx) = std::sync::mpsc::channel::<()>();
  let policy_ = policy.clone();
  let writable_ = writable.clone();
  std::thread::Builder::new()
    .name("exec-native-sandbox".into())
    .spawn(move || {
      let r = {
        let _rt = handle.as_ref().map(|h| h.enter());
        restricted(&policy_, &writable_, spawn)
      };
      let ok = r.is_ok();
      let _ = done_tx.send(r);
      if ok {
        // parked until the anchor goes: the child's parent-death signal is
        // tied to this thread
        let _ = anchor_rx.recv();
      }
    })
    .map_err(|e| {
      ExecError::new(
        ErrorCode::ESPAWN,
        format!("cannot start the sandbox thread: {e}"),
      )
    })?;
  let (t, skipped) = done_rx.recv().unwrap_or_else(|_| Err(panicked()))?;
  Ok((
    t,
    finish_report(new_report(policy, cwd, writable), skipped),
    Anchor(anchor_tx),
  ))
}

/// How the sandbox wraps a command on this system. Linux: `None`, the
/// spawning thread restricts itself ([`spawn_in`]). macOS: the program and
/// arguments behind `/usr/bin/sandbox-exec` with a generated profile (see
/// [`seatbelt`]), and the report; without `sandbox-exec`, `onUnavailable`
/// decides (`ESANDBOX`, or the command unchanged and `applied: false`).
pub fn wrap_command(
  policy: &SandboxPolicy,
  cwd: &Path,
  program: &Path,
  args: &[std::ffi::OsString],
) -> Result<Option<(PathBuf, Vec<std::ffi::OsString>, SandboxReport)>, ExecError> {
  if cfg!(target_os = "linux") {
    return Ok(None);
  }
  let roots = seatbelt::roots(policy, cwd)?;
  let mut report = new_report(policy, cwd, roots.clone());
  report.missing.clear();
  if !Path::new(seatbelt::SANDBOX_EXEC).is_file() {
    let why = format!("{} is missing", seatbelt::SANDBOX_EXEC);
    if policy.on_unavailable == OnUnavailable::Error {
      return Err(ExecError::new(
        ErrorCode::ESANDBOX,
        format!("sandbox unavailable: {why}"),
      ));
    }
    return Ok(Some((
      program.to_path_buf(),
      args.to_vec(),
      finish_report(report, Some(why)),
    )));
  }
  let (prog, argv) = seatbelt::wrap(policy, &roots, program, args);
  Ok(Some((prog, argv, report)))
}

fn panicked() -> ExecError {
  ExecError::new(ErrorCode::ESANDBOX, "sandbox: the spawning thread panicked")
}

#[cfg(test)]
mod tests {
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
}
