//! `sandboxStatus()`: what this machine offers an OS sandbox, and which
//! boundary a `sandbox` option gets here (docs/SANDBOX.md).

use napi_derive::napi;

/// What the system supports for sandboxing children.
#[napi(object, object_from_js = false)]
pub struct SandboxStatus {
  /// `'linux'` or `'darwin'`.
  pub platform: String,
  /// The Landlock ABI version of the kernel (0: no Landlock). Writes are
  /// controlled from 1, TCP from 4, signal and abstract-socket scopes from 6.
  pub landlock_abi: u32,
  /// seccomp filters can be installed.
  pub seccomp: bool,
  /// This user can create user namespaces (mount and network isolation).
  pub user_namespaces: bool,
  /// User namespaces are denied to unprivileged users by policy (Debian's
  /// `unprivileged_userns_clone=0`, Ubuntu's AppArmor restriction).
  pub user_namespaces_restricted: bool,
  /// macOS: `/usr/bin/sandbox-exec` (Seatbelt) is present.
  pub sandbox_exec: bool,
  /// Linux: the sandbox helper (`exec-native-sandbox`, shipped beside the
  /// addon) that a sandboxed child restricts itself with; null when missing.
  pub helper: Option<String>,
  /// The full boundary works here: the helper put a probe in new user,
  /// mount, PID and network namespaces (tried once).
  pub namespaces: bool,
  /// Why not (`namespaces: false`): sandboxed runs then get Landlock +
  /// seccomp only, and their `sandbox.missing` lists the namespaces.
  pub namespaces_unavailable: Option<String>,
  /// What `sandbox: true` gets here: `'namespaces+landlock+seccomp'`,
  /// `'landlock+seccomp'`, `'seatbelt'`, or `''` (none: `ESANDBOX`).
  pub mechanism: String,
}

/// What this machine offers an OS sandbox: Landlock ABI, seccomp, user
/// namespaces (Linux), `sandbox-exec` (macOS). Nothing is changed by asking.
#[napi]
pub fn sandbox_status() -> SandboxStatus {
  let s = exec_core::process::sandbox::sandbox_support();
  let linux = cfg!(target_os = "linux");
  let helper = if linux {
    exec_core::process::sandbox::helper()
  } else if cfg!(windows) {
    Err("the sandbox is not available on Windows yet".into())
  } else {
    Err("Linux only".into())
  };
  let ns = if linux && helper.is_ok() {
    exec_core::process::sandbox::namespaces()
  } else {
    Err(helper.clone().err().unwrap_or_else(|| "Linux only".into()))
  };
  let mechanism = match () {
    _ if !linux && s.sandbox_exec => "seatbelt",
    _ if !linux || s.landlock_abi == 0 || helper.is_err() => "",
    _ if ns.is_ok() => "namespaces+landlock+seccomp",
    _ => "landlock+seccomp",
  };
  SandboxStatus {
    platform: if cfg!(target_os = "macos") {
      "darwin"
    } else if cfg!(windows) {
      "win32"
    } else {
      "linux"
    }
    .to_owned(),
    landlock_abi: s.landlock_abi,
    seccomp: s.seccomp,
    user_namespaces: s.user_namespaces,
    user_namespaces_restricted: s.user_namespaces_restricted,
    sandbox_exec: s.sandbox_exec,
    helper: helper
      .as_ref()
      .ok()
      .map(|p| p.to_string_lossy().into_owned()),
    namespaces: ns.is_ok(),
    namespaces_unavailable: ns.err(),
    mechanism: mechanism.to_owned(),
  }
}
