//! The host's side of the kept sandbox helper (`exec-native-sandbox
//! --zygote`; the protocol and why: `exec_native_sandbox::zygote`).
//!
//! A spawn of the helper for a sandboxed run becomes a request to the kept
//! helper, which forks the run as this process's child and sends back its
//! pid and pidfd: the same child, the same group, the same status as a
//! spawned helper, without the helper's `execve`. The kept helper is
//! started at the first such spawn, again if it died (one retry per
//! spawn), and a new one when the helper's path changed. Where it cannot
//! be used (it fails to start) the caller spawns the helper itself.
//! `EXEC_NATIVE_SANDBOX_NO_ZYGOTE` set in the host's environment turns it
//! off (the benchmark's comparison).
//!
//! The kept helper also makes namespaced runs ahead of their request (the
//! host's children too) and says so in a `WARM` reply; they are kept here
//! by pidfd until a reply names one as a run, and reaped here if they end
//! unused (the kept helper ended or replaced them).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use exec_native_sandbox::zygote as wire;

/// Turns the kept helper off (set in the host's environment).
pub const OFF_VAR: &str = "EXEC_NATIVE_SANDBOX_NO_ZYGOTE";

struct Kept {
  helper: PathBuf,
  sock: OwnedFd,
  pidfd: OwnedFd,
  /// The runs it made ahead that no reply has named yet (pid, pidfd).
  warm: Vec<(i32, OwnedFd)>,
}

impl Kept {
  /// Take a `WARM` reply's run into [`Kept::warm`].
  fn note_warm(&mut self, pid: i32, pidfd: Option<OwnedFd>) {
    if let Some(fd) = pidfd {
      self.warm.push((pid, fd));
    }
  }

  /// Reap the runs made ahead that ended unused.
  fn reap_ended_warm(&mut self) {
    self
      .warm
      .retain(|(_, fd)| !crate::platform::reap_pidfd_nohang(fd));
  }
}

impl Drop for Kept {
  /// Kill the kept helper and reap it (its socket closes with `self`), then
  /// the runs it made ahead: those it told of before it ended, read from
  /// the socket (its end is closed now, so the reads end), killed and
  /// reaped.
  fn drop(&mut self) {
    let _ = crate::platform::kill_pidfd(&self.pidfd);
    crate::platform::reap_pidfd(&self.pidfd);
    self.end_warm();
  }
}

impl Kept {
  /// Kill and reap the runs made ahead: those known, and those whose news
  /// is queued on the socket (read without waiting: between requests
  /// nothing else is). The kept helper finds its own gone at the next
  /// request and makes another.
  fn end_warm(&mut self) {
    while let Ok((r, fd)) = wire::try_recv_reply(self.sock.as_raw_fd()) {
      if r.kind == wire::Reply::WARM {
        self.note_warm(r.pid, fd);
      }
    }
    for (_, fd) in self.warm.drain(..) {
      let _ = crate::platform::kill_pidfd(&fd);
      crate::platform::reap_pidfd(&fd);
    }
  }
}

/// End the runs the kept helper made ahead (the host's template namespace
/// was replaced: they hold the old one, and with it the old mounts).
pub fn end_warm() {
  if let Some(k) = KEPT.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
    k.end_warm();
  }
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// Start the kept helper `helper`.
fn start(helper: &Path) -> io::Result<Kept> {
  let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
  let null = std::fs::OpenOptions::new()
    .read(true)
    .write(true)
    .open("/dev/null")?;
  let program = CString::new(helper.as_os_str().as_bytes())
    .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
  let arg = c"--zygote";
  let argv = [program.as_ptr(), arg.as_ptr(), std::ptr::null()];
  // one variable, for `/proc/<pid>/environ` of it and its forks (the runs,
  // and those made ahead, which wait there): an empty one is what a process
  // in the middle of an `execve` shows, which a run's sweep waits for
  // (`marks::marked_or_pending_since`)
  let envp = [c"EXEC_NATIVE_SANDBOX_KEPT=1".as_ptr(), std::ptr::null()];
  let req = crate::platform::RawSpawn {
    program: &program,
    argv: argv.as_ptr(),
    envp: envp.as_ptr(),
    cwd: Some(c"/"),
    stdio: [theirs.as_raw_fd(), null.as_raw_fd(), null.as_raw_fd()],
    // a group of its own: a run's group kill, or the host's, never reaches it
    new_group: true,
    step: None,
  };
  let (_pid, pidfd) = crate::platform::raw_spawn(&req)?;
  Ok(Kept {
    helper: helper.to_path_buf(),
    sock: OwnedFd::from(ours),
    pidfd,
    warm: Vec::new(),
  })
}

/// Why a request failed.
enum Failed {
  /// The kept helper is gone or answered nonsense: start another.
  Broken,
  /// The run could not be started (the errno the kept helper sent).
  Run(io::Error),
}

fn request(
  kept: &mut Kept,
  header: &wire::Header,
  body: &[u8],
  stdio: [RawFd; 3],
) -> Result<(i32, OwnedFd), Failed> {
  kept.reap_ended_warm();
  let sock = kept.sock.as_raw_fd();
  wire::send_request(sock, header, body, &stdio).map_err(|_| Failed::Broken)?;
  loop {
    match wire::recv_reply(sock) {
      // news of a run made ahead (sent after the previous reply)
      Ok((r, fd)) if r.kind == wire::Reply::WARM => kept.note_warm(r.pid, fd),
      Ok((r, Some(pidfd))) if r.kind == wire::Reply::RUN && r.pid > 0 => {
        // a run made ahead is now a run: the caller owns it
        kept.warm.retain(|(pid, _)| *pid != r.pid);
        return Ok((r.pid, pidfd));
      }
      Ok((r, None)) if r.kind == wire::Reply::RUN && r.pid < 0 => {
        return Err(Failed::Run(io::Error::from_raw_os_error(-r.pid)))
      }
      _ => return Err(Failed::Broken),
    }
  }
}

/// Spawn the helper `helper` with the arguments and environment of
/// `image`, in `cwd`, with `stdio`, through the kept helper: the run's pid
/// and pidfd, or the error that kept it from starting. `None`: the kept
/// helper is off or cannot be started (spawn the helper directly).
pub fn spawn(
  helper: &Path,
  image: &crate::process::spec::ExecImage,
  cwd: &Path,
  stdio: [RawFd; 3],
) -> Option<io::Result<(i32, OwnedFd)>> {
  if std::env::var_os(OFF_VAR).is_some() {
    return None;
  }
  let (args, env) = image.strings();
  let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
  let (header, body) = wire::encode(cwd.as_os_str().as_bytes(), &args, &env);
  let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
  for _ in 0..2 {
    if kept.as_ref().is_some_and(|k| k.helper != helper) {
      *kept = None;
    }
    if kept.is_none() {
      *kept = Some(start(helper).ok()?);
    }
    let k = kept.as_mut()?;
    match request(k, &header, &body, stdio) {
      Ok(child) => return Some(Ok(child)),
      Err(Failed::Run(e)) => return Some(Err(e)),
      Err(Failed::Broken) => *kept = None,
    }
  }
  None
}
