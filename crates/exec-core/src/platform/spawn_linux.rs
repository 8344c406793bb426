//! Linux: a spawn at the kernel's floor, with a step of our own between
//! the clone and the exec, and without a fork.
//!
//! `std::process::Command` has two paths: `posix_spawn` (glibc's
//! `clone(CLONE_VM|CLONE_VFORK)`: the child borrows the host's memory until
//! it execs, so its cost does not grow with the host's heap) when nothing
//! runs before exec, and `fork` when a `pre_exec` step does (the host's page
//! tables are copied: +1-2 ms at a 1.5 GiB heap). [`spawn`] is the first
//! path with a step: the child runs on a stack of its own, in the host's
//! memory, while the spawning thread waits (`CLONE_VFORK`), and does what
//! `posix_spawn` does (signals, process group, stdio, working directory),
//! then the caller's step (limits, the sandbox's Landlock + seccomp), then
//! `execve`. The step must make system calls only: no allocation, no lock
//! (the host's other threads go on running in the same memory).
//!
//! The child's pidfd comes with it (`CLONE_PIDFD`), so [`RawChild::wait`]
//! is a readiness wait on that descriptor: no SIGCHLD handler, no waiting
//! on other processes, no race with the pid being reused.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

/// What the child runs and with what.
pub struct RawSpawn<'a> {
  pub program: &'a CStr,
  /// Null-terminated arrays of pointers to NUL-terminated strings the
  /// caller keeps alive.
  pub argv: *const *const c_char,
  pub envp: *const *const c_char,
  pub cwd: Option<&'a CStr>,
  /// The descriptors that become the child's 0, 1 and 2.
  pub stdio: [RawFd; 3],
  /// A process group of its own (its pid is the group id).
  pub new_group: bool,
  /// Run in the child after stdio and before exec: system calls only.
  /// `Err` ends the child; the spawn fails with that error.
  pub step: Option<&'a (dyn Fn() -> io::Result<()> + Sync)>,
}

struct Shared<'a> {
  req: &'a RawSpawn<'a>,
  /// The child's errno when it could not get to the program's exec (0: it
  /// exec'd). The child writes it before it exits, the parent reads it after
  /// `clone` returns (`CLONE_VFORK`: not before the child execs or exits).
  err: AtomicI32,
}

/// Bytes of the child's stack (it runs this module's code and the caller's
/// step: system calls, no deep recursion), above a guard page.
const STACK: usize = 128 * 1024;

/// The child: signals to their defaults, stdio, group, directory, the step,
/// then exec. Never returns: exec, or `_exit(127)` with the errno left in
/// [`Shared::err`].
extern "C" fn child(arg: *mut c_void) -> c_int {
  // SAFETY: `arg` is the `Shared` of `spawn`, alive until the child execs or
  // exits (the parent waits for that: CLONE_VFORK)
  let shared = unsafe { &*(arg as *const Shared) };
  let req = shared.req;
  let fail = |e: i32| -> c_int {
    shared
      .err
      .store(if e == 0 { libc::EINVAL } else { e }, Ordering::SeqCst);
    // SAFETY: _exit ends the child without unwinding or running the host's atexit handlers (it
    // shares the host's memory: CLONE_VM); the errno is stored first.
    unsafe { libc::_exit(127) }
  };
  let errno = || {
    io::Error::last_os_error()
      .raw_os_error()
      .unwrap_or(libc::EINVAL)
  };
  // SAFETY: this runs in the child of clone(CLONE_VM|CLONE_VFORK) on its own stack while the parent
  // thread is suspended, every signal blocked: only system calls that allocate and lock nothing
  // (sigaction, setpgid, fcntl, dup2, chdir, sigprocmask, execve) and the caller's step, which
  // RawSpawn requires to be async-signal-safe. The zeroed sigaction/sigset_t values are valid for
  // the calls that fill them; `req`'s CStrings and argv/envp arrays are borrowed from the parent,
  // which keeps them alive until this child execs or exits.
  unsafe {
    // the host's handlers must not run in this process (they would run on
    // the host's memory): every caught signal back to its default, and the
    // signals a host ignores for itself (SIGPIPE, the limits' SIGXFSZ and
    // SIGXCPU) too; other ignored signals stay ignored, as posix_spawn does
    for sig in 1..=libc::SIGRTMAX() {
      if sig == libc::SIGKILL || sig == libc::SIGSTOP {
        continue;
      }
      let mut old: libc::sigaction = std::mem::zeroed();
      if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
        continue;
      }
      let reset = old.sa_sigaction != libc::SIG_IGN
        || matches!(sig, libc::SIGPIPE | libc::SIGXFSZ | libc::SIGXCPU);
      if reset && old.sa_sigaction != libc::SIG_DFL {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
      }
    }
    if req.new_group && libc::setpgid(0, 0) != 0 {
      return fail(errno());
    }
    // stdio: a descriptor below 3 that is not already in its place is
    // moved out of the way first, so one dup2 cannot clobber another's source
    let mut src = req.stdio;
    for (i, fd) in src.iter_mut().enumerate() {
      if *fd < 3 && *fd != i as RawFd {
        let moved = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
        if moved < 0 {
          return fail(errno());
        }
        *fd = moved;
      }
    }
    for (i, &fd) in src.iter().enumerate() {
      let target = i as RawFd;
      let r = if fd == target {
        // already in place: it must survive the exec
        libc::fcntl(fd, libc::F_SETFD, 0)
      } else {
        libc::dup2(fd, target)
      };
      if r < 0 {
        return fail(errno());
      }
    }
    if let Some(dir) = req.cwd {
      if libc::chdir(dir.as_ptr()) != 0 {
        return fail(errno());
      }
    }
    if let Some(step) = req.step {
      if let Err(e) = step() {
        return fail(e.raw_os_error().unwrap_or(libc::EINVAL));
      }
    }
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    libc::execve(req.program.as_ptr(), req.argv, req.envp);
    fail(errno())
  }
}

