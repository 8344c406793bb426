//! The command a child is made of: its command line, its environment with
//! the mark, its group or session, and the one child routine that runs
//! between fork/clone and exec, composed of the concerns' steps (the
//! terminal, the limits' plan, the sandbox's restriction, in that order:
//! the restriction last, so nothing after it needs what it denies).
//!
//! Two ways to start it: std's `Command` ([`std_command`]: `posix_spawn`
//! when the routine is empty, else a fork whose one `pre_exec` runs it and
//! execs), and on Linux the addon's own `clone(CLONE_VM|CLONE_VFORK)`
//! ([`RawSpawner`]: the routine is its step, when there is one).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use super::{mark, ChildCommand, Leader};
use crate::error::ExecError;
use crate::process::limits::ChildPlan;
use crate::process::sandbox::InChild;
use crate::process::spec::ExecImage;

/// The command line the child execs (see [`super::sandbox::line`]).
pub(super) struct Line<'a> {
  pub program: &'a Path,
  pub argv0: Option<&'a OsStr>,
  pub args: &'a [OsString],
}

/// What the child does between fork/clone and exec, each concern's step.
pub(super) struct ChildRoutine {
  leader: Leader,
  plan: Option<ChildPlan>,
  restriction: Option<InChild>,
}

impl ChildRoutine {
  pub fn new(leader: Leader, plan: Option<ChildPlan>, restriction: Option<InChild>) -> Self {
    ChildRoutine {
      leader,
      plan,
      restriction,
    }
  }

  /// Nothing to run before exec: the spawn's fast path stays.
  pub fn is_empty(&self) -> bool {
    !self.leader.has_step() && self.plan.is_none() && self.restriction.is_none()
  }

  /// In the child, after its stdio, group and directory are set: system
  /// calls only (no allocation, no lock). An error ends the child and is
  /// the spawn's error.
  pub fn run(&self) -> io::Result<()> {
    self.leader.in_child()?;
    if let Some(plan) = &self.plan {
      plan.apply()?;
    }
    if let Some(r) = &self.restriction {
      r.apply()?;
    }
    Ok(())
  }
}

/// What the child execs itself after its routine (no execvp /bin/sh
/// fallback, as on the `posix_spawn` path): the program, argv (argv0
/// first) and exactly the environment std's `Command` would give it.
pub(super) fn image(line: &Line, cmd: &ChildCommand, mark: &str) -> Result<ExecImage, ExecError> {
  let env = mark::block(&cmd.env, mark)?;
  let mut argv = Vec::with_capacity(line.args.len() + 1);
  argv.push(line.argv0.unwrap_or(line.program.as_os_str()).to_owned());
  argv.extend(line.args.iter().cloned());
  ExecImage::new(line.program, &argv, env, cmd.cwd)
}

/// The std `Command` of `line`: `cmd`'s environment with the mark, its
/// directory, `leader`, `stdio`, and `routine` with the exec in one
/// `pre_exec` when it has a step.
pub(super) fn std_command(
  line: &Line,
  cmd: &ChildCommand,
  mark: &str,
  leader: Leader,
  stdio: [Stdio; 3],
  routine: ChildRoutine,
) -> Result<std::process::Command, ExecError> {
  let mut c = std::process::Command::new(line.program);
  if let Some(a0) = line.argv0 {
    c.arg0(a0);
  }
  c.args(line.args);
  if let Some(dir) = cmd.cwd {
    c.current_dir(dir);
  }
  mark::set_env(&mut c, &cmd.env, mark);
  leader.set(&mut c);
  let [stdin, stdout, stderr] = stdio;
  c.stdin(stdin).stdout(stdout).stderr(stderr);
  if !routine.is_empty() {
    let image = image(line, cmd, mark)?;
    // SAFETY: the closure runs in the forked child before exec and only makes system calls that
    // allocate and lock nothing: `routine.run()` (signal dispositions, setsid, ioctl, close_range,
    // prctl, setrlimit, a write to a cgroup file, Landlock and seccomp) and `image.exec()` (execve
    // of the argv/envp built before the fork, moved into the closure so they live in the child).
    unsafe {
      c.pre_exec(move || {
        routine.run()?;
        Err(image.exec())
      });
    }
  }
  Ok(c)
}

/// What a raw launch gets (see [`super::ChildSetup::spawn_raw`]).
#[cfg(target_os = "linux")]
pub struct RawLaunch<'a> {
  /// The program the child execs (the sandbox helper in front of the
  /// caller's, under a sandbox with one).
  pub program: &'a Path,
  pub spawner: RawSpawner,
}

/// The child as the addon's clone spawns it: its exec image, directory and
/// routine, made by [`super::ChildSetup`]; the caller adds the stdio.
#[cfg(target_os = "linux")]
pub struct RawSpawner {
  image: ExecImage,
  cwd: Option<std::ffi::CString>,
  routine: ChildRoutine,
}

#[cfg(target_os = "linux")]
impl RawSpawner {
  pub(super) fn new(
    line: &Line,
    cmd: &ChildCommand,
    mark: &str,
    routine: ChildRoutine,
  ) -> Result<RawSpawner, ExecError> {
    use std::os::unix::ffi::OsStrExt;
    let image = image(line, cmd, mark)?;
    let cwd = match cmd.cwd {
      Some(c) => Some(
        std::ffi::CString::new(c.as_os_str().as_bytes())
          .map_err(|_| ExecError::invalid("cwd contains a NUL byte"))?,
      ),
      None => None,
    };
    Ok(RawSpawner {
      image,
      cwd,
      routine,
    })
  }

  /// The image, when nothing runs before exec (so another spawner, the
  /// kept sandbox helper, may start it instead: nothing is left out).
  pub fn plain_image(&self) -> Option<&ExecImage> {
    self.routine.is_empty().then_some(&self.image)
  }

  /// Spawn it with `stdio` as its 0, 1 and 2, in a process group of its
  /// own: its pid and pidfd, once it exec'd ([`crate::platform::raw_spawn`]).
  pub fn spawn(&self, stdio: [std::os::fd::RawFd; 3]) -> io::Result<(i32, std::os::fd::OwnedFd)> {
    let (program, argv, envp) = self.image.parts();
    let step: &(dyn Fn() -> io::Result<()> + Sync) = &|| self.routine.run();
    let req = crate::platform::RawSpawn {
      program,
      argv,
      envp,
      cwd: self.cwd.as_deref(),
      stdio,
      new_group: true,
      step: (!self.routine.is_empty()).then_some(&step),
    };
    crate::platform::raw_spawn(&req)
  }
}
