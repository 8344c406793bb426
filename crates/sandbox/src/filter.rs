//! The seccomp filters of a sandboxed command (crate `seccompiler`). Every
//! match is an error return (EPERM; ENOSYS for `clone3`, whose flags a
//! filter cannot read, so libc falls back to `clone`), never a kill, so a
//! program gets an ordinary error message.

use std::collections::BTreeMap;

use seccompiler::{
  BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
  SeccompRule, TargetArch,
};

/// The namespace flags of `clone`/`unshare`: a sandboxed process makes no
/// namespace (no nested user namespace, whose root could undo the mounts).
const NS_FLAGS: &[u64] = &[
  libc::CLONE_NEWNS as u64,
  libc::CLONE_NEWCGROUP as u64,
  libc::CLONE_NEWUTS as u64,
  libc::CLONE_NEWIPC as u64,
  libc::CLONE_NEWUSER as u64,
  libc::CLONE_NEWPID as u64,
  libc::CLONE_NEWNET as u64,
  0x80, // CLONE_NEWTIME
];

/// Always denied: calls that reach another process's memory or
/// descriptors, the kernel's keyrings, BPF and perf, mounts, file handles,
/// namespaces, and io_uring (which opens sockets without socket()).
const DENIED: &[i64] = &[
  libc::SYS_ptrace,
  libc::SYS_process_vm_readv,
  libc::SYS_process_vm_writev,
  libc::SYS_io_uring_setup,
  libc::SYS_io_uring_enter,
  libc::SYS_io_uring_register,
  libc::SYS_pidfd_getfd,
  libc::SYS_process_madvise,
  libc::SYS_kcmp,
  libc::SYS_userfaultfd,
  libc::SYS_perf_event_open,
  libc::SYS_bpf,
  libc::SYS_keyctl,
  libc::SYS_add_key,
  libc::SYS_request_key,
  libc::SYS_mount,
  libc::SYS_umount2,
  libc::SYS_pivot_root,
  libc::SYS_move_mount,
  libc::SYS_open_tree,
  libc::SYS_fsopen,
  libc::SYS_fsmount,
  libc::SYS_fsconfig,
  libc::SYS_fspick,
  libc::SYS_mount_setattr,
  libc::SYS_open_by_handle_at,
  libc::SYS_name_to_handle_at,
  libc::SYS_setns,
];

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
  SeccompRule::new(conds).map_err(|e| format!("seccomp rule: {e}"))
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
  SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value)
    .map_err(|e| format!("seccomp rule: {e}"))
}

fn arch() -> TargetArch {
  if cfg!(target_arch = "x86_64") {
    TargetArch::x86_64
  } else {
    TargetArch::aarch64
  }
}

fn build(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
  SeccompFilter::new(
    rules,
    SeccompAction::Allow,
    SeccompAction::Errno(errno as u32),
    arch(),
  )
  .map_err(|e| format!("seccomp filter: {e}"))?
  .try_into()
  .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))
}

/// The filters, in the order they are installed.
#[allow(clippy::unnecessary_cast)] // ioctl numbers: c_ulong on glibc, c_int on musl
pub fn filters(network: bool) -> Result<Vec<BpfProgram>, String> {
  let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
  for &nr in DENIED {
    rules.insert(nr, Vec::new());
  }
  let ns_rules = |arg: u8| -> Result<Vec<SeccompRule>, String> {
    NS_FLAGS
      .iter()
      .map(|&f| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(f), f)?]))
      .collect()
  };
  rules.insert(libc::SYS_unshare, ns_rules(0)?);
  rules.insert(libc::SYS_clone, ns_rules(0)?);
  // terminal input injection into whatever terminal the host has (the
  // constants' type differs by libc: c_ulong on glibc, c_int on musl)
  let tiocsti = rule(vec![SeccompCondition::new(
    1,
    SeccompCmpArgLen::Dword,
    SeccompCmpOp::Eq,
    libc::TIOCSTI as u64,
  )
  .map_err(|e| format!("seccomp rule: {e}"))?])?;
  let tioclinux = rule(vec![SeccompCondition::new(
    1,
    SeccompCmpArgLen::Dword,
    SeccompCmpOp::Eq,
    libc::TIOCLINUX as u64,
  )
  .map_err(|e| format!("seccomp rule: {e}"))?])?;
  rules.insert(libc::SYS_ioctl, vec![tiocsti, tioclinux]);
  if !network {
    // no socket at all but a Unix socketpair (in-process IPC): a pathname
    // Unix socket of a host service (docker.sock) is out of reach too
    rules.insert(libc::SYS_socket, Vec::new());
    let not_unix = SeccompCondition::new(
      0,
      SeccompCmpArgLen::Dword,
      SeccompCmpOp::Ne,
      libc::AF_UNIX as u64,
    )
    .map_err(|e| format!("seccomp rule: {e}"))?;
    rules.insert(libc::SYS_socketpair, vec![rule(vec![not_unix])?]);
  }
  let mut clone3 = BTreeMap::new();
  clone3.insert(libc::SYS_clone3, Vec::new());
  Ok(vec![
    build(rules, libc::EPERM)?,
    build(clone3, libc::ENOSYS)?,
  ])
}

#[cfg(test)]
mod tests {
  #[test]
  fn the_filters_build_for_both_network_settings() {
    assert_eq!(super::filters(false).unwrap().len(), 2);
    assert_eq!(super::filters(true).unwrap().len(), 2);
  }
}
