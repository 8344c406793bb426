//! How a pipe child is started: its pipes, and the spawn through the one
//! sequence ([`ChildSetup`]), which builds the command (the mark, the
//! group, the sandbox's command line, the child routine applying the limits
//! and the restriction): on Linux the addon's own
//! `clone(CLONE_VM|CLONE_VFORK)` ([`ChildSetup::spawn_raw`]), or the kept
//! sandbox helper; elsewhere std's `Command` (`posix_spawn`, a fork when
//! something runs before exec), run by tokio.

#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;

use super::ProcessSpec;
use crate::error::ExecError;
#[cfg(target_os = "linux")]
use crate::platform;
use crate::process::child::{Child, StdinPipe};
use crate::process::{ChildCommand, ChildEnv, ChildSetup, Spawned};

/// A spawned pipe child and the host's ends of its pipes.
pub(super) struct LaunchedChild {
  pub(super) child: Child,
  pub(super) stdin: Option<StdinPipe>,
  pub(super) stdout: OwnedFd,
  pub(super) stderr: OwnedFd,
}

/// What `spec` runs, as it would without a sandbox.
fn command(spec: &ProcessSpec) -> ChildCommand<'_> {
  ChildCommand {
    program: &spec.program,
    argv0: spec.arg0.as_deref(),
    args: &spec.args,
    env: ChildEnv::Spec(&spec.process.env),
    cwd: spec.process.cwd.as_deref(),
  }
}

/// A pipe, both ends close-on-exec: (read, write).
#[cfg(target_os = "linux")]
fn cloexec_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
  let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
  Ok((r, w))
}

/// The sandbox helper with nothing to run before its exec (`plain`): a
/// request to the kept helper instead of an exec of it (see
/// [`crate::process::sandbox::zygote`]). The helper's path and the run's
/// directory; `None` for any other spawn, and for a helper given under
/// another file name (`EXEC_NATIVE_SANDBOX_HELPER`), which is exec'd.
/// (`program` is the one the child execs: the helper under a sandbox.)
#[cfg(target_os = "linux")]
fn kept_helper_run(
  spec: &ProcessSpec,
  program: &std::path::Path,
  plain: bool,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
  // every spawn passes here: the name first (no environment lookup, no
  // lock), the helper's path only for a spawn of a program so named
  let name = program.file_name()?;
  if !plain || name != crate::process::sandbox::HELPER_NAME {
    return None;
  }
  let helper = crate::process::sandbox::helper()
    .ok()
    .filter(|h| *h == program)?;
  let dir = spec
    .process
    .cwd
    .clone()
    .or_else(|| std::env::current_dir().ok())?;
  Some((helper, dir))
}

/// Spawn `spec` with its pipes through the addon's own
/// `clone(CLONE_VM|CLONE_VFORK)` spawn (its `RawSpawner`),
/// whose child runs the routine (limits, the sandbox's restriction) itself
/// before exec. Nothing forks, whatever the host's heap, and a restriction
/// never touches a task of the host.
#[cfg(target_os = "linux")]
pub(super) fn spawn(
  setup: &ChildSetup,
  spec: &ProcessSpec,
) -> Result<Spawned<LaunchedChild>, ExecError> {
  let null_stdin = !spec.stdin_piped();
  setup.spawn_raw(&command(spec), |launch| {
    let spawner = launch.spawner;
    let zygote = kept_helper_run(spec, launch.program, spawner.plain_image().is_some());
    let shown = launch.program.display().to_string();
    Ok(move || {
      let start = || -> std::io::Result<(LaunchedChild, i32)> {
        // the host's kept /dev/null, or the read end of the stdin pipe
        // (closed here once the child has its copy)
        let (stdin_child, stdin_host) = if null_stdin {
          (None, None)
        } else {
          let (r, w) = cloexec_pipe()?;
          (Some(r), Some(w))
        };
        let stdin_fd = match &stdin_child {
          Some(r) => r.as_raw_fd(),
          None => platform::dev_null()?.as_raw_fd(),
        };
        let (out_r, out_w) = cloexec_pipe()?;
        let (err_r, err_w) = cloexec_pipe()?;
        let stdio = [stdin_fd, out_w.as_raw_fd(), err_w.as_raw_fd()];
        crate::trace::at("rt.pipes");
        let kept = zygote.as_ref().and_then(|(helper, dir)| {
          let image = spawner.plain_image()?;
          crate::process::sandbox::zygote::spawn(helper, image, dir, stdio)
        });
        let (pid, pidfd) = match kept {
          Some(started) => started?,
          None => spawner.spawn(stdio)?,
        };
        crate::trace::at("rt.cloned");
        drop((stdin_child, out_w, err_w));
        let child = platform::RawChild::new(pid, pidfd)?;
        let stdin = match stdin_host {
          Some(w) => Some(StdinPipe::from_owned_fd(w)?),
          None => None,
        };
        let launched = LaunchedChild {
          child: Child::Raw(child),
          stdin,
          stdout: out_r,
          stderr: err_r,
        };
        Ok((launched, pid))
      };
      start().map_err(|e| ExecError::from_spawn(&shown, &e))
    })
  })
}

/// Off Linux: std's `Command` (posix_spawn; a fork when limits ask for a
/// step before exec), run by tokio.
#[cfg(all(unix, not(target_os = "linux")))]
pub(super) fn spawn(
  setup: &ChildSetup,
  spec: &ProcessSpec,
) -> Result<Spawned<LaunchedChild>, ExecError> {
  use std::process::Stdio;
  let stdin = if spec.stdin_piped() {
    Stdio::piped()
  } else {
    Stdio::null()
  };
  let stdio = [stdin, Stdio::piped(), Stdio::piped()];
  let spawned = setup.spawn(&command(spec), crate::process::Leader::Group, stdio)?;
  let Spawned {
    mut child,
    pid,
    mark,
    guard,
    sandbox,
  } = spawned;
  match pipes(&mut child) {
    Ok((stdin, stdout, stderr)) => Ok(Spawned {
      child: LaunchedChild {
        child: Child::Tokio(child),
        stdin,
        stdout,
        stderr,
      },
      pid,
      mark,
      guard,
      sandbox,
    }),
    Err(e) => {
      // registered, but its output can't be read: it does not run on
      let _ = child.start_kill();
      crate::process::registry::unregister(pid);
      Err(ExecError::from_spawn(
        &spec.program.display().to_string(),
        &e,
      ))
    }
  }
}

/// The host's ends of a tokio child's pipes.
#[cfg(all(unix, not(target_os = "linux")))]
fn pipes(
  child: &mut tokio::process::Child,
) -> std::io::Result<(Option<StdinPipe>, OwnedFd, OwnedFd)> {
  let stdout = child
    .stdout
    .take()
    .expect("stdout is piped")
    .into_owned_fd()?;
  let stderr = child
    .stderr
    .take()
    .expect("stderr is piped")
    .into_owned_fd()?;
  let stdin = match child.stdin.take() {
    Some(w) => Some(StdinPipe::from_owned_fd(w.into_owned_fd()?)?),
    None => None,
  };
  Ok((stdin, stdout, stderr))
}
