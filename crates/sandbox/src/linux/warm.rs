//! Runs made ahead (the protocol: `exec_native_sandbox::zygote`, "Runs made
//! ahead").
//!
//! After the kept helper answers a namespaced request, it forks the next
//! run at once, as the host's child (`CLONE_PARENT`), and that run does
//! everything that is the same for every run of the host before its request
//! comes: it joins the host's kept user namespace, network namespace (with
//! network off) and template mount namespace, and starts its init in new
//! mount, IPC and PID namespaces (`CLONE_VM`, as [`super::namespaces`]
//! does), which mounts the run's `/dev/shm` and `/proc`. The init then
//! waits on a socket of its own for the request, which the kept helper
//! passes on as it came from the host (with the three stdio descriptors).
//! It then does the run's part: stdio, environment, the run's own mounts
//! (the writable roots, the protected paths), its working directory, and
//! the command ([`super::start_command`]), exactly as a run forked at the
//! request does after its mounts.
//!
//! So a request no longer waits for a fork, three `setns`, a `clone` with
//! three new namespaces and two mounts: the full boundary went from 1.83 to
//! 1.51 ms by the median on the 2-core test machine (docs/PERFORMANCE.md,
//! "Runs made ahead").
//!
//! A warm run that is never used ends when the kept helper does (its
//! socket closes: the init ends, and the run with it) or when the kept
//! helper kills it (its namespaces are no longer the host's); the host,
//! told of it by a `WARM` reply, reaps it.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use exec_native_sandbox::zygote::{self as z, WarmKey};

use super::{
  errno, fail, fork_as_host_child, init_prelude, join, mount_proc, parse, read_request, run_mounts,
  set_environment, shm, show_as_run, start_command, start_init, SETUP_FAILED,
};

/// The namespaces a namespaced request names, and their identity.
pub struct Target {
  pub key: WarmKey,
  user: PathBuf,
  net: Option<PathBuf>,
  template: PathBuf,
}

impl Target {
  /// The namespaces of a request's arguments (`argv`, as a helper would be
  /// started with them), when a warm run can serve it: `--ns` with the
  /// host's kept user namespace, template and (network off) network
  /// namespace, each of which exists.
  pub fn of(argv: &[Vec<u8>]) -> Option<Target> {
    let opts = parse(argv.iter().cloned().map(OsString::from_vec)).ok()?;
    if !opts.ns || opts.anchor {
      return None;
    }
    let id = |p: &PathBuf| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let user = opts.join_user?;
    let template = opts.template?;
    let net = if opts.net { None } else { Some(opts.join_net?) };
    Some(Target {
      key: WarmKey {
        user: id(&user)?,
        net: match &net {
          Some(p) => Some(id(p)?),
          None => None,
        },
        template: id(&template)?,
      },
      user,
      net,
      template,
    })
  }
}

/// A run made ahead, waiting for its request.
pub struct Warm {
  pub pid: i32,
  pub pidfd: OwnedFd,
  /// The kept helper's end of the init's socket.
  sock: OwnedFd,
  pub key: WarmKey,
}

impl Warm {
  /// Fork the run for `target` (see the module doc). `None` if the fork
  /// failed; a run whose set-up fails ends, and its socket with it.
  pub fn make(target: Target) -> Option<Warm> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().ok()?;
    let Some((pid, pidfd)) = fork_as_host_child().ok()? else {
      drop(ours);
      run(&target, OwnedFd::from(theirs))
    };
    drop(theirs);
    Some(Warm {
      pid,
      pidfd,
      sock: OwnedFd::from(ours),
      key: target.key,
    })
  }

  /// Pass the request on (its header, body and stdio) to this run: its pid
  /// and pidfd, and its socket (see [`wait_for_mounts`]); or `None` if it
  /// is gone (it is then killed, for the host to reap, and the caller forks
  /// the run).
  pub fn hand_over(
    self,
    header: &z::Header,
    body: &[u8],
    stdio: &[OwnedFd],
  ) -> Option<((i32, OwnedFd), OwnedFd)> {
    let fds: Vec<RawFd> = stdio.iter().map(|f| f.as_raw_fd()).collect();
    if z::send_request(self.sock.as_raw_fd(), header, body, &fds).is_ok() {
      return Some(((self.pid, self.pidfd), self.sock));
    }
    self.end();
    None
  }

  /// Kill this run (unused); the host reaps it.
  pub fn end(self) {
    // SAFETY: pidfd_send_signal(2) on a pidfd this value owns; plain integers otherwise.
    unsafe {
      libc::syscall(
        libc::SYS_pidfd_send_signal,
        self.pidfd.as_raw_fd(),
        libc::SIGKILL,
        std::ptr::null::<libc::siginfo_t>(),
        0u32,
      )
    };
  }
}

/// Wait until the run handed a request on `sock` has made its mounts (its
/// init closes the socket then), or a request comes on `host` (the kept
/// helper's socket), or 10 ms have passed: the next run is made ahead then,
/// so that the two do not contend for the mount table (and its locks) at
/// once. (Making it at once was slower, 1.50 against 1.46 ms by the median,
/// and so was waiting until the run has ended, 1.66 against 1.48: the
/// set-up is best overlapped with the run's command, on the other core;
/// `benchmark/sandbox-ab.mjs`, two helpers with one addon, docs/PERFORMANCE.md.)
pub fn wait_for_mounts(sock: &OwnedFd, host: RawFd) {
  let mut fds = [
    libc::pollfd {
      fd: sock.as_raw_fd(),
      events: libc::POLLIN,
      revents: 0,
    },
    libc::pollfd {
      fd: host,
      events: libc::POLLIN,
      revents: 0,
    },
  ];
  // SAFETY: `fds` is a live array of two pollfd and 2 its length; poll(2) writes only `revents`.
  unsafe { libc::poll(fds.as_mut_ptr(), 2, 10) };
}

