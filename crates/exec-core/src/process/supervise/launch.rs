//! How a pipe child is started: its exec image and its pipes, spawned by the
//! addon's own `clone(CLONE_VM|CLONE_VFORK)` on Linux, by std's `Command`
//! (`posix_spawn`, a fork when limits ask for a step before exec) elsewhere.

use std::ffi::OsString;
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
#[cfg(not(target_os = "linux"))]
use std::os::unix::process::CommandExt;
#[cfg(not(target_os = "linux"))]
use std::process::Stdio;

use super::ProcessSpec;
use crate::error::ExecError;
#[cfg(target_os = "linux")]
use crate::platform;
use crate::process::child::{Child, StdinPipe};
use crate::process::marks;

/// Spawn through `posix_spawn` (no `pre_exec`, so the vfork fast path is kept
/// whatever the host's memory) in a new process group.
#[cfg(all(unix, not(target_os = "linux")))]
fn build_command(spec: &ProcessSpec, mark: &str) -> tokio::process::Command {
  let mut cmd = std::process::Command::new(&spec.program);
  cmd.args(&spec.args);
  if let Some(a0) = &spec.arg0 {
    cmd.arg0(a0);
  }
  if let Some(cwd) = &spec.process.cwd {
    cmd.current_dir(cwd);
  }
  if !spec.process.env.is_plain_inherit() {
    cmd.env_clear();
    cmd.envs(spec.process.env.build());
  }
  // every descendant inherits the mark, so it can be found if it leaves the group
  cmd.env(marks::MARK_VAR, mark);
  cmd.process_group(0);
  cmd.stdin(if spec.stdin_piped() {
    Stdio::piped()
  } else {
    Stdio::null()
  });
  cmd.stdout(Stdio::piped());
  cmd.stderr(Stdio::piped());
  tokio::process::Command::from(cmd)
}

#[cfg(unix)]
/// What the fork path execs: the program, argv (with `arg0`) and exactly the
/// environment [`build_command`] gives the child.
fn exec_image(
  spec: &ProcessSpec,
  mark: &str,
) -> Result<crate::process::spec::ExecImage, ExecError> {
  let mut env: Vec<(OsString, OsString)> = if spec.process.env.is_plain_inherit() {
    std::env::vars_os().collect()
  } else {
    spec.process.env.build()
  };
  env.retain(|(k, _)| k != marks::MARK_VAR);
  env.push((marks::MARK_VAR.into(), mark.into()));
  let mut argv = vec![spec
    .arg0
    .clone()
    .unwrap_or_else(|| spec.program.clone().into_os_string())];
  argv.extend(spec.args.iter().cloned());
  crate::process::spec::ExecImage::new(&spec.program, &argv, &env, spec.process.cwd.as_deref())
}