/// A stack for one child: anonymous memory with a guard page below it.
struct Stack {
  base: *mut c_void,
  len: usize,
}

impl Stack {
  fn new() -> io::Result<Stack> {
    let page = crate::platform::page_size() as usize;
    let len = STACK + page;
    // SAFETY: an anonymous private mapping: no file, no pointer of ours is passed; the result is
    // checked against MAP_FAILED below.
    let base = unsafe {
      libc::mmap(
        std::ptr::null_mut(),
        len,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
        -1,
        0,
      )
    };
    if base == libc::MAP_FAILED {
      return Err(io::Error::last_os_error());
    }
    let stack = Stack { base, len };
    // SAFETY: `base` is the start of the mapping made above, `page` bytes of it (len = STACK +
    // page): the guard page below the stack.
    if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
      return Err(io::Error::last_os_error());
    }
    Ok(stack)
  }

  /// The top (stacks grow down), 16-byte aligned.
  fn top(&self) -> *mut c_void {
    ((self.base as usize + self.len) & !15) as *mut c_void
  }
}

impl Drop for Stack {
  fn drop(&mut self) {
    // SAFETY: `base` and `len` are the mapping `Stack::new` made and this Stack alone owns; it is
    // unmapped once, when no child runs on it (a spawn borrows it only while its thread is
    // suspended).
    unsafe { libc::munmap(self.base, self.len) };
  }
}

thread_local! {
  /// One stack per spawning thread, kept: a spawn borrows it only while the
  /// thread itself is suspended (CLONE_VFORK), so it is never in use twice.
  static STACKS: std::cell::RefCell<Option<Stack>> = const { std::cell::RefCell::new(None) };
}

