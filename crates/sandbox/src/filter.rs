//! The seccomp filter of a sandboxed command: one classic-BPF program,
//! generated here. Every match is an error return (EPERM; ENOSYS for
//! `clone3`, whose flags a filter cannot read, so libc falls back to
//! `clone`), never a kill, so a program gets an ordinary error message. A
//! system call of another ABI (i386's `int 0x80`, x32) is refused whole.
//!
//! Why not `seccompiler`, which the first version used: its programs test
//! the system call number against each rule in turn (317 instructions for
//! this list), and installing a filter costs in proportion to that, since
//! the kernel runs the program for every system call number to build its
//! cache: 270-320 us per child on the 2-core test machine
//! (`cargo run --release -p exec-native-sandbox --example restrict_cost`),
//! most of what the whole restriction cost. Here the numbers are searched as
//! a balanced tree: a few comparisons per call, the same rules. Every path
//! ends in one of three shared returns (allow, EPERM, ENOSYS) rather than
//! a return of its own: the kernel checks, converts and compiles the whole
//! program in every sandboxed child, at about 0.25 us an instruction on
//! that machine (`scripts/probes/seccomp-length.c`).

/// One BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
  pub code: u16,
  pub jt: u8,
  pub jf: u8,
  pub k: u32,
}

/// A seccomp program, as `seccomp(SECCOMP_SET_MODE_FILTER)` takes it.
pub type Program = Vec<Insn>;

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// `struct seccomp_data`: nr at 0, arch at 4, args from 16 (the low word of
/// a 64-bit argument first: both targets are little-endian).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg(i: u32) -> u32 {
  16 + 8 * i
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64
/// x32 system calls come with the x86_64 arch and this bit in the number.
#[cfg(target_arch = "x86_64")]
const X32_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_BIT: Option<u32> = None;

/// The namespace flags of `clone`/`unshare` (all in the low word): a
/// sandboxed process makes no namespace (no nested user namespace, whose
/// root could undo the mounts).
const NS_FLAGS: u32 = (libc::CLONE_NEWNS
  | libc::CLONE_NEWCGROUP
  | libc::CLONE_NEWUTS
  | libc::CLONE_NEWIPC
  | libc::CLONE_NEWUSER
  | libc::CLONE_NEWPID
  | libc::CLONE_NEWNET) as u32
  | 0x80; // CLONE_NEWTIME

