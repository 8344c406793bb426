//! The opt-in sandbox for model-written code.
//!
//! Linux: the host posix_spawns the sandbox helper (`exec-native-sandbox`,
//! crate `crates/sandbox`) in place of the command, and the helper restricts
//! *itself* before it execs the command: every run gets a Landlock domain of
//! its own, and no task of the host is ever in one. Where user namespaces
//! work (checked once, [`namespaces`]), the helper also puts the command in
//! new user, mount, IPC, PID and (network off) network namespaces: `/`
//! read-only, the writable roots bound read-write, `.git` read-only again,
//! `/run` hidden, a private `/dev`, a fresh `/proc`. macOS: Seatbelt
//! (`sandbox-exec`).
//!
//! What it guarantees, by which mechanism, and what it does not: the table in
//! docs/SANDBOX.md. It fails closed: what cannot be applied is `ESANDBOX`
//! before anything runs, unless `onUnavailable` says otherwise.

use std::path::{Path, PathBuf};

mod report;
pub mod seatbelt;
#[cfg(target_os = "linux")]
pub mod zygote;
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
  /// More paths kept read-only inside the writable roots (each root's
  /// `.git` always is, where a mount namespace is available). Given
  /// explicitly, they need the mount namespace: without one the sandbox is
  /// unavailable (`onUnavailable`).
  pub protect: Vec<PathBuf>,
  pub on_unavailable: OnUnavailable,
}

