//! The restriction a command's process puts on itself before exec:
//! `no_new_privs`, a Landlock domain of its own, no capabilities, and the
//! seccomp filters ([`crate::filter`]).

use std::path::PathBuf;

use landlock::{
  path_beneath_rules, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
  RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// Restrict this process (and what it runs from now on) to writes under
/// `writable`, no network unless `network`, and the filters. `Err` names
/// what could not be applied.
pub fn apply(network: bool, writable: &[PathBuf]) -> Result<(), String> {
  if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
    return Err(format!("no_new_privs: {}", std::io::Error::last_os_error()));
  }
  landlock(network, writable)?;
  drop_all_capabilities().map_err(|e| format!("capabilities could not be dropped: {e}"))?;
  for prog in crate::filter::filters(network)? {
    seccompiler::apply_filter(&prog).map_err(|e| format!("seccomp: {e}"))?;
  }
  Ok(())
}

fn landlock(network: bool, writable: &[PathBuf]) -> Result<(), String> {
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
  let status = ruleset
    .scope(Scope::Signal | Scope::AbstractUnixSocket)
    .map_err(ll)?
    .create()
    .map_err(ll)?
    .add_rules(path_beneath_rules(writable, AccessFs::from_write(abi)))
    .map_err(ll)?
    .restrict_self()
    .map_err(ll)?;
  if status.ruleset == RulesetStatus::NotEnforced {
    return Err("Landlock is not enabled in this kernel".into());
  }
  Ok(())
}

/// Every capability of this process and of what it execs: the bounding set
/// (so an exec as root gains none back), the ambient, inheritable,
/// permitted and effective sets. Without `CAP_SETPCAP` (a non-root host
/// without namespaces) the bounding set cannot be lowered, and need not be.
fn drop_all_capabilities() -> std::io::Result<()> {
  for cap in 0..64 {
    let r = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
    if r == -1 {
      match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EINVAL) => break,
        Some(libc::EPERM) => break,
        _ => return Err(std::io::Error::last_os_error()),
      }
    }
  }
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
  let r = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
  if r == -1 {
    return Err(std::io::Error::last_os_error());
  }
  // nothing comes back through exec: the bounding set is empty (an exec as
  // uid 0 gains no more than it) and no_new_privs is set
  Ok(())
}
