//! `exec-native-sandbox`: the child side of exec-native's sandbox (Linux).
//!
//! The host posix_spawns this program in place of the command (with the
//! command's stdio, environment, working directory and process group), and
//! it restricts *itself* before it execs the command. No task of the host
//! ever enters the sandbox's Landlock domain, and every run gets a domain of
//! its own, so a sandboxed child can reach neither its host nor another run
//! (Landlock's scopes separate a domain from every task outside it).
//!
//! ```text
//! exec-native-sandbox [--ns] [--net] [--write P]... [--protect P]... [--hide P]...
//!                     [--keep P]... [--argv0 A] [--probe] -- PROGRAM [ARGS...]
//! ```
//!
//! Without `--ns` (no user namespaces here): `no_new_privs`, Landlock,
//! no capabilities, seccomp, then `execve` of PROGRAM in this process.
//!
//! With `--ns`, three processes (see docs/SANDBOX.md):
//! - **this process** (the host's child, the leader of the run's process
//!   group): new user, mount, IPC (and without `--net`, network) namespaces;
//!   `/` read-only, each `--write` bound read-write, each `--protect`
//!   (`.git`) read-only again, each `--hide` (`/run`) an empty tmpfs, a
//!   private `/dev`; then a new PID namespace. It waits for the init and
//!   ends as the command ended (the same exit code, or the same signal), so
//!   the host sees the command's status. It ignores the signals a group
//!   kill sends (the command gets them itself, in the same group), but not
//!   SIGKILL: its death takes the init, and with it the namespace.
//! - **the init** (pid 1 of the new PID namespace, a fresh `/proc`): reaps
//!   orphans, and when the command ends, ends too, which makes the kernel
//!   kill everything left in the namespace. It dies with this process
//!   (parent-death signal).
//! - **the command** (pid 2): restricts itself as above, then execs.
//!
//! A step that fails ends the run before PROGRAM runs: exit 125 and a line
//! on stderr naming what failed (fail closed). An exec that fails: 127
//! (not found) or 126.

#![cfg_attr(all(target_os = "linux", not(test)), no_main)]

#[cfg(not(target_os = "linux"))]
fn main() {
  eprintln!("exec-native-sandbox: Linux only");
  std::process::exit(125);
}

// Linux: C's `main`, without Rust's start-up (`lang_start`), which reads
// /proc/self/maps and sets up a stack guard and signal handlers for a
// process that execs a moment later: about 0.1 ms of every sandboxed
// spawn. `std::env::args_os` still works (glibc hands the arguments to
// std's `.init_array` hook).
// (`cargo test`'s build of this file has its harness's `main`; this one is
// then only the entry point the code hangs from.)
#[cfg(all(target_os = "linux", not(test)))]
#[no_mangle]
pub extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
  linux::ARGV.store(
    if argc > 1 {
      argv as *mut _
    } else {
      std::ptr::null_mut()
    },
    std::sync::atomic::Ordering::Relaxed,
  );
  linux::main()
}