/// Spawn `req`: its pid and pidfd, once the child exec'd. An error from
/// before the exec (the working directory, the step, the exec itself) is
/// the spawn's error, and the dead child is reaped.
pub fn spawn(req: &RawSpawn) -> io::Result<(i32, OwnedFd)> {
  STACKS.with(|cell| {
    let mut slot = cell.borrow_mut();
    if slot.is_none() {
      *slot = Some(Stack::new()?);
    }
    let stack = slot.as_ref().expect("made above");
    let shared = Shared {
      req,
      err: AtomicI32::new(0),
    };
    let mut pidfd: c_int = -1;
    // no handler of the host may run in the child before it resets them:
    // every signal blocked across the clone (the child inherits the mask)
    // SAFETY: an all-zero sigset_t is a valid value (sigfillset fills it next).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: an all-zero sigset_t is a valid value (pthread_sigmask writes the old mask into it).
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` and `old` are live sigset_t values on this stack; blocking every signal of this
    // thread changes no memory of ours.
    unsafe {
      libc::sigfillset(&mut all);
      libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // SAFETY: `child` runs on its own stack and reads `shared` (alive: the
    // clone returns only after the child exec'd or exited)
    let pid = unsafe {
      libc::clone(
        child,
        stack.top(),
        flags,
        &shared as *const Shared as *mut c_void,
        &mut pidfd as *mut c_int,
      )
    };
    let clone_err = io::Error::last_os_error();
    // SAFETY: `old` is the mask pthread_sigmask saved above; putting it back is the reverse of the
    // block.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    if pid < 0 {
      return Err(clone_err);
    }
    // SAFETY: CLONE_PIDFD stored a new descriptor of the child there
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let err = shared.err.load(Ordering::SeqCst);
    if err != 0 {
      // the child exited (its errno was set): the wait does not block long
      reap_pidfd(&pidfd);
      return Err(io::Error::from_raw_os_error(err));
    }
    Ok((pid, pidfd))
  })
}

/// A child of [`spawn`]: waited for through its pidfd.
pub struct RawChild {
  pid: i32,
  pidfd: tokio::io::unix::AsyncFd<OwnedFd>,
  status: Option<ExitStatus>,
}

impl RawChild {
  /// Must be called within a tokio runtime.
  pub fn new(pid: i32, pidfd: OwnedFd) -> io::Result<RawChild> {
    Ok(RawChild {
      pid,
      // SAFETY: the OwnedFd keeps the descriptor open and unchanged
      pidfd: unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE)
      }
      .map_err(io::Error::from)?,
      status: None,
    })
  }

  pub fn id(&self) -> i32 {
    self.pid
  }

  /// Reap it if it has ended.
  pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
    if let Some(st) = self.status {
      return Ok(Some(st));
    }
    // SAFETY: an all-zero siginfo_t is a valid value for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the pidfd is owned by `self.pidfd` and open for the call; `info` is a live siginfo_t;
    // WNOHANG makes it return at once.
    let r = unsafe {
      libc::waitid(
        libc::P_PIDFD,
        self.pidfd.get_ref().as_raw_fd() as libc::id_t,
        &mut info,
        libc::WEXITED | libc::WNOHANG,
      )
    };
    if r != 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid filled the child fields (si_pid 0: still running)
    let (pid, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
    if pid == 0 {
      return Ok(None);
    }
    use std::os::unix::process::ExitStatusExt;
    let raw = match code {
      libc::CLD_EXITED => (status & 0xff) << 8,
      libc::CLD_DUMPED => (status & 0x7f) | 0x80,
      _ => status & 0x7f,
    };
    let st = ExitStatus::from_raw(raw);
    self.status = Some(st);
    Ok(Some(st))
  }

  /// Its exit status, once it ended.
  pub async fn wait(&mut self) -> io::Result<ExitStatus> {
    loop {
      if let Some(st) = self.try_wait()? {
        return Ok(st);
      }
      let mut ready = self.pidfd.readable().await?;
      ready.clear_ready();
    }
  }

  /// SIGKILL it (not its group), unless it was reaped.
  pub fn start_kill(&mut self) -> io::Result<()> {
    if self.status.is_some() {
      return Ok(());
    }
    kill_pidfd(self.pidfd.get_ref())
  }
}

/// SIGKILL the process of `pidfd`; one that already ended (a zombie, not
/// yet reaped) is not an error.
pub fn kill_pidfd(pidfd: &OwnedFd) -> io::Result<()> {
  // SAFETY: `pidfd` is an open pidfd the caller owns; a null siginfo is allowed by
  // pidfd_send_signal(2).
  let r = unsafe {
    libc::syscall(
      libc::SYS_pidfd_send_signal,
      pidfd.as_raw_fd(),
      libc::SIGKILL,
      std::ptr::null::<libc::siginfo_t>(),
      0u32,
    )
  };
  if r != 0 {
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::ESRCH) {
      return Err(e);
    }
  }
  Ok(())
}

/// Reap the process of `pidfd` (a child of this process) if it has ended:
/// whether it has (or cannot be waited for: it is gone).
pub fn reap_pidfd_nohang(pidfd: &OwnedFd) -> bool {
  // SAFETY: an all-zero siginfo_t is a valid value for waitid to fill.
  let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
  // SAFETY: `pidfd` is open for the call and `info` a live siginfo_t; WNOHANG returns at once.
  let r = unsafe {
    libc::waitid(
      libc::P_PIDFD,
      pidfd.as_raw_fd() as libc::id_t,
      &mut info,
      libc::WEXITED | libc::WNOHANG,
    )
  };
  // SAFETY: waitid filled the child fields (si_pid 0: still running).
  r != 0 || unsafe { info.si_pid() } != 0
}

/// Wait for the process of `pidfd` (a child of this process) to end and reap
/// it, blocking.
pub fn reap_pidfd(pidfd: &OwnedFd) {
  // SAFETY: an all-zero siginfo_t is a valid value for waitid to fill.
  let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
  // SAFETY: `pidfd` is open for the call and `info` a live siginfo_t.
  unsafe {
    libc::waitid(
      libc::P_PIDFD,
      pidfd.as_raw_fd() as libc::id_t,
      &mut info,
      libc::WEXITED,
    )
  };
}

impl Drop for RawChild {
  /// A child dropped before it was reaped is reaped when it ends (it is
  /// not killed: the kill order is the supervisor's), so it never stays a
  /// zombie.
  fn drop(&mut self) {
    if self.status.is_some() || matches!(self.try_wait(), Ok(Some(_)) | Err(_)) {
      return;
    }
    let pid = self.pid;
    let reap = move || {
      let mut st = 0;
      // SAFETY: `st` is a live i32 the reaping closure owns; `pid` is our child that nobody else
      // reaps (its RawChild is being dropped unreaped).
      while unsafe { libc::waitpid(pid, &mut st, 0) } == -1
        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
      {}
    };
    match tokio::runtime::Handle::try_current() {
      Ok(h) => drop(h.spawn_blocking(reap)),
      Err(_) => drop(std::thread::spawn(reap)),
    }
  }
}
