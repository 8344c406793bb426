//! The restriction a command's process puts on itself before exec:
//! `no_new_privs`, a Landlock domain of its own, no capabilities, and the
//! seccomp filters ([`crate::filter`]).
//!
//! It comes in two halves so that the expensive, allocating half runs where
//! allocation is allowed: [`Prepared::new`] builds the Landlock ruleset (a
//! descriptor: the rules are added to it, nothing is restricted yet) and the
//! seccomp program; [`Prepared::apply`] makes the calling process enter a
//! new Landlock domain from that ruleset, drops its capabilities and
//! installs the program, with system calls only (no allocation, no lock),
//! so a child between `clone(CLONE_VM|CLONE_VFORK)` and `execve` may run it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use landlock::{
  path_beneath_rules, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
  RulesetCreatedAttr, Scope, ABI,
};

/// A restriction made ready in one process, to be applied by another (or by
/// the same, later).
pub struct Prepared {
  ruleset: OwnedFd,
  filter: crate::filter::Program,
}

/// A step of [`Prepared::apply`] that failed: its name and the error.
pub type Failed = (&'static str, std::io::Error);

impl Prepared {
  /// Writes only under `writable`; no TCP unless `network`; no signal to,
  /// nor abstract Unix socket of, a process outside the domain; the
  /// filters. `Err` names what could not be prepared (Landlock missing from
  /// the kernel among it).
  pub fn new(network: bool, writable: &[PathBuf]) -> Result<Prepared, String> {
    Ok(Prepared {
      ruleset: ruleset(network, writable)?,
      filter: crate::filter::program(network),
    })
  }

  /// Restrict the calling process (and what it runs from now on): system
  /// calls only, async-signal-safe, so a child between `clone` and `execve`
  /// may call it.
  pub fn apply(&self) -> Result<(), Failed> {
    let os = std::io::Error::last_os_error;
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes plain integers and is async-signal-safe, as this
    // function must be in a child between clone and execve.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
      return Err(("no_new_privs", os()));
    }
    let fd = self.ruleset.as_raw_fd();
    // SAFETY: `fd` is the Landlock ruleset descriptor `self.ruleset` owns and keeps open for the
    // call; the syscall only reads it (async-signal-safe).
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) } != 0 {
      return Err(("Landlock", os()));
    }
    drop_all_capabilities().map_err(|e| ("capabilities could not be dropped", e))?;
    crate::filter::install(&self.filter).map_err(|e| ("seccomp", e))
  }
}

/// Prepare, then apply to this process: the helper's way. `Err` names what
/// failed.
pub fn apply(network: bool, writable: &[PathBuf]) -> Result<(), String> {
  let p = Prepared::new(network, writable)?;
  p.apply().map_err(|(what, e)| format!("{what}: {e}"))
}

fn ruleset(network: bool, writable: &[PathBuf]) -> Result<OwnedFd, String> {
  let abi = ABI::V6;
  let ll = |e: landlock::RulesetError| format!("Landlock: {e}");
  let mut ruleset = Ruleset::default()
    .set_compatibility(CompatLevel::HardRequirement)
    .handle_access(AccessFs::from_write(ABI::V1))
    .map_err(ll)?
    .set_compatibility(CompatLevel::BestEffort)
    .handle_access(AccessFs::from_write(abi))
    .map_err(ll)?;
  if !network {
    ruleset = ruleset
      .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
      .map_err(ll)?;
  }
  let created = ruleset
    .scope(Scope::Signal | Scope::AbstractUnixSocket)
    .map_err(ll)?
    .create()
    .map_err(ll)?
    .add_rules(path_beneath_rules(writable, AccessFs::from_write(abi)))
    .map_err(ll)?;
  Option::<OwnedFd>::from(created).ok_or_else(|| "Landlock is not enabled in this kernel".into())
}

/// Every capability of this process and of what it execs: the bounding set
/// (so an exec as root gains none back), the ambient, inheritable,
/// permitted and effective sets. Without `CAP_SETPCAP` (a non-root host
/// without namespaces) the bounding set cannot be lowered, and need not be.
/// System calls only.
fn drop_all_capabilities() -> std::io::Result<()> {
  for cap in 0..64 {
    // SAFETY: prctl(PR_CAPBSET_DROP) takes plain integers; a system call, async-signal-safe.
    let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    if r == -1 {
      match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EINVAL) => break,
        Some(libc::EPERM) => break,
        _ => return Err(std::io::Error::last_os_error()),
      }
    }
  }
  // SAFETY: prctl(PR_CAP_AMBIENT_CLEAR_ALL) takes plain integers; a system call, async-signal-safe.
  unsafe {
    libc::prctl(
      libc::PR_CAP_AMBIENT,
      libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
      0,
      0,
      0,
    )
  };
  #[repr(C)]
  struct Header {
    version: u32,
    pid: i32,
  }
  #[repr(C)]
  #[derive(Clone, Copy)]
  struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
  }
  let header = Header {
    version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
    pid: 0,
  };
  let data = [Data {
    effective: 0,
    permitted: 0,
    inheritable: 0,
  }; 2];
  // SAFETY: `header` and `data` are live repr(C) values on this stack in the layout capset(2)
  // expects for version 3 (one header, two data words), and outlive the call; no allocation, so
  // async-signal-safe.
  let r = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
  if r == -1 {
    return Err(std::io::Error::last_os_error());
  }
  // nothing comes back through exec: the bounding set is empty (an exec as
  // uid 0 gains no more than it) and no_new_privs is set
  Ok(())
}
