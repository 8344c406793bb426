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

#[cfg(not(target_os = "linux"))]
fn main() {
  eprintln!("exec-native-sandbox: Linux only");
  std::process::exit(125);
}

#[cfg(target_os = "linux")]
fn main() {
  linux::main()
}

#[cfg(target_os = "linux")]
mod linux {
  use std::ffi::{CStr, CString, OsString};
  use std::os::unix::ffi::OsStrExt;
  use std::path::{Path, PathBuf};

  use exec_native_sandbox::restrict;

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
        Some("--anchor") => anchor(),
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

  pub fn main() {
    let opts = match parse(std::env::args_os().skip(1)) {
      Ok(o) => o,
      Err(e) => fail(format!("bad arguments: {e}")),
    };
    if opts.ns {
      namespaces(&opts);
    }
    command(&opts)
  }

  /// The command's side: restrict this process, then exec (or, probing,
  /// exit 0).
  fn command(opts: &Opts) -> ! {
    // only stdio reaches the command: a descriptor the host leaked without
    // close-on-exec (another addon's socket, say) must not be in reach
    // SAFETY: close_range(2) takes plain integers; the descriptors above stdio it closes are not
    // owned by any Rust object of this single-threaded helper (it opened none yet), so no handle is
    // left dangling.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
    let argv0 = opts.argv0.clone().unwrap_or_else(|| opts.program.clone());
    let cstr = |s: &OsString| {
      CString::new(s.as_bytes()).unwrap_or_else(|_| fail("an argument contains a NUL byte"))
    };
    let program = cstr(&opts.program);
    let mut args = vec![cstr(&argv0)];
    args.extend(opts.args.iter().map(cstr));
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut writable = opts.write.clone();
    if opts.ns {
      // the private /dev/shm (POSIX semaphores, multiprocessing)
      writable.push(PathBuf::from("/dev/shm"));
    }
    if let Err(e) = restrict::apply(opts.net, &writable) {
      fail(e);
    }
    if opts.probe {
      // SAFETY: _exit ends the process (a probe) without unwinding; nothing of ours needs to run.
      unsafe { libc::_exit(0) };
    }
    // signals the host's runtime ignored stay ignored across exec; the
    // command gets the defaults a shell would give it
    for sig in [libc::SIGPIPE, libc::SIGXFSZ, libc::SIGXCPU] {
      // SAFETY: SIG_DFL for a standard signal number; this single-threaded helper installed no
      // handler these signals' state depends on.
      unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    extern "C" {
      static environ: *const *const libc::c_char;
    }
    // SAFETY: `program` and the CStrings behind `argv` live until execve returns (they are dropped
    // only after), `argv` is NULL-terminated, and `environ` is the process's own environment, which
    // nothing modifies concurrently (single thread).
    unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), environ) };
    let e = errno();
    let code = if e.raw_os_error() == Some(libc::ENOENT) {
      127
    } else {
      126
    };
    let msg = format!(
      "exec-native-sandbox: cannot run {}: {e}\n",
      Path::new(&opts.program).display()
    );
    // SAFETY: `msg` is a live String: pointer and length describe initialised bytes; write(2) on fd
    // 2.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    // SAFETY: _exit ends the process without unwinding; nothing of ours needs to run.
    unsafe { libc::_exit(code) }
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

  /// `--anchor`: make a user namespace and an empty network namespace, say
  /// `ready`, and stay until stdin ends. The host opens the two from
  /// `/proc/<pid>/ns/` meanwhile and keeps them for the runs to join.
  fn anchor() -> ! {
    if let Err(e) = new_user_ns(true) {
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

  fn namespaces(opts: &Opts) {
    let cwd = std::env::current_dir().ok();
    // the host's kept user (and network) namespace, else new ones
    let (user_fd, net_fd) = (
      open_ns(opts.join_user.as_deref()),
      open_ns(opts.join_net.as_deref().filter(|_| !opts.net)),
    );
    let joined_user = join(user_fd, libc::CLONE_NEWUSER);
    let joined_net = joined_user && join(net_fd, libc::CLONE_NEWNET);
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
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if joined_user && !opts.net && !joined_net {
      flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare(2) takes flags only; this helper is still single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
      fail(format!("cannot create the namespaces: {}", errno()));
    }
    if let Err(e) = mounts(opts) {
      fail(e);
    }
    if let Some(cwd) = cwd {
      // the working directory held the mount it had before: take it again
      // through the new ones (a writable root is a new bind mount)
      let _ = std::env::set_current_dir(&cwd);
    }
    // SAFETY: unshare(2) takes flags only; single-threaded as CLONE_NEWPID's later fork requires
    // nothing more.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } != 0 {
      fail(format!("cannot create the PID namespace: {}", errno()));
    }
    let mut status_pipe = [0i32; 2];
    // SAFETY: `status_pipe` is a live [i32; 2], the two ints pipe2(2) writes.
    if unsafe { libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
      fail(format!("pipe: {}", errno()));
    }
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: this helper is single-threaded, so the child of fork(2) has a consistent heap and may
    // go on running Rust code (it allocates in init and command).
    match unsafe { libc::fork() } {
      -1 => fail(format!("cannot start the init: {}", errno())),
      0 => {
        // SAFETY: the child owns its copy of the read end and closes it once; it never uses it.
        unsafe { libc::close(status_pipe[0]) };
        init(parent, status_pipe[1]);
      }
      child => {
        // SAFETY: the parent owns its copy of the write end and closes it once; it never uses it.
        unsafe { libc::close(status_pipe[1]) };
        monitor(child, status_pipe[0]);
      }
    }
  }

  fn mounts(opts: &Opts) -> Result<(), String> {
    mount(
      None,
      Path::new("/"),
      None,
      libc::MS_REC | libc::MS_PRIVATE,
      None,
    )?;
    // what goes back on top of what gets covered: the device nodes, the
    // PTYs, files kept under a hidden directory
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
    // everything read-only: chmod, chown, utimes, xattrs and writes outside
    // the roots are EROFS whatever the file's owner
    set_readonly(Path::new("/"), true, true)?;
    for root in &opts.write {
      if root.starts_with("/dev") {
        continue; // the device nodes: below
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
    for (p, fd) in keeps {
      mount_point(&p, false)?;
      place_tree(fd, &p)?;
    }
    for h in &opts.hide {
      set_readonly(h, true, false)?;
    }
    private_dev(dev, devices, pts)
  }

  /// A private /dev (a tmpfs): the device nodes and the PTYs cloned before
  /// (`devices`, `pts`), a private /dev/shm, the std links; then read-only.
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
    let shm = dev.join("shm");
    mount_point(&shm, true)?;
    mount(
      Some(tmpfs),
      &shm,
      Some(tmpfs),
      libc::MS_NOSUID | libc::MS_NODEV,
      Some(c"mode=1777"),
    )?;
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

  /// The host's child: waits for the init, then ends as the command did.
  fn monitor(init: i32, status: i32) -> ! {
    handle_passed_on();
    let_go_of_descriptors(status);
    let st = wait_for(init);
    let mut buf = [0u8; 4];
    // SAFETY: `buf` is a live, writable [u8; 4] and 4 is its length.
    let n = unsafe { libc::read(status, buf.as_mut_ptr().cast(), 4) };
    if n == 4 {
      end_as(i32::from_ne_bytes(buf));
    }
    // the init died without a word (killed): end as it did
    end_as(st.unwrap_or(libc::SIGKILL))
  }

  /// pid 1: a fresh /proc, then the command as its child; reaps everything,
  /// and ends (and with it every process left in the namespace) when the
  /// command ends.
  fn init(parent: i32, status: i32) -> ! {
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
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != 0 && unsafe { libc::getppid() } != parent {
      // SAFETY: _exit ends the process without unwinding.
      unsafe { libc::_exit(SETUP_FAILED) };
    }
    let proc_ = c"proc";
    if let Err(e) = mount(
      Some(proc_),
      Path::new("/proc"),
      Some(proc_),
      libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
      None,
    ) {
      fail(e);
    }
    // SAFETY: the init is single-threaded, so the child of fork(2) may go on running Rust code (it
    // parses the arguments again and allocates).
    let cmd = match unsafe { libc::fork() } {
      -1 => fail(format!("cannot start the command: {}", errno())),
      0 => {
        // SAFETY: the child owns its copy of the status pipe and closes it once; it never uses it.
        unsafe { libc::close(status) };
        return_to_command();
      }
      pid => pid,
    };
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
      if r == -1 && errno().raw_os_error() == Some(libc::ECHILD) {
        // SAFETY: _exit ends the process without unwinding.
        unsafe { libc::_exit(SETUP_FAILED) };
      }
    }
  }

  /// The command's process goes on in [`main`] (its restriction and exec):
  /// unwinding is not available here, so the arguments are parsed again.
  fn return_to_command() -> ! {
    let opts = parse(std::env::args_os().skip(1)).unwrap_or_else(|e| fail(e));
    command(&opts)
  }
}