/// Always denied: calls that reach another process's memory or
/// descriptors, the kernel's keyrings, BPF and perf, mounts, file handles,
/// namespaces, and io_uring (which opens sockets without socket()).
const DENIED: &[libc::c_long] = &[
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

/// What happens to one system call.
#[derive(Clone, Copy, Debug)]
enum Rule {
  /// Always this errno.
  Deny(u32),
  /// EPERM when the low word of argument `arg` has any of `mask`'s bits.
  DenyFlags { arg: u32, mask: u32 },
  /// EPERM when the low word of argument `arg` is `a` or `b`.
  DenyEither { arg: u32, a: u32, b: u32 },
  /// EPERM unless the low word of argument `arg` is `only`.
  DenyUnless { arg: u32, only: u32 },
}

/// Where a jump goes: the next instruction, `n` further on, or one of the
/// three returns every path shares (the program's last instructions).
#[derive(Clone, Copy, Debug)]
enum To {
  Next,
  Skip(usize),
  Allow,
  Eperm,
  Enosys,
}

/// An instruction whose jumps are not resolved yet.
#[derive(Clone, Copy, Debug)]
struct Op {
  code: u16,
  k: u32,
  jt: To,
  jf: To,
}

fn stmt(code: u16, k: u32) -> Op {
  Op {
    code,
    k,
    jt: To::Next,
    jf: To::Next,
  }
}

fn jump(code: u16, k: u32, jt: To, jf: To) -> Op {
  Op { code, k, jt, jf }
}

/// The instructions that test one rule's number, then its arguments.
/// The number's test comes first; when it does not match, it jumps to
/// what follows the rule (`To::Skip`), which the caller may turn into an
/// allow.
fn rule_ops(nr: u32, rule: Rule) -> Vec<Op> {
  let ld = |arg| stmt(BPF_LD_W_ABS, off_arg(arg));
  let body = match rule {
    Rule::Deny(errno) if errno == libc::EPERM as u32 => {
      return vec![jump(BPF_JEQ_K, nr, To::Eperm, To::Next)];
    }
    Rule::Deny(_) => return vec![jump(BPF_JEQ_K, nr, To::Enosys, To::Next)],
    Rule::DenyFlags { arg, mask } => vec![ld(arg), jump(BPF_JSET_K, mask, To::Eperm, To::Allow)],
    Rule::DenyEither { arg, a, b } => vec![
      ld(arg),
      jump(BPF_JEQ_K, a, To::Eperm, To::Next),
      jump(BPF_JEQ_K, b, To::Eperm, To::Allow),
    ],
    Rule::DenyUnless { arg, only } => vec![ld(arg), jump(BPF_JEQ_K, only, To::Allow, To::Eperm)],
  };
  let mut out = vec![jump(BPF_JEQ_K, nr, To::Next, To::Skip(body.len()))];
  out.extend(body);
  out
}

/// A search of `rules` (sorted by number) with the number in the
/// accumulator: a balanced tree of `jge`, a short `jeq` chain at the
/// leaves; a number no rule names is allowed.
fn search(rules: &[(u32, Rule)]) -> Vec<Op> {
  if rules.len() <= 3 {
    let mut out = Vec::new();
    let mut last = 0;
    for &(nr, rule) in rules {
      last = out.len();
      out.extend(rule_ops(nr, rule));
    }
    // the last rule's number did not match: nothing in this leaf did
    out[last].jf = To::Allow;
    return out;
  }
  let mid = rules.len() / 2;
  let low = search(&rules[..mid]);
  let high = search(&rules[mid..]);
  let mut out = vec![jump(BPF_JGE_K, rules[mid].0, To::Skip(low.len()), To::Next)];
  out.extend(low);
  out.extend(high);
  out
}

/// `ops` followed by the three shared returns, every jump resolved to an
/// offset.
fn resolve(ops: Vec<Op>) -> Program {
  let (allow, eperm, enosys) = (ops.len(), ops.len() + 1, ops.len() + 2);
  let at = |i: usize, to: To| -> u8 {
    let target = match to {
      To::Next => i + 1,
      To::Skip(n) => i + 1 + n,
      To::Allow => allow,
      To::Eperm => eperm,
      To::Enosys => enosys,
    };
    u8::try_from(target - (i + 1)).expect("a seccomp jump over more than 255 instructions")
  };
  let mut prog: Program = ops
    .iter()
    .enumerate()
    .map(|(i, op)| {
      let jumps = op.code & 0x07 == 0x05; // BPF_JMP
      Insn {
        code: op.code,
        jt: if jumps { at(i, op.jt) } else { 0 },
        jf: if jumps { at(i, op.jf) } else { 0 },
        k: op.k,
      }
    })
    .collect();
  for k in [
    RET_ALLOW,
    RET_ERRNO | libc::EPERM as u32,
    RET_ERRNO | libc::ENOSYS as u32,
  ] {
    prog.push(Insn {
      code: BPF_RET_K,
      jt: 0,
      jf: 0,
      k,
    });
  }
  prog
}

/// The program for a command with `network` or without.
pub fn program(network: bool) -> Program {
  let nr = |n: libc::c_long| n as u32;
  let mut rules: Vec<(u32, Rule)> = DENIED
    .iter()
    .map(|&n| (nr(n), Rule::Deny(libc::EPERM as u32)))
    .collect();
  let ns = Rule::DenyFlags {
    arg: 0,
    mask: NS_FLAGS,
  };
  rules.push((nr(libc::SYS_unshare), ns));
  rules.push((nr(libc::SYS_clone), ns));
  // clone3's flags are in memory a filter cannot read: ENOSYS, and libc
  // falls back to clone, whose flags it can
  rules.push((nr(libc::SYS_clone3), Rule::Deny(libc::ENOSYS as u32)));
  // terminal input injection into whatever terminal the host has (the
  // request is an int: its low word)
  #[allow(clippy::unnecessary_cast)] // c_ulong on glibc, c_int on musl
  rules.push((
    nr(libc::SYS_ioctl),
    Rule::DenyEither {
      arg: 1,
      a: libc::TIOCSTI as u32,
      b: libc::TIOCLINUX as u32,
    },
  ));
  if !network {
    // no socket at all but a Unix socketpair (in-process IPC): a pathname
    // Unix socket of a host service (docker.sock) is out of reach too
    rules.push((nr(libc::SYS_socket), Rule::Deny(libc::EPERM as u32)));
    rules.push((
      nr(libc::SYS_socketpair),
      Rule::DenyUnless {
        arg: 0,
        only: libc::AF_UNIX as u32,
      },
    ));
  }
  rules.sort_by_key(|r| r.0);
  rules.dedup_by_key(|r| r.0);
  let mut ops = vec![
    stmt(BPF_LD_W_ABS, OFF_ARCH),
    jump(BPF_JEQ_K, AUDIT_ARCH, To::Next, To::Enosys),
    stmt(BPF_LD_W_ABS, OFF_NR),
  ];
  if let Some(bit) = X32_BIT {
    ops.push(jump(BPF_JSET_K, bit, To::Enosys, To::Next));
  }
  ops.extend(search(&rules));
  resolve(ops)
}

/// Install `prog` on the calling thread (`no_new_privs` must be set).
/// System calls only.
pub fn install(prog: &[Insn]) -> std::io::Result<()> {
  #[repr(C)]
  struct Fprog {
    len: u16,
    filter: *const Insn,
  }
  let fprog = Fprog {
    len: prog.len() as u16,
    filter: prog.as_ptr(),
  };
  // SAFETY: `fprog` is a live repr(C) sock_fprog on this stack whose `filter` points at `prog`,
  // `len` instructions the borrow keeps alive for the call; the kernel copies the program, so
  // nothing needs to outlive it.
  let r = unsafe {
    libc::syscall(
      libc::SYS_seccomp,
      libc::SECCOMP_SET_MODE_FILTER,
      0u32,
      &fprog as *const Fprog,
    )
  };
  if r != 0 {
    return Err(std::io::Error::last_os_error());
  }
  Ok(())
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Run the program as the kernel would, on (nr, arch, args).
  fn run(prog: &[Insn], nr: libc::c_long, arch: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
    data[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
      data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
      let i = prog[pc];
      pc += 1;
      match i.code {
        BPF_LD_W_ABS => {
          let k = i.k as usize;
          acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
        }
        BPF_RET_K => return i.k,
        BPF_JEQ_K | BPF_JGE_K | BPF_JSET_K => {
          let hit = match i.code {
            BPF_JEQ_K => acc == i.k,
            BPF_JGE_K => acc >= i.k,
            _ => acc & i.k != 0,
          };
          pc += if hit { i.jt } else { i.jf } as usize;
        }
        c => panic!("unknown instruction {c:#x}"),
      }
    }
  }

  const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
  const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

  #[test]
  fn every_rule_holds_and_the_rest_is_allowed() {
    for network in [false, true] {
      let p = program(network);
      let call = |nr, args| run(&p, nr, AUDIT_ARCH, args);
      for &nr in DENIED {
        assert_eq!(call(nr, [0; 6]), EPERM, "{nr}");
      }
      for nr in [
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_execve,
        libc::SYS_openat,
      ] {
        assert_eq!(call(nr, [0; 6]), RET_ALLOW, "{nr}");
      }
      for nr in 0..460 {
        let listed = DENIED.contains(&nr)
          || [
            libc::SYS_unshare,
            libc::SYS_clone,
            libc::SYS_clone3,
            libc::SYS_ioctl,
            libc::SYS_socket,
            libc::SYS_socketpair,
          ]
          .contains(&nr);
        if !listed {
          assert_eq!(call(nr, [0; 6]), RET_ALLOW, "{nr}");
        }
      }
      let user = libc::CLONE_NEWUSER as u64;
      assert_eq!(call(libc::SYS_unshare, [user, 0, 0, 0, 0, 0]), EPERM);
      assert_eq!(call(libc::SYS_unshare, [0x80, 0, 0, 0, 0, 0]), EPERM);
      assert_eq!(
        call(libc::SYS_unshare, [libc::CLONE_FILES as u64, 0, 0, 0, 0, 0]),
        RET_ALLOW
      );
      let fork_flags =
        (libc::CLONE_CHILD_SETTID | libc::CLONE_CHILD_CLEARTID | libc::SIGCHLD) as u64;
      assert_eq!(
        call(libc::SYS_clone, [fork_flags, 0, 0, 0, 0, 0]),
        RET_ALLOW
      );
      assert_eq!(
        call(
          libc::SYS_clone,
          [fork_flags | libc::CLONE_NEWNET as u64, 0, 0, 0, 0, 0]
        ),
        EPERM
      );
      assert_eq!(call(libc::SYS_clone3, [0; 6]), ENOSYS);
      #[allow(clippy::unnecessary_cast)]
      let (sti, tcgets) = (libc::TIOCSTI as u64, libc::TCGETS as u64);
      assert_eq!(call(libc::SYS_ioctl, [0, sti, 0, 0, 0, 0]), EPERM);
      // the high word of an int argument is not looked at
      assert_eq!(call(libc::SYS_ioctl, [0, sti | 1 << 32, 0, 0, 0, 0]), EPERM);
      assert_eq!(call(libc::SYS_ioctl, [0, tcgets, 0, 0, 0, 0]), RET_ALLOW);
      let unix = libc::AF_UNIX as u64;
      let inet = libc::AF_INET as u64;
      let (socket, pair) = (
        call(libc::SYS_socket, [unix, 1, 0, 0, 0, 0]),
        call(libc::SYS_socketpair, [unix, 1, 0, 0, 0, 0]),
      );
      let inet_pair = call(libc::SYS_socketpair, [inet, 1, 0, 0, 0, 0]);
      if network {
        assert_eq!((socket, pair, inet_pair), (RET_ALLOW, RET_ALLOW, RET_ALLOW));
      } else {
        assert_eq!((socket, pair, inet_pair), (EPERM, RET_ALLOW, EPERM));
      }
      // another ABI is refused whole
      assert_eq!(run(&p, libc::SYS_read, 0x4000_0003, [0; 6]), ENOSYS);
      if let Some(bit) = X32_BIT {
        assert_eq!(call(libc::SYS_read | bit as libc::c_long, [0; 6]), ENOSYS);
      }
    }
  }

  #[test]
  fn the_program_is_short() {
    // its length is most of what installing it costs (the kernel checks,
    // converts and compiles it in every sandboxed child)
    let p = program(false);
    assert!(p.len() < 70, "{} instructions", p.len());
  }
}
