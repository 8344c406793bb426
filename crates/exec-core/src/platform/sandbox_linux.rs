//! Linux: the sandbox's mechanism, applied to the calling thread (what it
//! spawns afterwards inherits it): a Landlock domain (every write right of
//! the kernel's ABI outside the writable paths, TCP bind/connect unless
//! `network`, the signal and abstract-socket scopes), a seccomp filter
//! (crate `seccompiler`), and no capabilities. What it guarantees is in
//! [`crate::sandbox`].

use std::path::PathBuf;

use landlock::{
  path_beneath_rules, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
  RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{
  BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
  SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// The seccomp filter: EPERM (never a kill) for other sockets than Unix
/// ones (without `network`), and always for ptrace, process_vm_* and
/// io_uring (which can open sockets without socket()).
pub fn filter(network: bool) -> Result<BpfProgram, String> {
  let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
  for nr in [
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
  ] {
    rules.insert(nr, Vec::new());
  }
  if !network {
    let not_unix = |arg: u8| {
      SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
      )
      .and_then(|c| SeccompRule::new(vec![c]))
      .map_err(|e| format!("seccomp rule: {e}"))
    };
    rules.insert(libc::SYS_socket, vec![not_unix(0)?]);
    rules.insert(libc::SYS_socketpair, vec![not_unix(0)?]);
  }
  let arch = if cfg!(target_arch = "x86_64") {
    TargetArch::x86_64
  } else {
    TargetArch::aarch64
  };
  let f = SeccompFilter::new(
    rules,
    SeccompAction::Allow,
    SeccompAction::Errno(libc::EPERM as u32),
    arch,
  )
  .map_err(|e| format!("seccomp filter: {e}"))?;
  f.try_into()
    .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))
}

/// Restrict the calling thread (and what it spawns from now on). `Err` says
/// what could not be applied (the caller makes it an `ESANDBOX` error).
pub fn restrict_thread(network: bool, writable: &[PathBuf]) -> Result<(), String> {
  let abi = ABI::V6;
  let mut ruleset = Ruleset::default()
    .set_compatibility(CompatLevel::HardRequirement)
    .handle_access(AccessFs::from_write(ABI::V1))
    .map_err(|e| format!("Landlock: {e}"))?
    .set_compatibility(CompatLevel::BestEffort)
    .handle_access(AccessFs::from_write(abi))
    .map_err(|e| format!("Landlock: {e}"))?;
  if !network {
    ruleset = ruleset
      .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
      .map_err(|e| format!("Landlock: {e}"))?;
  }
  let ruleset = ruleset
    .scope(Scope::Signal | Scope::AbstractUnixSocket)
    .map_err(|e| format!("Landlock: {e}"))?;
  let created = ruleset
    .create()
    .map_err(|e| format!("Landlock: {e}"))?
    .add_rules(path_beneath_rules(writable, AccessFs::from_write(abi)))
    .map_err(|e| format!("Landlock rule: {e}"))?;
  let status = created
    .restrict_self()
    .map_err(|e| format!("Landlock: {e}"))?;
  if status.ruleset == RulesetStatus::NotEnforced {
    return Err("Landlock is not enabled in this kernel".into());
  }
  // built once per network setting, then shared by every spawn
  static FILTERS: [std::sync::OnceLock<Result<BpfProgram, String>>; 2] =
    [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
  let prog = FILTERS[network as usize]
    .get_or_init(|| filter(network))
    .as_ref()
    .map_err(|e| e.clone())?;
  seccompiler::apply_filter(prog).map_err(|e| format!("seccomp: {e}"))?;
  // a root host's child must not keep capabilities (it could read other
  // processes' /proc/<pid>/environ despite Landlock)
  super::drop_all_capabilities().map_err(|e| format!("capabilities could not be dropped: {e}"))?;
  Ok(())
}

#[cfg(test)]
mod tests {
  #[test]
  fn the_filter_builds_for_both_network_settings() {
    assert!(!super::filter(false).unwrap().is_empty());
    assert!(!super::filter(true).unwrap().is_empty());
  }
}