/// What the init of a warm run needs, shared with it through the memory it
/// shares with the run.
struct WarmInit {
  parent: i32,
  status: i32,
  sock: i32,
  command_stack: *mut libc::c_void,
}

/// The warm run (the host's child, forked from the kept helper): its own
/// group, stdio on `/dev/null` until its request, the host's namespaces
/// joined, then its init (see the module doc); it is the monitor of
/// [`super::namespaces`] from there on.
fn run(target: &Target, sock: OwnedFd) -> ! {
  show_as_run();
  // the kept helper's socket to the host (at 0) is not this run's
  // SAFETY: a literal NUL-terminated path; the descriptor is dup'd over 0 and closed.
  let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
  // SAFETY: dup2 replaces fd 0, which no Rust object of this process owns; `null` is ours.
  if null < 0 || unsafe { libc::dup2(null, 0) } < 0 {
    fail(format!("warm run: /dev/null: {}", errno()));
  }
  // SAFETY: `null` was opened above and is closed once.
  unsafe { libc::close(null) };
  // nothing else of the kept helper's (another run's stdio, its warm
  // socket): only this run's socket is kept
  let keep = sock.as_raw_fd() as u32;
  // SAFETY: close_range(2) takes plain integers; the descriptors it closes are owned by no Rust
  // object of this process (the kept helper's values that own them are never dropped here: this
  // function does not return), and `sock` is left open.
  unsafe {
    libc::syscall(libc::SYS_close_range, 3u32, keep - 1, 0u32);
    libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
  }
  // SAFETY: setpgid(0, 0) makes this process a group leader; plain integers.
  if unsafe { libc::setpgid(0, 0) } != 0 {
    fail(format!("setpgid: {}", errno()));
  }
  // each namespace opened and checked to be the one the request named,
  // before any is joined (from inside the user namespace the host's
  // descriptors are out of reach)
  let open = |p: &PathBuf, want: (u64, u64)| -> i32 {
    let Ok(f) = std::fs::File::open(p) else {
      // SAFETY: _exit ends the process without unwinding (its socket closes: unused).
      unsafe { libc::_exit(SETUP_FAILED) }
    };
    match f.metadata() {
      Ok(m) if (m.dev(), m.ino()) == want => std::os::fd::IntoRawFd::into_raw_fd(f),
      // SAFETY: as above.
      _ => unsafe { libc::_exit(SETUP_FAILED) },
    }
  };
  let user = open(&target.user, target.key.user);
  let net = target
    .net
    .as_ref()
    .zip(target.key.net)
    .map(|(p, want)| open(p, want));
  let template = open(&target.template, target.key.template);
  if !join(Some(user), libc::CLONE_NEWUSER)
    || net.is_some_and(|fd| !join(Some(fd), libc::CLONE_NEWNET))
    || !join(Some(template), libc::CLONE_NEWNS)
  {
    // SAFETY: _exit ends the process without unwinding (its socket closes: unused).
    unsafe { libc::_exit(SETUP_FAILED) }
  }
  // the init keeps the socket: it is not close-on-exec there, and the
  // command never has it (the init closes it before it starts the command)
  let sock = std::os::fd::IntoRawFd::into_raw_fd(sock);
  let flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;
  start_init(flags, init_main, |parent, status, command_stack| WarmInit {
    parent,
    status,
    sock,
    command_stack,
  })
}

/// pid 1 of a warm run: its `/dev/shm` and `/proc`, then its request, then
/// the run's own part (see the module doc). The kept helper gone before a
/// request came: the init ends, and the run with it.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
  // SAFETY: `arg` is the `WarmInit` the run passed, which lives until the run ends (it never
  // returns), and this process dies with it (parent-death signal).
  let init = unsafe { &*(arg as *const WarmInit) };
  init_prelude(init.parent);
  if let Err(e) = shm().and_then(|()| mount_proc()) {
    fail(e);
  }
  // the kept helper gone before a request came: `read_request` ends this
  // process (and the run with it)
  let (header, stdio, body) = read_request(init.sock);
  if stdio.len() != 3 {
    fail("warm run: a request without its stdio");
  }
  let req = match z::decode(&header, &body) {
    Ok(req) => req,
    Err(e) => fail(format!("warm run: {e}")),
  };
  for (to, from) in stdio.iter().enumerate() {
    // SAFETY: `from` is a descriptor received with the request and open; dup2(2) makes `to` a
    // copy, without close-on-exec (what stdio was before was /dev/null, owned by nothing).
    if unsafe { libc::dup2(from.as_raw_fd(), to as i32) } < 0 {
      fail(format!("warm run: dup2: {}", errno()));
    }
  }
  drop(stdio);
  set_environment(req.env);
  let opts = match parse(req.argv.into_iter().map(OsString::from_vec)) {
    Ok(o) => o,
    Err(e) => fail(format!("bad arguments: {e}")),
  };
  if let Err(e) = run_mounts(&opts) {
    fail(e);
  }
  let cwd = std::path::Path::new(std::ffi::OsStr::from_bytes(&req.cwd));
  if let Err(e) = std::env::set_current_dir(cwd) {
    fail(format!("cannot enter {}: {e}", cwd.display()));
  }
  // the mounts are made: closing the socket tells the kept helper, which
  // makes the next run ahead only now (see `wait_for_mounts`)
  // SAFETY: the socket is this process's copy, owned by `init` only as a number; closed once.
  unsafe { libc::close(init.sock) };
  start_command(&opts, init.status, init.command_stack)
}