#[cfg(all(target_os = "linux", test))]
fn main() {
  linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
  use std::ffi::{CStr, CString, OsString};
  use std::os::unix::ffi::{OsStrExt, OsStringExt};
  use std::path::{Path, PathBuf};

  use exec_native_sandbox::restrict;

  mod warm;

  /// The process's own `argv` (its strings are what `/proc/<pid>/cmdline`
  /// shows), null when it has no argument.
  pub static ARGV: std::sync::atomic::AtomicPtr<*const libc::c_char> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

  /// A run forked from the kept helper shows `--run` where the kept helper
  /// shows `--zygote` (in `ps`, and to whoever looks for the kept helper).
  fn show_as_run() {
    let argv = ARGV.load(std::sync::atomic::Ordering::Relaxed);
    if argv.is_null() {
      return;
    }
    // SAFETY: `argv` is the argument vector C's main received (argc > 1, so argv[1] is a valid
    // NUL-terminated string in the process's argument area); it is overwritten within its own
    // length, and nothing else reads it (std copied the arguments at start-up).
    unsafe {
      let arg = *argv.add(1) as *mut u8;
      let len = CStr::from_ptr(arg.cast()).to_bytes().len();
      let mark = b"--run";
      if len >= mark.len() {
        std::ptr::copy_nonoverlapping(mark.as_ptr(), arg, mark.len());
        std::ptr::write_bytes(arg.add(mark.len()), 0, len - mark.len());
      }
    }
  }

  /// Exit code of a sandbox that could not be set up (nothing ran).
  pub const SETUP_FAILED: i32 = 125;

  #[derive(Default, Debug)]
  pub struct Opts {
    pub ns: bool,
    pub net: bool,
    pub probe: bool,
    pub write: Vec<PathBuf>,
    pub protect: Vec<PathBuf>,
    pub hide: Vec<PathBuf>,
    pub keep: Vec<PathBuf>,
    /// A user namespace to join instead of making one (and a network
    /// namespace, with network off): the host keeps one of each, made once
    /// by `--anchor`, because making them costs more than the rest of the
    /// sandbox (docs/SANDBOX.md, "Cost").
    pub join_user: Option<PathBuf>,
    pub join_net: Option<PathBuf>,
    /// `--anchor`: make the namespaces the host keeps (see [`anchor`]).
    pub anchor: bool,
    /// A mount namespace to start from instead of the host's: the host's
    /// kept template (made by `--anchor` with the same `--hide` and
    /// `--keep`), which has everything but the run's own mounts.
    pub template: Option<PathBuf>,
    pub argv0: Option<OsString>,
    pub program: OsString,
    pub args: Vec<OsString>,
  }

  fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Opts, String> {
    let mut o = Opts::default();
    loop {
      let a = it.next().ok_or("no `--` before the program")?;
      let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
      match a.to_str() {
        Some("--ns") => o.ns = true,
        Some("--net") => o.net = true,
        Some("--probe") => o.probe = true,
        Some("--write") => o.write.push(value("--write")?.into()),
        Some("--protect") => o.protect.push(value("--protect")?.into()),
        Some("--hide") => o.hide.push(value("--hide")?.into()),
        Some("--keep") => o.keep.push(value("--keep")?.into()),
        Some("--join-user") => o.join_user = Some(value("--join-user")?.into()),
        Some("--join-net") => o.join_net = Some(value("--join-net")?.into()),
        Some("--anchor") => o.anchor = true,
        Some("--template") => o.template = Some(value("--template")?.into()),
        Some("--argv0") => o.argv0 = Some(value("--argv0")?),
        Some("--") => break,
        _ => return Err(format!("unknown argument {a:?}")),
      }
    }
    o.program = it.next().ok_or("no program")?;
    o.args = it.collect();
    Ok(o)
  }

  /// End the run before the command: exit 125 with what failed.
  pub fn fail(what: impl std::fmt::Display) -> ! {
    let msg = format!("exec-native-sandbox: {what} (ESANDBOX)\n");
    // SAFETY: `msg` is a live String: the pointer and length describe initialised bytes for the
    // call; write(2) on fd 2 touches nothing else.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    // SAFETY: _exit ends the process without unwinding or running atexit handlers; no invariant of
    // ours outlives it.
    unsafe { libc::_exit(SETUP_FAILED) }
  }

  pub fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
  }

  pub fn main() -> ! {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "--zygote") {
      zygote()
    }
    run(args)
  }

  /// What a helper started with `args` does.
  fn run(args: impl Iterator<Item = OsString>) -> ! {
    let opts = match parse(args) {
      Ok(o) => o,
      Err(e) => fail(format!("bad arguments: {e}")),
    };
    if opts.anchor {
      anchor(&opts)
    }
    if opts.ns {
      namespaces(&opts)
    }
    command(&opts)
  }

  /// The command's side without namespaces: restrict this process, then
  /// exec (or, probing, exit 0).
  fn command(opts: &Opts) -> ! {
    Launch::new(opts, &opts.write).run()
  }

  /// The command made ready to run: its restriction prepared (the Landlock
  /// ruleset, the seccomp program) and its `execve` arguments built, so
  /// that [`Launch::run`] is system calls only and a child between
  /// `clone(CLONE_VM|CLONE_VFORK)` and `execve` may call it.
  struct Launch {
    program: CString,
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    restriction: restrict::Prepared,
    probe: bool,
  }

  impl Launch {
    fn new(opts: &Opts, writable: &[PathBuf]) -> Launch {
      let argv0 = opts.argv0.clone().unwrap_or_else(|| opts.program.clone());
      let cstr = |s: &OsString| {
        CString::new(s.as_bytes()).unwrap_or_else(|_| fail("an argument contains a NUL byte"))
      };
      let program = cstr(&opts.program);
      let mut args = vec![cstr(&argv0)];
      args.extend(opts.args.iter().map(cstr));
      let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
      argv.push(std::ptr::null());
      let restriction = restrict::Prepared::new(opts.net, writable).unwrap_or_else(|e| fail(e));
      Launch {
        program,
        _args: args,
        argv,
        restriction,
        probe: opts.probe,
      }
    }

    /// Restrict the calling process, then exec the command (or, probing,
    /// exit 0). System calls only: no allocation, no lock.
    fn run(&self) -> ! {
      // only stdio reaches the command: a descriptor the host leaked without
      // close-on-exec (another addon's socket, say) must not be in reach.
      // Marked close-on-exec rather than closed: the Landlock ruleset is
      // still needed below.
      // SAFETY: close_range(2) takes plain integers; with CLOSE_RANGE_CLOEXEC it closes nothing,
      // so no descriptor owned by a Rust object is left dangling.
      unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
      if let Err((what, e)) = self.restriction.apply() {
        say(&[what.as_bytes()], e.raw_os_error().unwrap_or(0));
        // SAFETY: _exit ends the process without unwinding; nothing of ours needs to run.
        unsafe { libc::_exit(SETUP_FAILED) }
      }
      if self.probe {
        // SAFETY: _exit ends the process (a probe) without unwinding; nothing of ours needs to run.
        unsafe { libc::_exit(0) };
      }
      // signals the host's runtime ignored stay ignored across exec; the
      // command gets the defaults a shell would give it
      for sig in [libc::SIGPIPE, libc::SIGXFSZ, libc::SIGXCPU] {
        // SAFETY: SIG_DFL for a standard signal number; a system call, async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
      }
      extern "C" {
        static environ: *const *const libc::c_char;
      }
      // SAFETY: `self.program` and the CStrings behind `self.argv` live as long as `self` (the
      // caller's, which outlives this call), `argv` is NULL-terminated, and `environ` is the
      // process's own environment, which nothing modifies meanwhile.
      unsafe { libc::execve(self.program.as_ptr(), self.argv.as_ptr(), environ) };
      let e = last_errno();
      let code = if e == libc::ENOENT { 127 } else { 126 };
      say(&[b"cannot run ", self.program.as_bytes()], e);
      // SAFETY: _exit ends the process without unwinding; nothing of ours needs to run.
      unsafe { libc::_exit(code) }
    }
  }

  const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

  fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
  }

  /// `exec-native-sandbox: <parts>: <strerror(errno)>` on stderr, without
  /// allocating (a child after clone may call it).
  fn say(parts: &[&[u8]], errno: i32) {
    let mut buf = [0u8; 512];
    let mut n = 0;
    let mut put = |b: &[u8]| {
      let k = b.len().min(buf.len() - n);
      buf[n..n + k].copy_from_slice(&b[..k]);
      n += k;
    };
    put(b"exec-native-sandbox: ");
    for p in parts {
      put(p);
    }
    put(b": ");
    let mut text = [0 as libc::c_char; 128];
    // SAFETY: `text` is a live, writable buffer whose length is passed; strerror_r (the XSI form
    // libc binds) writes a NUL-terminated message into it, a table lookup with no allocation.
    if unsafe { libc::strerror_r(errno, text.as_mut_ptr(), text.len()) } == 0 {
      // SAFETY: strerror_r succeeded, so `text` holds a NUL-terminated string within its length.
      put(unsafe { CStr::from_ptr(text.as_ptr()) }.to_bytes());
    }
    put(b"\n");
    // SAFETY: `buf` is a live array and `n` <= its length: write(2) reads only those bytes.
    unsafe { libc::write(2, buf.as_ptr().cast(), n) };
  }

  fn write_file(path: &str, data: &str) -> Result<(), String> {
    std::fs::write(path, data).map_err(|e| format!("cannot write {path}: {e}"))
  }

  fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap_or_else(|_| fail("a path contains a NUL byte"))
  }

  fn mount(
    src: Option<&CStr>,
    target: &Path,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
  ) -> Result<(), String> {
    let t = c(target);
    // SAFETY: `t` and the optional CStrs are live NUL-terminated strings for the call (or null
    // where mount(2) allows it); mount(2) only reads them.
    let r = unsafe {
      libc::mount(
        src.map_or(std::ptr::null(), |s| s.as_ptr()),
        t.as_ptr(),
        fstype.map_or(std::ptr::null(), |s| s.as_ptr()),
        flags,
        data.map_or(std::ptr::null(), |s| s.as_ptr()).cast(),
      )
    };
    if r != 0 {
      return Err(format!("mount on {}: {}", target.display(), errno()));
    }
    Ok(())
  }

  #[repr(C)]
  struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
  }
  const MOUNT_ATTR_RDONLY: u64 = 0x1;
  const AT_RECURSIVE: libc::c_uint = 0x8000;
  const OPEN_TREE_CLONE: libc::c_uint = 1;
  const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

  /// `mount_setattr(2)`: make `path`'s mount (and with `recursive`, those
  /// beneath it) read-only or writable.
  fn set_readonly(path: &Path, ro: bool, recursive: bool) -> Result<(), String> {
    let p = c(path);
    let attr = MountAttr {
      attr_set: if ro { MOUNT_ATTR_RDONLY } else { 0 },
      attr_clr: if ro { 0 } else { MOUNT_ATTR_RDONLY },
      propagation: 0,
      userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `p` is a live NUL-terminated path and `attr` a live MountAttr whose size is passed
    // with it: mount_setattr(2) reads only those bytes.
    let r = unsafe {
      libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        p.as_ptr(),
        flags,
        &attr as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
      )
    };
    if r != 0 {
      return Err(format!(
        "cannot make {} {}: {}",
        path.display(),
        if ro { "read-only" } else { "writable" },
        errno()
      ));
    }
    Ok(())
  }

  /// A detached copy of the mount at `path` (`open_tree(OPEN_TREE_CLONE)`),
  /// to be placed again after what covers it is mounted.
  fn clone_tree(path: &Path, recursive: bool) -> Option<i32> {
    let p = c(path);
    let flags =
      OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `p` is a live NUL-terminated path for the call; open_tree(2) returns a new descriptor
    // we own (CLOEXEC), or -1.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) };
    (fd >= 0).then_some(fd as i32)
  }

  fn place_tree(fd: i32, target: &Path) -> Result<(), String> {
    let t = c(target);
    let empty = c"";
    // SAFETY: `empty` and `t` are live NUL-terminated strings; `fd` is the open_tree descriptor
    // this function owns.
    let r = unsafe {
      libc::syscall(
        libc::SYS_move_mount,
        fd,
        empty.as_ptr(),
        libc::AT_FDCWD,
        t.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
      )
    };
    // SAFETY: `fd` came from open_tree and is owned here; it is closed once and not used after.
    unsafe { libc::close(fd) };
    if r != 0 {
      return Err(format!("cannot mount {}: {}", target.display(), errno()));
    }
    Ok(())
  }

  /// An empty file or directory to mount on (in a tmpfs of ours).
  fn mount_point(path: &Path, dir: bool) -> Result<(), String> {
    if let Some(parent) = path.parent() {
      std::fs::create_dir_all(parent).map_err(|e| format!("mkdir {}: {e}", parent.display()))?;
    }
    let r = if dir {
      std::fs::create_dir(path)
    } else {
      std::fs::File::create(path).map(|_| ())
    };
    match r {
      Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
        Err(format!("cannot create {}: {e}", path.display()))
      }
      _ => Ok(()),
    }
  }

  const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

  /// This process's side with `--ns` (see the module doc). Returns in the
  /// command's process (pid 2 of the new PID namespace); the others never
  /// return.
  /// Make this process's user namespace (the host's uid and gid mapped to
  /// themselves), and with `net` an empty network namespace, as the
  /// sandbox's namespaces are made.
  fn new_user_ns(net: bool) -> Result<(), String> {
    // SAFETY: getuid/getgid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = libc::CLONE_NEWUSER;
    if net {
      flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare(2) takes flags only; this helper is single-threaded, as CLONE_NEWUSER
    // requires.
    if unsafe { libc::unshare(flags) } != 0 {
      return Err(format!("cannot create the namespaces: {}", errno()));
    }
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1\n"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1\n"))
  }

  /// `--anchor`: make a user namespace, an empty network namespace and a
  /// mount namespace that is the template of the runs' (everything of
  /// [`mounts`] that is the same for every run: `/` read-only, `--hide`,
  /// `--keep`, the private `/dev`), say `ready`, and stay until stdin ends.
  /// The host opens the three from `/proc/<pid>/ns/` meanwhile and keeps
  /// them: each run joins the first two and starts from a copy of the third.
  fn anchor(opts: &Opts) -> ! {
    if let Err(e) = new_user_ns(true) {
      fail(e);
    }
    // SAFETY: unshare(2) takes flags only; this helper is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
      fail(format!("cannot create the namespaces: {}", errno()));
    }
    if let Err(e) = template_mounts(opts) {
      fail(e);
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout(), b"ready\n");
    let mut buf = [0u8; 64];
    // SAFETY: `buf` is a live, writable 64-byte array and its length is passed; read(2) writes only
    // into it.
    while unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    // SAFETY: _exit ends the process without unwinding; nothing of ours needs to run.
    unsafe { libc::_exit(0) }
  }

  /// `--zygote`: the helper the host keeps running (see
  /// `exec_native_sandbox::zygote`). It reads runs from its stdin (a Unix
  /// stream socket), forks a copy of itself for each as a sibling (the
  /// host's child), and answers with its pid and pidfd, until the host
  /// closes the socket. It restricts nothing and joins nothing itself.
  fn zygote() -> ! {
    use exec_native_sandbox::zygote as z;
    // a kept process does not pin the directory the host was in
    // SAFETY: chdir(2) reads the NUL-terminated literal.
    unsafe { libc::chdir(c"/".as_ptr()) };
    const SOCK: i32 = 0;
    // the run made ahead for the next namespaced request (see warm.rs)
    let mut warm: Option<warm::Warm> = None;
    loop {
      let (header, stdio, body) = read_request(SOCK);
      let req = match z::decode(&header, &body) {
        Ok(req) => req,
        Err(e) => fail(format!("zygote: {e}")),
      };
      let target = warm::Target::of(&req.argv);
      // a warm run made for other namespaces (the host's template was made
      // again) is ended; the host reaps it
      if warm
        .as_ref()
        .is_some_and(|w| target.as_ref().is_none_or(|t| t.key != w.key))
        && target.is_some()
      {
        if let Some(w) = warm.take() {
          w.end();
        }
      }
      let handed = match warm.take() {
        Some(w) if stdio.len() == 3 && target.as_ref().is_some_and(|t| t.key == w.key) => {
          w.hand_over(&header, &body, &stdio)
        }
        other => {
          warm = other;
          None
        }
      };
      let mut mounting = None;
      let reply = match handed {
        Some((run, sock)) => {
          // the run's stdio is the run's: not the next warm run's too
          drop(stdio);
          mounting = Some(sock);
          Ok(run)
        }
        None if stdio.len() == 3 => fork_run(req, stdio),
        None => Err(libc::EBADF),
      };
      let (pid, pidfd) = match reply {
        Ok((pid, pidfd)) => (pid, Some(pidfd)),
        Err(errno) => (-errno, None),
      };
      use std::os::fd::AsRawFd;
      let sent = z::send_reply(
        SOCK,
        &z::Reply {
          kind: z::Reply::RUN,
          pid,
        },
        pidfd.as_ref().map(|f| f.as_raw_fd()),
      );
      drop(pidfd);
      if sent.is_err() {
        // SAFETY: _exit ends the process without unwinding; the host is gone.
        unsafe { libc::_exit(0) }
      }
      // the next namespaced run, made while this one starts (once its
      // mounts are made)
      if let (None, Some(t)) = (&warm, target) {
        if let Some(sock) = mounting {
          warm::wait_for_mounts(&sock, SOCK);
        }
        if let Some(w) = warm::Warm::make(t) {
          let news = z::Reply {
            kind: z::Reply::WARM,
            pid: w.pid,
          };
          if z::send_reply(SOCK, &news, Some(w.pidfd.as_raw_fd())).is_err() {
            // SAFETY: _exit ends the process without unwinding; the host is gone (the warm run
            // ends when its socket closes).
            unsafe { libc::_exit(0) }
          }
          warm = Some(w);
        }
      }
    }
  }

  /// The next request on `sock` (the kept helper's from the host, a warm
  /// run's from the kept helper): its header, the descriptors sent with it,
  /// its body. The other end closed: this process ends (exit 0); a bad
  /// request: it fails (exit 125).
  fn read_request(
    sock: i32,
  ) -> (
    exec_native_sandbox::zygote::Header,
    Vec<std::os::fd::OwnedFd>,
    Vec<u8>,
  ) {
    use exec_native_sandbox::zygote as z;
    let (header, stdio) = match z::recv_header(sock) {
      Ok(Some(got)) => got,
      // SAFETY: _exit ends the process without unwinding; the host is gone.
      Ok(None) => unsafe { libc::_exit(0) },
      Err(e) => fail(format!("zygote: {e}")),
    };
    if header.len > MAX_REQUEST {
      fail(format!("zygote: bad request header {header:?}"));
    }
    let mut body = vec![0u8; header.len as usize];
    match z::recv_with_fds(sock, &mut body, 0) {
      Ok(Some(_)) => {}
      Ok(None) if body.is_empty() => {}
      Ok(None) => fail("zygote: the host closed the socket mid-request"),
      Err(e) => fail(format!("zygote: {e}")),
    }
    (header, stdio, body)
  }

  /// The largest request the kept helper reads (arguments and environment
  /// beyond this could not be exec'd anyway).
  const MAX_REQUEST: u32 = 64 << 20;

  /// Fork the run of `req` as the host's child (`CLONE_PARENT`), with
  /// `stdio` as its 0, 1 and 2, its own process group, `req`'s working
  /// directory and environment; it then does what a helper started with
  /// `req.argv` does. Returns its pid and pidfd, or an errno.
  fn fork_run(
    req: exec_native_sandbox::zygote::Request,
    stdio: Vec<std::os::fd::OwnedFd>,
  ) -> Result<(i32, std::os::fd::OwnedFd), i32> {
    use std::os::fd::AsRawFd;
    if let Some(parent) = fork_as_host_child()? {
      drop(stdio);
      return Ok(parent);
    }
    // the run
    show_as_run();
    for (to, from) in stdio.iter().enumerate() {
      // SAFETY: `from` is a descriptor received with the request and open; dup2(2) makes `to` a
      // copy (closing the socket at 0 in this process), without close-on-exec.
      if unsafe { libc::dup2(from.as_raw_fd(), to as i32) } < 0 {
        fail(format!("zygote: dup2: {}", errno()));
      }
    }
    // (the kept helper's socket, at 0, was replaced by the run's stdin)
    drop(stdio);
    // SAFETY: setpgid(0, 0) makes this process a group leader; plain integers.
    if unsafe { libc::setpgid(0, 0) } != 0 {
      fail(format!("setpgid: {}", errno()));
    }
    let cwd = std::ffi::OsStr::from_bytes(&req.cwd);
    if let Err(e) = std::env::set_current_dir(cwd) {
      fail(format!("cannot enter {}: {e}", Path::new(cwd).display()));
    }
    set_environment(req.env);
    run(req.argv.into_iter().map(OsString::from_vec))
  }

  /// Make `env` (`NAME=value` strings) this process's environment, for
  /// good (what the command is exec'd with).
  pub(crate) fn set_environment(env: Vec<Vec<u8>>) {
    let env: Vec<CString> = env
      .into_iter()
      .map(|v| CString::new(v).unwrap_or_else(|_| fail("an environment variable holds a NUL byte")))
      .collect();
    let mut ptrs: Vec<*const libc::c_char> = env.iter().map(|v| v.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    extern "C" {
      static mut environ: *const *const libc::c_char;
    }
    // SAFETY: this process is single-threaded (a process sharing its memory is blocked in a read
    // meanwhile); `env` and `ptrs` are leaked below, so the NULL-terminated array `environ` now
    // points at lives as long as the process.
    unsafe { environ = ptrs.as_ptr() };
    std::mem::forget(env);
    std::mem::forget(ptrs);
  }

  /// Fork this (single-threaded) process as a sibling, the host's child
  /// (`clone(CLONE_PARENT|CLONE_PIDFD)`): in this process the child's pid and
  /// pidfd, in the child `None`, or the errno of a failed fork.
  pub(crate) fn fork_as_host_child() -> Result<Option<(i32, std::os::fd::OwnedFd)>, i32> {
    use std::os::fd::FromRawFd;
    let mut pidfd: libc::c_int = -1;
    // a fork (no stack given: the child returns here with a copy of this
    // small process's memory) whose parent is the host; it exits with
    // SIGCHLD to the host, as this process would (CLONE_PARENT keeps ours)
    let flags = (libc::CLONE_PARENT | libc::CLONE_PIDFD) as libc::c_ulong;
    // SAFETY: clone(2) without CLONE_VM and without a stack is a fork: the child gets a copy of this
    // single-threaded process and returns 0 here; `pidfd` is a live c_int for CLONE_PIDFD (the
    // parent_tid argument, third on x86_64 and aarch64).
    let pid = unsafe {
      libc::syscall(
        libc::SYS_clone,
        flags,
        0usize,
        &mut pidfd as *mut libc::c_int,
        0usize,
        0usize,
      )
    };
    if pid < 0 {
      return Err(last_errno());
    }
    if pid == 0 {
      return Ok(None);
    }
    // SAFETY: CLONE_PIDFD stored a new descriptor of the child in `pidfd`, owned from here.
    Ok(Some((pid as i32, unsafe {
      std::os::fd::OwnedFd::from_raw_fd(pidfd)
    })))
  }

  /// The namespace file at `path`, opened (before any is joined: from
  /// inside a joined user namespace the host's descriptors are out of reach).
  fn open_ns(path: Option<&Path>) -> Option<i32> {
    // SAFETY: the CString from `c()` lives until the end of the statement, so the path pointer is
    // valid during open(2); the descriptor returned is owned by the caller.
    let fd = unsafe { libc::open(c(path?).as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    (fd >= 0).then_some(fd)
  }

  /// Join the namespace open as `fd` (`setns`); false if that cannot be done.
  fn join(fd: Option<i32>, kind: libc::c_int) -> bool {
    let Some(fd) = fd else { return false };
    // SAFETY: `fd` is a namespace descriptor open_ns opened and this function owns; setns(2) only
    // reads it.
    let ok = unsafe { libc::setns(fd, kind) } == 0;
    // SAFETY: `fd` is owned here and closed once; nothing uses it after.
    unsafe { libc::close(fd) };
    ok
  }

  fn namespaces(opts: &Opts) -> ! {
    let cwd = std::env::current_dir().ok();
    // the host's kept user (and network) namespace, else new ones
    let (user_fd, net_fd) = (
      open_ns(opts.join_user.as_deref()),
      open_ns(opts.join_net.as_deref().filter(|_| !opts.net)),
    );
    let template_fd = open_ns(opts.template.as_deref());
    let joined_user = join(user_fd, libc::CLONE_NEWUSER);
    let joined_net = joined_user && join(net_fd, libc::CLONE_NEWNET);
    // the template's mount namespace (which resets the working directory:
    // the init takes it again); the mounts start from the host's without it
    let templated = joined_user && join(template_fd, libc::CLONE_NEWNS);
    if !templated {
      if let Some(fd) = template_fd.filter(|_| !joined_user) {
        // SAFETY: `fd` was opened by open_ns and not handed to join (the user namespace was not
        // joined): it is owned here and closed once.
        unsafe { libc::close(fd) };
      }
    }
    if !joined_user && net_fd.is_some() {
      // SAFETY: `net_fd` was opened by open_ns and not handed to join (the user namespace was not
      // joined): it is owned here and closed once.
      unsafe { libc::close(net_fd.unwrap_or(-1)) };
    }
    if !joined_user {
      if let Err(e) = new_user_ns(!opts.net) {
        fail(e);
      }
    }
    // the init gets the rest: new mount, IPC, PID (and, network off, if none
    // was joined, network) namespaces, so this process is never in them and
    // their teardown is not on the way to the host learning the status
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWPID;
    if joined_user && !opts.net && !joined_net {
      flags |= libc::CLONE_NEWNET;
    }
    start_init(flags, init_main, |parent, status, command_stack| Init {
      parent,
      status,
      opts,
      cwd,
      templated,
      command_stack,
    })
  }

  /// Start an init: `entry` in new namespaces (`flags`), sharing this
  /// process's memory, given the value `make(this pid, the status pipe's
  /// write end, the top of the command's stack)`; then be its monitor.
  ///
  /// The init shares this process's memory (CLONE_VM: no copy of the
  /// address space to make or to tear down) but not its descriptors, its
  /// working directory nor its signal handlers. This process does not
  /// allocate from here on (it only waits and reads), so the init may; and
  /// the value and both stacks live until this process ends (it never
  /// returns).
  pub(crate) fn start_init<T>(
    flags: libc::c_int,
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    make: impl FnOnce(i32, i32, *mut libc::c_void) -> T,
  ) -> ! {
    let mut status_pipe = [0i32; 2];
    // SAFETY: `status_pipe` is a live [i32; 2], the two ints pipe2(2) writes.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
      fail(format!("pipe: {}", errno()));
    }
    let mut init_stack = vec![0u8; STACK];
    let mut command_stack = vec![0u8; STACK];
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let init = make(parent, status_pipe[1], stack_top(&mut command_stack));
    // SAFETY: `entry` is an extern "C" fn(*mut c_void) -> c_int that runs on `init_stack` (a live
    // allocation this never-returning function keeps) and reads `init` (a `T`) through the
    // pointer, which lives as long; the flags make a process, not a thread (no CLONE_THREAD,
    // CLONE_FILES, CLONE_FS or CLONE_SIGHAND).
    let pid = unsafe {
      libc::clone(
        entry,
        stack_top(&mut init_stack),
        flags | libc::CLONE_VM | libc::SIGCHLD,
        &init as *const T as *mut libc::c_void,
      )
    };
    if pid == -1 {
      fail(format!("cannot create the namespaces: {}", errno()));
    }
    // SAFETY: this process owns its copy of the write end and closes it once; it never uses it.
    unsafe { libc::close(status_pipe[1]) };
    monitor(pid, status_pipe[0])
  }

  /// The stack of a process started by `clone`: 256 KiB (the init and the
  /// command before its exec use a few).
  const STACK: usize = 256 * 1024;

  /// The top of `stack`, 16-byte aligned (stacks grow down on every Linux
  /// target this builds for).
  fn stack_top(stack: &mut [u8]) -> *mut libc::c_void {
    let end = stack.as_mut_ptr_range().end as usize;
    (end & !15) as *mut libc::c_void
  }

  /// What the init needs, shared with it through the memory it shares.
  struct Init<'a> {
    parent: i32,
    status: i32,
    opts: &'a Opts,
    cwd: Option<PathBuf>,
    /// The mounts start from the template (only the run's own to add).
    templated: bool,
    command_stack: *mut libc::c_void,
  }

  /// The run's mounts, made from a copy of the host's: `/` read-only, the
  /// writable roots, the protected paths, the hidden directories (with what
  /// is kept in them), a private `/dev` with its own `/dev/shm`.
  fn mounts(opts: &Opts) -> Result<(), String> {
    let covered = read_only_root(opts)?;
    run_mounts(opts)?;
    hidden_and_dev(opts, covered)?;
    shm()
  }

  /// The template's mounts (`--anchor`): all of [`mounts`] but the run's
  /// own ([`run_mounts`]); `/dev/shm` an empty directory.
  fn template_mounts(opts: &Opts) -> Result<(), String> {
    let covered = read_only_root(opts)?;
    hidden_and_dev(opts, covered)
  }

  /// The mounts a run adds to its copy of the template (with [`shm`] and
  /// its `/proc`): each writable root bound read-write, each protected path
  /// read-only again.
  fn run_mounts(opts: &Opts) -> Result<(), String> {
    for root in &opts.write {
      if root.starts_with("/dev") {
        continue; // the device nodes: the private /dev
      }
      mount(
        Some(&c(root)),
        root,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
      )?;
      // the mounts beneath the root stay as they were where they are locked
      if set_readonly(root, false, true).is_err() {
        set_readonly(root, false, false)?;
      }
    }
    for p in &opts.protect {
      mount(Some(&c(p)), p, None, libc::MS_BIND | libc::MS_REC, None)?;
      set_readonly(p, true, true)?;
    }
    Ok(())
  }

  /// What goes back on top of what gets covered (the device nodes, the
  /// PTYs, files kept under a hidden directory), detached copies taken
  /// before `/` is made read-only.
  struct Covered {
    devices: Vec<(PathBuf, i32)>,
    pts: Option<i32>,
    keeps: Vec<(PathBuf, i32)>,
  }

  /// No propagation to or from the host, and everything read-only: chmod,
  /// chown, utimes, xattrs and writes outside the roots are EROFS whatever
  /// the file's owner.
  fn read_only_root(opts: &Opts) -> Result<Covered, String> {
    mount(
      None,
      Path::new("/"),
      None,
      libc::MS_REC | libc::MS_PRIVATE,
      None,
    )?;
    let dev = Path::new("/dev");
    let devices: Vec<(PathBuf, i32)> = DEVICES
      .iter()
      .filter_map(|d| {
        let p = dev.join(d);
        clone_tree(&p, false).map(|fd| (p, fd))
      })
      .collect();
    let pts = clone_tree(Path::new("/dev/pts"), true);
    let keeps: Vec<(PathBuf, i32)> = opts
      .keep
      .iter()
      .filter_map(|p| clone_tree(p, false).map(|fd| (p.clone(), fd)))
      .collect();
    set_readonly(Path::new("/"), true, true)?;
    Ok(Covered {
      devices,
      pts,
      keeps,
    })
  }

  /// The hidden directories (an empty read-only tmpfs each, with the kept
  /// files placed again) and the private `/dev`.
  fn hidden_and_dev(opts: &Opts, covered: Covered) -> Result<(), String> {
    let tmpfs = c"tmpfs";
    for h in &opts.hide {
      mount(
        Some(tmpfs),
        h,
        Some(tmpfs),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(c"mode=755,size=1m"),
      )?;
    }
    for (p, fd) in covered.keeps {
      mount_point(&p, false)?;
      place_tree(fd, &p)?;
    }
    for h in &opts.hide {
      set_readonly(h, true, false)?;
    }
    private_dev(Path::new("/dev"), covered.devices, covered.pts)
  }

  /// The run's own `/dev/shm` (POSIX semaphores, multiprocessing): a tmpfs
  /// on the private `/dev`'s empty directory.
  fn shm() -> Result<(), String> {
    let tmpfs = c"tmpfs";
    mount(
      Some(tmpfs),
      Path::new("/dev/shm"),
      Some(tmpfs),
      libc::MS_NOSUID | libc::MS_NODEV,
      Some(c"mode=1777"),
    )
  }

  /// A private /dev (a tmpfs): the device nodes and the PTYs cloned before
  /// (`devices`, `pts`), an empty `shm` directory (for [`shm`]), the std
  /// links; then read-only.
  fn private_dev(dev: &Path, devices: Vec<(PathBuf, i32)>, pts: Option<i32>) -> Result<(), String> {
    let tmpfs = c"tmpfs";
    // a private /dev: the device nodes, the PTYs, a private /dev/shm
    mount(
      Some(tmpfs),
      dev,
      Some(tmpfs),
      libc::MS_NOSUID | libc::MS_NOEXEC,
      Some(c"mode=755,size=64k"),
    )?;
    for (p, fd) in devices {
      mount_point(&p, false)?;
      place_tree(fd, &p)?;
    }
    if let Some(fd) = pts {
      let p = dev.join("pts");
      mount_point(&p, true)?;
      place_tree(fd, &p)?;
      let _ = std::os::unix::fs::symlink("pts/ptmx", dev.join("ptmx"));
    }
    mount_point(&dev.join("shm"), true)?;
    for (name, to) in [
      ("fd", "/proc/self/fd"),
      ("stdin", "/proc/self/fd/0"),
      ("stdout", "/proc/self/fd/1"),
      ("stderr", "/proc/self/fd/2"),
    ] {
      let _ = std::os::unix::fs::symlink(to, dev.join(name));
    }
    set_readonly(dev, true, false)
  }

  /// Signals a group kill sends that this process and the init leave to the
  /// command (which gets them itself): a no-op handler (reset by exec).
  extern "C" fn ignore(_: libc::c_int) {}

  const PASSED_ON: &[libc::c_int] = &[
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGPIPE,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
  ];

  fn handle_passed_on() {
    for &s in PASSED_ON {
      // SAFETY: `ignore` is an extern "C" fn(c_int) that does nothing (so async-signal-safe), the
      // shape signal(2) expects for a handler.
      unsafe { libc::signal(s, ignore as *const () as libc::sighandler_t) };
    }
  }

  fn wait_for(pid: i32) -> Option<i32> {
    loop {
      let mut st = 0;
      // SAFETY: `st` is a live i32 for waitpid(2) to write the status into.
      let r = unsafe { libc::waitpid(pid, &mut st, 0) };
      if r == pid {
        return Some(st);
      }
      if r == -1 && errno().raw_os_error() != Some(libc::EINTR) {
        return None;
      }
    }
  }

  /// End as `status` (a wait status) ended: the same exit code, or the same
  /// signal (without a core file).
  fn end_as(status: i32) -> ! {
    if libc::WIFSIGNALED(status) {
      let sig = libc::WTERMSIG(status);
      let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
      };
      // SAFETY: setrlimit reads a live rlimit; `set` is a zeroed sigset_t (a valid value for
      // sigemptyset to initialise) living on this stack; signal/sigprocmask/raise take plain
      // values. The process ends right after, single-threaded.
      unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
      }
      // SAFETY: _exit ends the process without unwinding (the raised signal did not end it).
      unsafe { libc::_exit(128 + sig) }
    }
    // SAFETY: _exit ends the process without unwinding.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
  }

  /// Stdio and every other descriptor off this process (the command has
  /// its own copies): the host sees the end of the output when the command
  /// and its descendants close theirs.
  fn let_go_of_descriptors(keep: i32) {
    // SAFETY: a literal NUL-terminated path; the descriptor returned is owned here (and becomes
    // stdio below).
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
    if null >= 0 {
      for fd in 0..3 {
        // SAFETY: `null` is a live descriptor we opened; dup2 replaces stdio, which no Rust object
        // of this process owns (std's handles only borrow fds 0-2).
        unsafe { libc::dup2(null, fd) };
      }
    }
    // SAFETY: close_range(2) takes plain integers; the descriptors it closes are owned by no Rust
    // object of this process (the status pipe `keep` is left open).
    let close_range = |from: i32, to: u32| unsafe {
      libc::syscall(libc::SYS_close_range, from as u32, to, 0u32);
    };
    if keep > 3 {
      close_range(3, keep as u32 - 1);
    }
    close_range(keep.max(2) + 1, u32::MAX);
  }

  /// The host's child: ends as the command did, as soon as the init says
  /// how (the init, and with it the PID namespace, then ends on its own or
  /// by its parent-death signal), or as the init ended if it died first.
  fn monitor(init: i32, status: i32) -> ! {
    handle_passed_on();
    let_go_of_descriptors(status);
    let mut buf = [0u8; 4];
    loop {
      // SAFETY: `buf` is a live, writable [u8; 4] and 4 is its length.
      let n = unsafe { libc::read(status, buf.as_mut_ptr().cast(), 4) };
      if n == 4 {
        end_as(i32::from_ne_bytes(buf));
      }
      if n == -1 && last_errno() == libc::EINTR {
        continue;
      }
      break;
    }
    // the init died without a word (killed): end as it did
    end_as(wait_for(init).unwrap_or(libc::SIGKILL))
  }

  /// pid 1 (a `CLONE_VM` child of the monitor in the new namespaces, see
  /// [`namespaces`]): the mounts, a fresh /proc, then the command as its
  /// `CLONE_VFORK` child; reaps everything, and ends (and with it every
  /// process left in the namespace) when the command ends.
  extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Init` the monitor passed, which lives until the monitor ends (it never
    // returns), and this process dies with it (parent-death signal, below).
    let init = unsafe { &*(arg as *const Init) };
    init_prelude(init.parent);
    let mounted = if init.templated {
      run_mounts(init.opts).and_then(|()| shm())
    } else {
      mounts(init.opts)
    };
    if let Err(e) = mounted.and_then(|()| mount_proc()) {
      fail(e);
    }
    if let Some(cwd) = &init.cwd {
      // the working directory held the mount it had before: take it again
      // through the new ones (a writable root is a new bind mount)
      let _ = std::env::set_current_dir(cwd);
    }
    start_command(init.opts, init.status, init.command_stack)
  }

  /// What an init does first: die with the monitor (its parent), and end
  /// at once if the monitor is already gone.
  pub(crate) fn init_prelude(parent: i32) {
    // SAFETY: PR_SET_PDEATHSIG takes plain integers; it only sets an attribute of this process.
    unsafe {
      libc::prctl(
        libc::PR_SET_PDEATHSIG,
        libc::SIGKILL as libc::c_ulong,
        0,
        0,
        0,
      )
    };
    // SAFETY: getppid has no preconditions (0 in a new PID namespace: the parent is outside it).
    let ppid = unsafe { libc::getppid() };
    if ppid != 0 && ppid != parent {
      // SAFETY: _exit ends the process without unwinding.
      unsafe { libc::_exit(SETUP_FAILED) };
    }
  }

  /// The PID namespace's own `/proc`.
  pub(crate) fn mount_proc() -> Result<(), String> {
    let proc_ = c"proc";
    mount(
      Some(proc_),
      Path::new("/proc"),
      Some(proc_),
      libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
      None,
    )
  }

  /// The init's part once the mounts are made: the command as its
  /// `CLONE_VFORK` child (on `command_stack`, restricted by `opts`), then
  /// reap everything until the command ends, write its status on `status`
  /// and end (and with the init, the namespace).
  pub(crate) fn start_command(opts: &Opts, status: i32, command_stack: *mut libc::c_void) -> ! {
    // the command's restriction (its roots and the private /dev/shm) and its
    // exec arguments, made here, where allocation is allowed
    let mut writable = opts.write.clone();
    writable.push(PathBuf::from("/dev/shm"));
    let launch = Launch::new(opts, &writable);
    // The command shares this process's memory until its exec (CLONE_VFORK
    // suspends this process meanwhile), as posix_spawn does.
    // SAFETY: `command_main` is an extern "C" fn(*mut c_void) -> c_int that runs on
    // `command_stack` (the top of a live allocation of the monitor's) and reads `launch` through
    // the pointer, a local of this never-returning function; CLONE_VFORK keeps this process
    // suspended until the child execs or exits.
    let cmd = unsafe {
      libc::clone(
        command_main,
        command_stack,
        libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
        &launch as *const Launch as *mut libc::c_void,
      )
    };
    if cmd == -1 {
      fail(format!("cannot start the command: {}", errno()));
    }
    handle_passed_on();
    let_go_of_descriptors(status);
    loop {
      let mut st = 0;
      // SAFETY: `st` is a live i32 for waitpid(2) to write into.
      let r = unsafe { libc::waitpid(-1, &mut st, 0) };
      if r == cmd {
        let b = st.to_ne_bytes();
        // SAFETY: `b` is a live [u8; 4] and 4 its length; `status` is the write end this process
        // kept open.
        unsafe { libc::write(status, b.as_ptr().cast(), 4) };
        // SAFETY: _exit ends the init (and so the namespace) without unwinding, the command's
        // status written.
        unsafe { libc::_exit(0) };
      }
      if r == -1 && last_errno() == libc::ECHILD {
        // SAFETY: _exit ends the process without unwinding.
        unsafe { libc::_exit(SETUP_FAILED) };
      }
    }
  }

  /// The command's process, between `clone` and `execve`: restrict, exec.
  extern "C" fn command_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the init's `Launch`, a local of a function that never returns; the init is
    // suspended (CLONE_VFORK) until this process execs or exits.
    let launch = unsafe { &*(arg as *const Launch) };
    launch.run()
  }
}
