//! Pseudo-terminals: `portable-pty` opens the pair; the child is spawned here
//! as a session leader with the slave as its controlling terminal (its own
//! pre-exec step, see [`spawn`]). The master is then driven here without blocking threads: a duplicate of its fd,
//! non-blocking, registered with tokio, read until EIO (all slaves closed) so
//! that everything the child wrote before exiting is delivered.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use portable_pty::{MasterPty, PtySize};
use tokio::io::unix::AsyncFd;

use crate::error::{ErrorCode, ExecError};
use crate::platform;
use crate::process::limits::ChildPlan;
use crate::process::{ChildSetup, Prepared, Spawned};

/// A spawned PTY child: its handle (reaped by `wait`, as a pipe child is)
/// and its terminal.
pub(crate) struct PtyParts {
  pub child: tokio::process::Child,
  pub master: Box<dyn MasterPty + Send>,
  pub io: AsyncFd<OwnedFd>,
}

pub(crate) fn size(rows: u16, cols: u16) -> PtySize {
  PtySize {
    rows,
    cols,
    pixel_width: 0,
    pixel_height: 0,
  }
}

/// The command line of the PTY child (under a sandbox, its helper in front
/// of the program) and its full argv (argv[0] first).
fn invocation(
  setup: &ChildSetup,
  prepared: &mut Prepared,
  program: &Path,
  argv: &[String],
  env: &[(OsString, OsString)],
) -> Result<(crate::process::sandbox::Invocation, Vec<OsString>), ExecError> {
  // under a sandbox, its helper in front of the program
  let path_var = env
    .iter()
    .rev()
    .find(|(k, _)| k == "PATH")
    .map(|(_, v)| v.clone());
  let inv = setup.invocation(
    prepared,
    crate::process::sandbox::Invocation {
      program: program.to_path_buf(),
      argv0: Some(argv[0].clone().into()),
      args: argv[1..].iter().map(OsString::from).collect(),
    },
    path_var,
  )?;
  let mut full_argv = vec![inv
    .argv0
    .clone()
    .unwrap_or_else(|| inv.program.clone().into_os_string())];
  full_argv.extend(inv.args.iter().cloned());
  Ok((inv, full_argv))
}

/// Start `program` (already resolved; `argv[0]` is what it sees) as a session
/// leader with a new terminal of `size` as its controlling tty. portable-pty
/// opens the pair; the child is forked here, so that it starts with default
/// signal dispositions (Node ignores SIGPIPE and SIGXFSZ, and an ignored
/// signal stays ignored across exec) and with `plan` (resource limits)
/// applied before exec, like a pipe child. The spawn sequence (ticket,
/// sandbox, registration) is the one of every path: [`ChildSetup::spawn`].
pub(crate) fn spawn(
  program: &Path,
  argv: &[String],
  mut env: Vec<(OsString, OsString)>,
  size: PtySize,
  setup: &ChildSetup,
  mut prepared: Prepared,
) -> Result<Spawned<PtyParts>, ExecError> {
  let cwd = setup.cwd;
  let plan = prepared.plan.take();
  let system = portable_pty::native_pty_system();
  let pair = system
    .openpty(size)
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot open a pty: {e}")))?;
  let name = pair
    .master
    .tty_name()
    .ok_or_else(|| ExecError::new(ErrorCode::EIO, "the pty has no name"))?;
  let slave = platform::open_noctty(&name).map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot open {}: {e}", name.display()),
    )
  })?;
  if !env.iter().any(|(k, _)| k == "TERM") {
    env.push(("TERM".into(), "xterm-256color".into()));
  }
  // every descendant inherits the mark, so it can be found if it leaves the
  // session (see crate::process::marks)
  env.push((
    crate::process::marks::MARK_VAR.into(),
    prepared.mark.clone().into(),
  ));
  let stdio = || {
    slave
      .try_clone()
      .map(Stdio::from)
      .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot duplicate the pty: {e}")))
  };
  let (inv, full_argv) = invocation(setup, &mut prepared, program, argv, &env)?;
  // the child execs itself (no execvp /bin/sh fallback, as on the
  // posix_spawn path of pipes): the last step
  let image = crate::process::spec::ExecImage::new(&inv.program, &full_argv, &env, Some(cwd))?;
  let mut cmd = Command::new(&inv.program);
  cmd
    .arg0(&full_argv[0])
    .args(&inv.args)
    .current_dir(cwd)
    .env_clear()
    .envs(env)
    .stdin(stdio()?)
    .stdout(stdio()?)
    .stderr(stdio()?);
  // SAFETY: child_setup only makes async-signal-safe calls
  unsafe {
    cmd.pre_exec(move || {
      child_setup(plan.as_ref())?;
      Err(image.exec())
    });
  }
  let shown = argv[0].clone();
  let mut cmd = tokio::process::Command::from(cmd);
  let spawned = setup.spawn(prepared, move || {
    let r = cmd.spawn();
    // our copies of the slave must go, or the master never sees EOF
    drop(cmd);
    let child = r.map_err(|e| ExecError::from_spawn(&shown, &e))?;
    let pid = child.id().unwrap_or(0) as i32;
    Ok((child, pid))
  });
  drop(slave);
  drop(pair.slave);
  let spawned = spawned?;
  let raw = pair
    .master
    .as_raw_fd()
    .ok_or_else(|| ExecError::new(ErrorCode::EIO, "the pty has no file descriptor"))?;
  let fd = platform::dup_nonblocking(raw)
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  // SAFETY: an OwnedFd keeps its descriptor open and unchanged while owned
  let io = unsafe { AsyncFd::register(fd) }
    .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot watch the pty: {e}")))?;
  Ok(Spawned {
    child: PtyParts {
      child: spawned.child,
      master: pair.master,
      io,
    },
    pid: spawned.pid,
    mark: spawned.mark,
    guard: spawned.guard,
    sandbox: spawned.sandbox,
  })
}

/// In the child, between fork and exec (stdio is already the slave). What
/// portable-pty does (default dispositions, empty mask, setsid, the
/// controlling tty, no leaked descriptors), with SIGPIPE, SIGXFSZ and SIGXCPU
/// reset too, then the limits. Async-signal-safe.
fn child_setup(plan: Option<&ChildPlan>) -> io::Result<()> {
  platform::child_default_signals();
  platform::child_session_with_tty()?;
  // descriptors the host left without FD_CLOEXEC do not reach the program
  platform::cloexec_from(3);
  match plan {
    Some(p) => p.apply(),
    None => Ok(()),
  }
}

/// Write all of `data` to the master.
pub(crate) async fn write_all(fd: &AsyncFd<OwnedFd>, mut data: &[u8]) -> io::Result<()> {
  while !data.is_empty() {
    let mut guard = fd.writable().await?;
    let r = guard.try_io(|inner| platform::write_fd(inner.get_ref(), data));
    match r {
      Ok(Ok(n)) => data = &data[n..],
      Ok(Err(e)) => return Err(e),
      Err(_would_block) => continue,
    }
  }
  Ok(())
}