impl Default for SandboxPolicy {
  fn default() -> Self {
    SandboxPolicy {
      mode: SandboxMode::WorkspaceWrite,
      writable_roots: Vec::new(),
      exclude_tmp: false,
      network: false,
      protect: Vec::new(),
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
    let protect_ok = base.protect.iter().all(|p| self.protect.contains(p));
    mode_ok && roots_ok && tmp_ok && net_ok && fallback_ok && protect_ok
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
    // device files come and go with the system, not between two runs:
    // looked up once
    static PRESENT: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    let mut out: Vec<PathBuf> = PRESENT
      .get_or_init(|| {
        DEVICES
          .iter()
          .map(PathBuf::from)
          .filter(|p| p.exists())
          .collect()
      })
      .clone();
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

/// Tests: `EXEC_NATIVE_TEST_NO_LANDLOCK` makes the sandbox answer as a
/// kernel without Landlock does.
fn simulated_unavailable() -> Option<String> {
  std::env::var_os("EXEC_NATIVE_TEST_NO_LANDLOCK")
    .map(|_| "Landlock is not enabled in this kernel (simulated)".to_owned())
}

/// The kernel's Landlock ABI, asked once.
fn landlock_abi() -> u32 {
  static ABI: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
  *ABI.get_or_init(|| crate::platform::sandbox_support().landlock_abi)
}

/// The file name of the helper program (Linux).
pub const HELPER_NAME: &str = "exec-native-sandbox";
/// Overrides where the helper is looked for.
pub const HELPER_VAR: &str = "EXEC_NATIVE_SANDBOX_HELPER";

/// The sandbox helper (Linux): `$EXEC_NATIVE_SANDBOX_HELPER`, else the
/// `exec-native-sandbox` next to the loaded addon (the platform package
/// ships both), else next to the program (and its parent folder: cargo's
/// test binaries live in `target/<profile>/deps`).
pub fn helper() -> Result<PathBuf, String> {
  if let Some(p) = std::env::var_os(HELPER_VAR).filter(|p| !p.is_empty()) {
    let p = PathBuf::from(p);
    return if p.is_file() {
      Ok(p)
    } else {
      Err(format!(
        "{HELPER_VAR} names {}, which is not a file",
        p.display()
      ))
    };
  }
  static FOUND: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
  FOUND
    .get_or_init(|| {
      let mut dirs: Vec<PathBuf> = Vec::new();
      if let Some(lib) = crate::platform::this_library() {
        dirs.extend(lib.parent().map(Path::to_path_buf));
      }
      if let Ok(exe) = std::env::current_exe() {
        if let Some(d) = exe.parent() {
          dirs.push(d.to_path_buf());
          dirs.extend(d.parent().map(Path::to_path_buf));
        }
      }
      dirs
        .iter()
        .map(|d| d.join(HELPER_NAME))
        .find(|p| p.is_file())
        .ok_or_else(|| {
          format!(
            "the sandbox helper {HELPER_NAME} is missing (looked in {})",
            dirs
              .iter()
              .map(|d| d.display().to_string())
              .collect::<Vec<_>>()
              .join(", ")
          )
        })
    })
    .clone()
}

/// Whether the namespaced boundary (user, mount, PID, network namespaces)
/// works here: the helper is run once to try it (`--probe`), and the
/// answer kept. `Err` says why not (user namespaces disabled by policy, a
/// container that forbids mounting `/proc`, ...). Tests:
/// `EXEC_NATIVE_TEST_NO_USERNS` answers as a system without them.
pub fn namespaces() -> Result<(), String> {
  if std::env::var_os("EXEC_NATIVE_TEST_NO_USERNS").is_some() {
    return Err("user namespaces are not available (simulated)".into());
  }
  static PROBED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
  PROBED
    .get_or_init(|| {
      if !cfg!(target_os = "linux") {
        return Err("namespaces are Linux only".into());
      }
      let s = crate::platform::sandbox_support();
      if s.user_namespaces_restricted {
        return Err("user namespaces are denied to unprivileged users here (Debian's kernel.unprivileged_userns_clone=0 or Ubuntu's AppArmor restriction)".into());
      }
      let helper = helper()?;
      let out = std::process::Command::new(&helper)
        .args(["--ns", "--probe", "--write", "/dev/null", "--", "/"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", helper.display()))?;
      if out.status.success() {
        Ok(())
      } else {
        let text = String::from_utf8_lossy(&out.stderr);
        Err(
          text
            .trim()
            .trim_start_matches("exec-native-sandbox: ")
            .trim_end_matches(" (ESANDBOX)")
            .to_owned(),
        )
      }
    })
    .clone()
}

/// The namespaces every namespaced run starts from, made by the helper's
/// `--anchor` and kept open here: a user namespace and an empty network
/// namespace, which each run joins (making them is most of a namespaced
/// spawn's cost: about 0.4 and 0.9 ms on the 2-core test machine, while
/// joining costs little), and a mount namespace, the template of the runs'
/// (`/` read-only, the default hidden directories, the private `/dev`),
/// of which each run takes a copy and adds only its own mounts. Runs share
/// nothing through them: no run keeps a capability in the user namespace,
/// with network off no run can make a socket in the network namespace, and
/// each run's mounts are in its own copy of the template.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Kept {
  user: std::fs::File,
  net: std::fs::File,
  mnt: std::fs::File,
  /// The template's hidden directories and the files kept in them
  /// ([`hidden`] with no roots): a run whose own differ starts from the
  /// host's mounts instead.
  hide: Vec<PathBuf>,
  keep: Vec<PathBuf>,
}

/// The kept namespaces (see [`Kept`]), made again when the host's mount
/// table has changed since the template was copied from it (a mount or
/// unmount: the template would show the old table). `None` where they
/// cannot be made (each run then makes its own).
#[cfg(target_os = "linux")]
fn kept_namespaces() -> Option<std::sync::Arc<Kept>> {
  let mut st = KEPT.lock().unwrap_or_else(|p| p.into_inner());
  if st.failed {
    return None;
  }
  if st.mountinfo.is_none() {
    st.mountinfo = std::fs::File::open("/proc/self/mountinfo").ok();
  }
  // the watcher replaces a stale template within microseconds; this check
  // (on a descriptor of its own) covers a spawn right after a change
  let changed = st
    .mountinfo
    .as_ref()
    .is_some_and(|f| crate::platform::mounts_changed(f, 0).unwrap_or(false));
  if changed {
    st.retire_current();
  }
  st.retired.retain(|(at, _)| at.elapsed() < RETIRE_AFTER);
  if st.current.is_none() {
    match make_kept() {
      Some(k) => st.current = Some(std::sync::Arc::new(k)),
      None => st.failed = true,
    }
    if !std::mem::replace(&mut st.watching, true) {
      watch_mounts();
    }
  }
  st.current.clone()
}

/// The kept namespaces and what keeps them current.
#[cfg(target_os = "linux")]
struct KeptState {
  mountinfo: Option<std::fs::File>,
  current: Option<std::sync::Arc<Kept>>,
  failed: bool,
  watching: bool,
  /// Templates replaced, each with when: kept open for [`RETIRE_AFTER`],
  /// because a helper spawned just before may still be opening them through
  /// `/proc/<host>/fd/` (a closed descriptor's number could name another
  /// file by then), then closed.
  retired: Vec<(std::time::Instant, std::sync::Arc<Kept>)>,
}

#[cfg(target_os = "linux")]
impl KeptState {
  fn retire_current(&mut self) {
    if let Some(old) = self.current.take() {
      self.retired.push((std::time::Instant::now(), old));
      // the runs made ahead joined the old template
      zygote::end_warm();
    }
  }
}

#[cfg(target_os = "linux")]
static KEPT: std::sync::Mutex<KeptState> = std::sync::Mutex::new(KeptState {
  mountinfo: None,
  current: None,
  failed: false,
  watching: false,
  retired: Vec::new(),
});

/// How long a replaced template stays open (see [`KeptState::retired`]): a
/// helper opens it within microseconds of its spawn. Then it is closed, so
/// the host's old mounts it holds (a filesystem unmounted on the host, whose
/// device would stay busy) are let go.
#[cfg(target_os = "linux")]
const RETIRE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// A thread that waits for the host's mount table to change and retires
/// the template then, so an idle host does not hold old mounts, and closes
/// each retired one [`RETIRE_AFTER`] later. It sleeps in `poll` otherwise.
#[cfg(target_os = "linux")]
fn watch_mounts() {
  let Ok(f) = std::fs::File::open("/proc/self/mountinfo") else {
    return;
  };
  let lock = || KEPT.lock().unwrap_or_else(|p| p.into_inner());
  let _ = std::thread::Builder::new()
    .name("exec-native-mounts".into())
    .spawn(move || loop {
      // until a change, or until the next retired template is due
      let due = lock()
        .retired
        .iter()
        .map(|(at, _)| RETIRE_AFTER.saturating_sub(at.elapsed()))
        .min();
      let timeout = due.map_or(-1, |d| d.as_millis().min(60_000) as i32 + 1);
      let Ok(changed) = crate::platform::mounts_changed(&f, timeout) else {
        return;
      };
      let mut st = lock();
      if changed {
        st.retire_current();
      }
      let retired = st.retired.len();
      st.retired.retain(|(at, _)| at.elapsed() < RETIRE_AFTER);
      if st.retired.len() < retired {
        // a run made ahead from a template being closed now (its news came
        // after the template was retired) must not hold it either
        zygote::end_warm();
      }
    });
}

/// One `--anchor` run of the helper: its namespaces, opened.
#[cfg(target_os = "linux")]
fn make_kept() -> Option<Kept> {
  use std::io::{BufRead, BufReader};
  let helper = helper().ok()?;
  let (hide, keep) = hidden(&[], &[]);
  let mut args: Vec<std::ffi::OsString> = vec!["--anchor".into()];
  for (flag, paths) in [("--hide", &hide), ("--keep", &keep)] {
    for p in paths {
      args.push(flag.into());
      args.push(p.into());
    }
  }
  args.extend(["--".into(), "-".into()]);
  let mut child = std::process::Command::new(helper)
    .args(args)
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .ok()?;
  let mut line = String::new();
  let ready = child
    .stdout
    .take()
    .map(|o| BufReader::new(o).read_line(&mut line).is_ok() && line == "ready\n")
    .unwrap_or(false);
  let pid = child.id();
  let open = |kind: &str| std::fs::File::open(format!("/proc/{pid}/ns/{kind}")).ok();
  let kept = if ready {
    match (open("user"), open("net"), open("mnt")) {
      (Some(user), Some(net), Some(mnt)) => Some(Kept {
        user,
        net,
        mnt,
        hide,
        keep,
      }),
      _ => None,
    }
  } else {
    None
  };
  // its stdin closed, the anchor ends; the namespaces live on in `kept`
  drop(child.stdin.take());
  let _ = child.wait();
  kept
}

/// What the sandbox protects without namespaces, by name (`sandbox.missing`).
pub const WITHOUT_NAMESPACES: &[&str] = &["mountNamespace", "pidNamespace", "networkNamespace"];

/// A command as it is spawned: the program, what it sees as its name, its
/// arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
  pub program: PathBuf,
  pub argv0: Option<std::ffi::OsString>,
  pub args: Vec<std::ffi::OsString>,
}

/// How deep [`protected`] looks for repositories inside a writable root:
/// `<root>/.git` is depth 0, `<root>/a/.git` depth 1, and so on (the temp
/// directories, shared scratch space with many entries, less deep); and how
/// many directories it lists at most per root.
const GIT_SCAN_DEPTH: usize = 1;
const GIT_SCAN_DEPTH_TMP: usize = 0;
const GIT_SCAN_BUDGET: usize = 256;

/// `.git` entries (directories, or a worktree's `.git` file) in `dir` and
/// below it, at most `depth` levels down, listing at most `budget`
/// directories. A directory's own `.git` is one `lstat`; only directories
/// above the last level are listed. Symbolic links are not followed;
/// `node_modules` and `.git` itself are not entered.
fn find_git(dir: &Path, depth: usize, budget: &mut usize, out: &mut Vec<PathBuf>) {
  let git = dir.join(".git");
  if git.symlink_metadata().is_ok() {
    out.push(git);
  }
  if depth == 0 || *budget == 0 {
    return;
  }
  *budget -= 1;
  let Ok(entries) = std::fs::read_dir(dir) else {
    return;
  };
  for e in entries.flatten() {
    let name = e.file_name();
    if name == ".git" || name == "node_modules" {
      continue;
    }
    if e.file_type().is_ok_and(|t| t.is_dir()) {
      find_git(&e.path(), depth - 1, budget, out);
    }
  }
}

/// The paths made read-only again inside the writable roots:
/// - every `.git` found walking up from the cwd (git's own discovery) and
///   down each root (nested repositories too, codex#37081: [`GIT_SCAN_DEPTH`]
///   levels, the temp directories [`GIT_SCAN_DEPTH_TMP`]);
/// - for a worktree's `.git` file, the `gitdir:` it names and that one's
///   `commondir` (the main repository);
/// - `policy.protect`.
///
/// Only what exists and lies inside a writable root (outside them all is
/// read-only anyway).
fn protected(policy: &SandboxPolicy, cwd: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
  let mut found: Vec<PathBuf> = cwd
    .ancestors()
    .map(|d| d.join(".git"))
    .filter(|g| g.exists())
    .collect();
  let tmp: Vec<PathBuf> = [
    Some(PathBuf::from("/tmp")),
    std::env::var_os("TMPDIR").map(PathBuf::from),
  ]
  .into_iter()
  .flatten()
  .filter_map(|p| p.canonicalize().ok())
  .collect();
  for root in writable
    .iter()
    .filter(|r| !r.starts_with("/dev") && r.is_dir())
  {
    let depth = if tmp.contains(root) {
      GIT_SCAN_DEPTH_TMP
    } else {
      GIT_SCAN_DEPTH
    };
    find_git(root, depth, &mut GIT_SCAN_BUDGET.clone(), &mut found);
  }
  let mut out: Vec<PathBuf> = Vec::new();
  let mut add = |p: PathBuf| {
    if let Ok(p) = p.canonicalize() {
      if !out.contains(&p) {
        out.push(p);
      }
    }
  };
  for git in found {
    if git.is_file() {
      if let Ok(text) = std::fs::read_to_string(&git) {
        if let Some(dir) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) {
          let dir = git.parent().unwrap_or(Path::new("/")).join(dir.trim());
          if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
            add(dir.join(common.trim()));
          }
          add(dir);
        }
      }
    }
    add(git);
  }
  for p in &policy.protect {
    add(cwd.join(p));
  }
  out.retain(|p| writable.iter().any(|r| p.starts_with(r)));
  // a path inside another protected one is covered by it
  let all = out.clone();
  out.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
  out
}

/// The host paths hidden behind an empty tmpfs (their sockets: D-Bus,
/// systemd, docker, the user's runtime directory), unless a writable root or
/// protected path lies in one; and the files kept visible in them (the
/// resolver's configuration).
fn hidden(writable: &[PathBuf], protect: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
  let mut hide: Vec<PathBuf> = Vec::new();
  let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
  for p in [
    Some(PathBuf::from("/run")),
    Some(PathBuf::from("/var/run")),
    runtime,
  ]
  .into_iter()
  .flatten()
  {
    let Ok(real) = p.canonicalize() else { continue };
    if !real.is_dir() || hide.iter().any(|h| real.starts_with(h)) {
      continue;
    }
    let needed = writable
      .iter()
      .chain(protect)
      .any(|w| w.starts_with(&real) || real.starts_with(w));
    if !needed {
      hide.push(real);
    }
  }
  let keep = ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf"]
    .iter()
    .filter_map(|f| Path::new(f).canonicalize().ok())
    .filter(|r| hide.iter().any(|h| r.starts_with(h)))
    .collect();
  (hide, keep)
}

/// Where the sandbox cannot be applied: `ESANDBOX`, or (with
/// `onUnavailable` `'warn'`/`'run-unsandboxed'`) the command unchanged and
/// a report that says so.
fn unavailable(
  policy: &SandboxPolicy,
  why: String,
  mut report: SandboxReport,
  plain: Invocation,
) -> Result<(Invocation, SandboxReport), ExecError> {
  if policy.on_unavailable == OnUnavailable::Error {
    return Err(ExecError::new(
      ErrorCode::ESANDBOX,
      format!("sandbox unavailable: {why}"),
    ));
  }
  report.applied = false;
  report.mechanism = "";
  report.warning = Some(why);
  Ok((plain, report))
}

/// A restriction the spawned child applies to itself between `clone` and
/// `execve` (Landlock, capabilities, seccomp: see
/// `exec_native_sandbox::restrict`), prepared in the host. Linux only.
#[cfg(target_os = "linux")]
pub struct InChild(std::sync::Arc<exec_native_sandbox::restrict::Prepared>);

/// The restriction for `network` and `writable`, prepared once and reused
/// while the paths are the same directories: a Landlock ruleset holds the
/// directories it was made from (opened), so one made before a directory
/// was replaced would deny writes into the new one. Each path's device and
/// inode are compared at every use (a `stat` each, against an `open` and a
/// rule each to make it again).
#[cfg(target_os = "linux")]
fn prepared_restriction(
  network: bool,
  writable: &[PathBuf],
) -> Result<std::sync::Arc<exec_native_sandbox::restrict::Prepared>, String> {
  use std::os::unix::fs::MetadataExt;
  use std::sync::{Arc, Mutex};
  type Key = (bool, Vec<(PathBuf, u64, u64)>);
  type Entry = (Key, Arc<exec_native_sandbox::restrict::Prepared>);
  /// The last few (a host runs few distinct sandboxes).
  const KEEP: usize = 8;
  static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
  let ids: Vec<(PathBuf, u64, u64)> = writable
    .iter()
    .map(|p| {
      let m = std::fs::metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
      Ok((p.clone(), m.dev(), m.ino()))
    })
    .collect::<Result<_, String>>()?;
  let key = (network, ids);
  let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
  if let Some(i) = cache.iter().position(|(k, _)| *k == key) {
    let entry = cache.remove(i);
    let prepared = entry.1.clone();
    cache.push(entry);
    return Ok(prepared);
  }
  let prepared = Arc::new(exec_native_sandbox::restrict::Prepared::new(
    network, writable,
  )?);
  if cache.len() >= KEEP {
    cache.remove(0);
  }
  cache.push((key, prepared.clone()));
  Ok(prepared)
}

#[cfg(target_os = "linux")]
impl InChild {
  /// In the child: restrict it, then close every descriptor above stdio (a
  /// descriptor the host leaked without close-on-exec must not reach the
  /// command). System calls only.
  pub fn apply(&self) -> std::io::Result<()> {
    self.0.apply().map_err(|(_, e)| e)?;
    crate::platform::cloexec_from(3);
    Ok(())
  }
}

/// No restriction is ever applied in the child off Linux.
#[cfg(not(target_os = "linux"))]
pub struct InChild(());

#[cfg(not(target_os = "linux"))]
impl InChild {
  /// Never made off Linux ([`launch`] gives none): nothing to apply.
  pub fn apply(&self) -> std::io::Result<()> {
    Ok(())
  }
}

/// The command that runs `program` (with `argv0`, `args`) under `policy`
/// in `cwd`, and the report of how. Linux: the sandbox helper
/// (`exec-native-sandbox`), which restricts itself and then execs the
/// program; or, where no namespace is to be made and the caller can run a
/// step in the child before exec (`in_child`), the program itself and the
/// restriction its child applies (no helper between them: the helper's own
/// exec is most of what a Landlock + seccomp spawn would cost). The program
/// is found here, in the child's `PATH` (`path_var`), so a missing one is
/// `ENOENT` before anything is spawned. macOS: `/usr/bin/sandbox-exec` with
/// a generated profile (see [`seatbelt`]).
pub fn launch(
  policy: &SandboxPolicy,
  cwd: &Path,
  plain: Invocation,
  path_var: Option<std::ffi::OsString>,
  in_child: bool,
) -> Result<(Invocation, SandboxReport, Option<InChild>), ExecError> {
  if cfg!(target_os = "macos") {
    let (inv, report) = wrap_seatbelt(policy, cwd, plain)?;
    return Ok((inv, report, None));
  }
  let _ = in_child;
  let writable = policy.writable_paths(cwd)?;
  let mut report = new_report(policy, cwd, writable.clone());
  if let Some(why) = simulated_unavailable() {
    return unavailable(policy, why, report, plain).map(|(i, r)| (i, r, None));
  }
  if landlock_abi() == 0 {
    return unavailable(
      policy,
      "Landlock is not enabled in this kernel".into(),
      report,
      plain,
    )
    .map(|(i, r)| (i, r, None));
  }
  let helper = match helper() {
    Ok(h) => h,
    Err(why) => return unavailable(policy, why, report, plain).map(|(i, r)| (i, r, None)),
  };
  let ns = namespaces();
  if let Err(why) = &ns {
    if !policy.protect.is_empty() {
      return unavailable(
        policy,
        format!("sandbox.protect needs a mount namespace: {why}"),
        report,
        plain,
      )
      .map(|(i, r)| (i, r, None));
    }
    report.missing.extend_from_slice(WITHOUT_NAMESPACES);
    report.namespaces_missing = Some(why.clone());
  }
  let program = if plain.program.as_os_str().as_encoded_bytes().contains(&b'/') {
    cwd.join(&plain.program)
  } else {
    let shown = plain.program.to_string_lossy().into_owned();
    crate::process::spec::resolve_program(&shown, path_var.as_ref(), cwd)?
  };
  #[cfg(target_os = "linux")]
  if in_child && ns.is_err() {
    let prepared = prepared_restriction(policy.network, &writable)
      .map_err(|e| ExecError::new(ErrorCode::ESANDBOX, format!("sandbox: {e}")))?;
    report.mechanism = "landlock+seccomp";
    let inv = Invocation {
      program,
      argv0: Some(
        plain
          .argv0
          .unwrap_or_else(|| plain.program.into_os_string()),
      ),
      args: plain.args,
    };
    return Ok((inv, report, Some(InChild(prepared))));
  }
  report.mechanism = if ns.is_ok() {
    "namespaces+landlock+seccomp"
  } else {
    "landlock+seccomp"
  };
  let args = helper_args(
    policy,
    cwd,
    &writable,
    ns.is_ok(),
    &mut report,
    program,
    plain,
  );
  let inv = Invocation {
    program: helper,
    argv0: None,
    args,
  };
  Ok((inv, report, None))
}

/// The sandbox helper's arguments: the roots, and with namespaces
/// (`ns_ok`) what is protected, hidden or kept and the namespaces to join,
/// then the program (`program`, found already) and its argv.
fn helper_args(
  policy: &SandboxPolicy,
  cwd: &Path,
  writable: &[PathBuf],
  ns_ok: bool,
  report: &mut SandboxReport,
  program: PathBuf,
  plain: Invocation,
) -> Vec<std::ffi::OsString> {
  let mut args: Vec<std::ffi::OsString> = Vec::new();
  let flag = |args: &mut Vec<std::ffi::OsString>, f: &str, v: &Path| {
    args.push(f.into());
    args.push(v.as_os_str().to_owned());
  };
  for w in writable {
    flag(&mut args, "--write", w);
  }
  if ns_ok {
    let protect = protected(policy, cwd, writable);
    let (hide, keep) = hidden(writable, &protect);
    for p in &protect {
      flag(&mut args, "--protect", p);
    }
    for h in &hide {
      flag(&mut args, "--hide", h);
    }
    for k in &keep {
      flag(&mut args, "--keep", k);
    }
    args.push("--ns".into());
    #[cfg(target_os = "linux")]
    if let Some(kept) = kept_namespaces() {
      use std::os::fd::AsRawFd;
      let me = std::process::id();
      let at = |f: &std::fs::File| PathBuf::from(format!("/proc/{me}/fd/{}", f.as_raw_fd()));
      flag(&mut args, "--join-user", &at(&kept.user));
      if !policy.network {
        flag(&mut args, "--join-net", &at(&kept.net));
      }
      // the template has this run's hidden directories, and no root of the
      // run holds /dev (the template's private /dev stays read-only)
      let dev = Path::new("/dev");
      if kept.hide == hide && kept.keep == keep && !writable.iter().any(|w| dev.starts_with(w)) {
        flag(&mut args, "--template", &at(&kept.mnt));
      }
    }
    report.protected = protect;
  }
  if policy.network {
    args.push("--net".into());
  }
  args.push("--argv0".into());
  args.push(
    plain
      .argv0
      .clone()
      .unwrap_or_else(|| plain.program.clone().into_os_string()),
  );
  args.push("--".into());
  args.push(program.into_os_string());
  args.extend(plain.args);
  args
}

/// macOS: the program and arguments behind `/usr/bin/sandbox-exec`.
fn wrap_seatbelt(
  policy: &SandboxPolicy,
  cwd: &Path,
  plain: Invocation,
) -> Result<(Invocation, SandboxReport), ExecError> {
  let roots = seatbelt::roots(policy, cwd)?;
  let mut report = new_report(policy, cwd, roots.clone());
  report.missing.clear();
  if !Path::new(seatbelt::SANDBOX_EXEC).is_file() {
    let why = format!("{} is missing", seatbelt::SANDBOX_EXEC);
    return unavailable(policy, why, report, plain);
  }
  let absolute = SandboxPolicy {
    protect: policy.protect.iter().map(|p| cwd.join(p)).collect(),
    ..policy.clone()
  };
  let (prog, argv) = seatbelt::wrap(&absolute, &roots, &plain.program, &plain.args);
  report.mechanism = "seatbelt";
  Ok((
    Invocation {
      program: prog,
      argv0: None,
      args: argv,
    },
    report,
  ))
}

/// The report of a run about to be restricted to `policy` in `cwd`.
fn new_report(policy: &SandboxPolicy, cwd: &Path, writable: Vec<PathBuf>) -> SandboxReport {
  let abi = landlock_abi();
  SandboxReport {
    applied: true,
    abi,
    missing: missing_for(abi, policy.network),
    warn: policy.on_unavailable == OnUnavailable::Warn,
    network: policy.network,
    cwd: cwd.to_path_buf(),
    writable,
    ..Default::default()
  }
}

#[cfg(test)]
mod tests;
