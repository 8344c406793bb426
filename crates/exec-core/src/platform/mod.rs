//! The calls that differ between Linux, macOS and Windows, each with its
//! twin for the other systems. Everything above this module is portable POSIX (process
//! groups, signals, pipes, PTYs); what only one kernel offers (prctl, pipe
//! sizes, close_range, `/proc/sys`) lives here, so a new target only touches
//! this folder. Windows (`windows.rs`) has only what its run path needs:
//! Job Objects, console control events, handles and ConPTY
//! (`conpty_windows.rs`); the POSIX-only features
//! above (sessions, PTYs, the sandbox helper, cgroups, the reaper, `/proc`)
//! are left out of its build at module level.
//!
//! What the twin does where a call has no equivalent is stated on the call:
//! it is always "less" (a pipe keeps its default size), never different
//! behaviour of what does run.

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "linux")]
mod spawn_linux;
#[cfg(target_os = "linux")]
pub use spawn_linux::{
  kill_pidfd, reap_pidfd, reap_pidfd_nohang, spawn as raw_spawn, RawChild, RawSpawn,
};

#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub use macos::*;

#[cfg(unix)]
mod fd;
#[cfg(unix)]
pub use fd::*;

#[cfg(target_os = "linux")]
#[path = "procfs_linux.rs"]
mod procfs;
#[cfg(target_os = "macos")]
#[path = "procfs_macos.rs"]
mod procfs;
#[cfg(unix)]
pub use procfs::*;

// the POSIX calls both kernels share
#[cfg(unix)]
mod posix;
#[cfg(unix)]
pub use posix::*;

// Job Objects, console control events, handles (issue 25)
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

// ConPTY: a pseudo console and the child on it
#[cfg(windows)]
mod conpty_windows;
#[cfg(windows)]
pub use conpty_windows::*;

/// Windows, where a rule above this layer differs (which interpreter, how a
/// program is named): `if platform::WINDOWS`, so both branches compile everywhere.
pub const WINDOWS: bool = cfg!(windows);

/// Whether a terminal (io.type 'pty') can be opened: always on POSIX; on
/// Windows where ConPTY is (10 1809 and later).
pub fn pty_available() -> bool {
  #[cfg(windows)]
  return conpty_available();
  #[cfg(not(windows))]
  return true;
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!("exec-native supports Linux, macOS and Windows only");

/// What the system offers an OS sandbox (`sandboxStatus()`): the ground the
/// planned `sandbox` option stands on (Landlock + seccomp on Linux, Seatbelt
/// on macOS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SandboxSupport {
  /// The Landlock ABI version (0: not available).
  pub landlock_abi: u32,
  /// seccomp filters can be installed.
  pub seccomp: bool,
  /// This user can create user namespaces (for mount/network isolation).
  pub user_namespaces: bool,
  /// User namespaces exist but a policy denies them to unprivileged users
  /// (Debian's `unprivileged_userns_clone=0`, Ubuntu's AppArmor restriction).
  pub user_namespaces_restricted: bool,
  /// `/usr/bin/sandbox-exec` (macOS Seatbelt) is there.
  pub sandbox_exec: bool,
}

/// What one read of a process's start-up environment found (macOS's reader
/// tells only `Hit` from `Unreadable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub enum Environ {
  Hit,
  Miss,
  /// Nothing to read: a kernel thread, a zombie, or a process in the middle
  /// of an `execve` (its new stack is not set up yet).
  Empty,
  /// Could not be opened (gone, not ours to read, or no `/proc`).
  Unreadable,
}
