//! `sandboxStatus()`: what this machine offers an OS sandbox. The `sandbox`
//! option itself is not built yet (see docs/ARCHITECTURE.md); hosts can
//! already show what it would stand on.

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
}

/// What this machine offers an OS sandbox: Landlock ABI, seccomp, user
/// namespaces (Linux), `sandbox-exec` (macOS). Nothing is changed by asking.
#[napi]
pub fn sandbox_status() -> SandboxStatus {
  let s = exec_core::sandbox::sandbox_support();
  SandboxStatus {
    platform: if cfg!(target_os = "macos") {
      "darwin"
    } else {
      "linux"
    }
    .to_owned(),
    landlock_abi: s.landlock_abi,
    seccomp: s.seccomp,
    user_namespaces: s.user_namespaces,
    user_namespaces_restricted: s.user_namespaces_restricted,
    sandbox_exec: s.sandbox_exec,
  }
}