/// A spawned pipe child and the host's ends of its pipes.
#[cfg(unix)]
pub(super) struct LaunchedChild {
  pub(super) child: Child,
  pub(super) pid: i32,
  pub(super) stdin: Option<StdinPipe>,
  pub(super) stdout: OwnedFd,
  pub(super) stderr: OwnedFd,
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
/// another file name (`EXEC_NATIVE_SANDBOX_HELPER`), which is exec'd. (The
/// spec here is the sandboxed one: the helper's command line.)
#[cfg(target_os = "linux")]
fn kept_helper_run(
  spec: &ProcessSpec,
  plain: bool,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
  // every spawn passes here: the name first (no environment lookup, no
  // lock), the helper's path only for a spawn of a program so named
  let name = spec.program.file_name()?;
  if !plain || name != crate::process::sandbox::HELPER_NAME {
    return None;
  }
  let helper = crate::process::sandbox::helper()
    .ok()
    .filter(|h| *h == spec.program)?;
  let dir = spec
    .process
    .cwd
    .clone()
    .or_else(|| std::env::current_dir().ok())?;
  Some((helper, dir))
}

/// Prepare the spawn of `spec` (its exec image, its pipes' settings) and
/// return what does it: the addon's own `clone(CLONE_VM|CLONE_VFORK)` spawn
/// ([`platform::raw_spawn`]), whose child applies the limits' `plan` and
/// the sandbox's restriction itself before exec. Nothing forks, whatever
/// the host's heap, and a restriction never touches a task of the host.
#[cfg(target_os = "linux")]
pub(super) fn launch_child(
  spec: &ProcessSpec,
  mark: &str,
  plan: Option<crate::process::limits::ChildPlan>,
  in_child: Option<crate::process::sandbox::InChild>,
) -> Result<impl FnOnce() -> std::io::Result<LaunchedChild> + Send + 'static, ExecError> {
  use std::os::unix::ffi::OsStrExt;
  let image = exec_image(spec, mark)?;
  crate::trace::at("rt.image");
  let cwd = match &spec.process.cwd {
    Some(c) => Some(
      std::ffi::CString::new(c.as_os_str().as_bytes())
        .map_err(|_| ExecError::invalid("cwd contains a NUL byte"))?,
    ),
    None => None,
  };
  let null_stdin = !spec.stdin_piped();
  let zygote = kept_helper_run(spec, plan.is_none() && in_child.is_none());
  Ok(move || {
    let (stdin_child, stdin_host) = if null_stdin {
      (
        platform::open_noctty(std::path::Path::new("/dev/null"))?,
        None,
      )
    } else {
      let (r, w) = cloexec_pipe()?;
      (r, Some(w))
    };
    let (out_r, out_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    let step = move || -> std::io::Result<()> {
      if let Some(plan) = &plan {
        plan.apply()?;
      }
      if let Some(r) = &in_child {
        r.apply()?;
      }
      Ok(())
    };
    let (program, argv, envp) = image.parts();
    let req = platform::RawSpawn {
      program,
      argv,
      envp,
      cwd: cwd.as_deref(),
      stdio: [
        stdin_child.as_raw_fd(),
        out_w.as_raw_fd(),
        err_w.as_raw_fd(),
      ],
      new_group: true,
      step: Some(&step),
    };
    crate::trace::at("rt.pipes");
    let kept = zygote.as_ref().and_then(|(helper, dir)| {
      crate::process::sandbox::zygote::spawn(helper, &image, dir, req.stdio)
    });
    let (pid, pidfd) = match kept {
      Some(started) => started?,
      None => platform::raw_spawn(&req)?,
    };
    crate::trace::at("rt.cloned");
    drop((stdin_child, out_w, err_w));
    let child = platform::RawChild::new(pid, pidfd)?;
    let stdin = match stdin_host {
      Some(w) => Some(StdinPipe::from_owned_fd(w)?),
      None => None,
    };
    Ok(LaunchedChild {
      child: Child::Raw(child),
      pid,
      stdin,
      stdout: out_r,
      stderr: err_r,
    })
  })
}

/// Off Linux: std's `Command` (posix_spawn; a fork when limits ask for a
/// step before exec), run by tokio.
#[cfg(all(unix, not(target_os = "linux")))]
pub(super) fn launch_child(
  spec: &ProcessSpec,
  mark: &str,
  plan: Option<crate::process::limits::ChildPlan>,
  _in_child: Option<crate::process::sandbox::InChild>,
) -> Result<impl FnOnce() -> std::io::Result<LaunchedChild> + Send + 'static, ExecError> {
  let mut cmd = build_command(spec, mark);
  // limits are set in the child before exec (exact, but a real fork instead
  // of posix_spawn: only when limits are asked for)
  if let Some(plan) = plan {
    // the child execs itself (no execvp /bin/sh fallback): the last step
    let image = exec_image(spec, mark)?;
    // SAFETY: the closure runs in the forked child before exec and only makes system calls that
    // allocate and lock nothing: `plan.apply()` (signal dispositions, setrlimit) and `image.exec()`
    // (execve of the argv/envp `exec_image` built before the fork, moved into the closure so they
    // live in the child).
    unsafe {
      cmd.pre_exec(move || {
        plan.apply()?;
        Err(image.exec())
      });
    }
  }
  Ok(move || {
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0) as i32;
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
    Ok(LaunchedChild {
      child: Child::Tokio(child),
      pid,
      stdin,
      stdout,
      stderr,
    })
  })
}
