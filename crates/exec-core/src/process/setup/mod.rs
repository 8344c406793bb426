//! One spawn sequence for every path (a pipe child, a session worker, a PTY
//! child), process-wrap style: each concern is a small module, and
//! [`ChildSetup`] builds the command itself from them, so no caller can
//! leave one out (there is nothing to take and hand over).
//!
//! - [`mark`]: the run's mark in the child's environment;
//! - [`limits`]: the limit guard (cgroups) and the plan the child applies
//!   before exec (resource limits, the parent-death signal);
//! - [`sandbox`]: the command line under the sandbox (its helper in front of
//!   the program) or the restriction the child applies itself;
//! - [`leader`]: a process group of its own, or a session whose controlling
//!   terminal is the PTY;
//! - [`command`]: the child routine that runs between fork/clone and exec,
//!   composed of those steps, and the command made of it all: a std
//!   `Command` (`posix_spawn`, or a fork with one `pre_exec` when the
//!   routine has a step) or, on Linux, the addon's own clone
//!   ([`RawLaunch`]).
//!
//! The sequence ([`ChildSetup::spawn`], [`ChildSetup::spawn_raw`]): the
//! concerns prepare what they need, then a spawn ticket is held from before
//! the fork until the child is registered (so the host's exit paths wait
//! for it and the reaper never takes it for an orphan), and the leader is
//! recorded for the limits' watchdog. A sandboxed spawn whose command line
//! was not made by the sandbox is refused (fail closed).

mod command;
mod leader;
mod limits;
mod mark;
mod sandbox;
#[cfg(test)]
mod tests;

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;

use crate::error::ExecError;
use crate::process::limits::{ChildPlan, LimitGuard, Limits};
use crate::process::sandbox::{InChild, Invocation, SandboxPolicy, SandboxReport};

#[cfg(target_os = "linux")]
pub use command::RawLaunch;
pub use leader::Leader;
pub use mark::ChildEnv;

/// What a child gets besides its command: the same for every path.
pub struct ChildSetup<'a> {
  /// The host environment that owns the run (its spawns stop when it goes).
  pub owner: u64,
  pub limits: &'a Limits,
  /// SIGKILL the child when the host dies (Linux parent-death signal).
  pub die_with_parent: bool,
  pub sandbox: Option<&'a SandboxPolicy>,
  /// The directory the sandbox makes writable under workspace-write (the
  /// child's working directory).
  pub cwd: &'a Path,
}

/// What a caller runs, as it would run without a sandbox.
pub struct ChildCommand<'a> {
  /// The program (found already, or a name looked up in the child's `PATH`).
  pub program: &'a Path,
  /// What the program sees as its name (`None`: `program`).
  pub argv0: Option<&'a OsStr>,
  pub args: &'a [OsString],
  /// Its environment (the mark is added to it).
  pub env: ChildEnv<'a>,
  /// Its working directory (`None`: the host's).
  pub cwd: Option<&'a Path>,
}

/// A child that was spawned and registered.
pub struct Spawned<T> {
  /// The child (a `Child`, a PTY's parts, what a raw launch returned).
  pub child: T,
  /// Its pid, which is also its process group id.
  pub pid: i32,
  pub mark: String,
  pub guard: LimitGuard,
  /// A sandboxed child: how the sandbox was applied.
  pub sandbox: Option<SandboxReport>,
}

/// What the concerns made for one spawn before it.
struct Prepared {
  mark: String,
  guard: LimitGuard,
  plan: Option<ChildPlan>,
  /// The sandbox's command line, report and in-child restriction.
  invocation: Option<Invocation>,
  report: Option<SandboxReport>,
  restriction: Option<InChild>,
}

impl ChildSetup<'_> {
  /// The mark, the limit guard (cgroups are created here) and the child's
  /// plan, then the sandbox's command line for `cmd` (`in_child`: the child
  /// runs a step before exec anyway, so the restriction may be its own).
  fn prepare(&self, cmd: &ChildCommand, in_child: bool) -> Result<Prepared, ExecError> {
    let mark = crate::process::marks::new_mark(self.owner);
    let (guard, plan) = limits::prepare(self, &mark)?;
    crate::trace::at("rt.mark");
    let s = sandbox::apply(self, cmd, in_child)?;
    crate::trace::at("rt.sandboxed");
    Ok(Prepared {
      mark,
      guard,
      plan,
      invocation: s.invocation,
      report: s.report,
      restriction: s.restriction,
    })
  }

  /// Spawn `cmd` with `stdio` (stdin, stdout, stderr) as the leader of a
  /// group or a terminal's session (`leader`), and register it. std's
  /// `Command` (tokio's child): `posix_spawn` when nothing runs before exec,
  /// else a fork whose one `pre_exec` runs the child routine and execs.
  /// Must be called within a tokio runtime.
  pub fn spawn(
    &self,
    cmd: &ChildCommand,
    leader: Leader,
    stdio: [Stdio; 3],
  ) -> Result<Spawned<tokio::process::Child>, ExecError> {
    let p = self.prepare(cmd, false)?;
    let line = sandbox::line(self, cmd, p.invocation.as_ref(), p.report.as_ref())?;
    let routine = command::ChildRoutine::new(leader, p.plan, p.restriction);
    let std = command::std_command(&line, cmd, &p.mark, leader, stdio, routine)?;
    let shown = cmd
      .argv0
      .unwrap_or(cmd.program.as_os_str())
      .to_string_lossy()
      .into_owned();
    let cwd = cmd.cwd;
    let mut std = tokio::process::Command::from(std);
    self.start(p.mark, p.guard, p.report, move || {
      let r = std.spawn();
      // our copies of the child's descriptors (a PTY's slave, a socket's
      // end) go now: EOF then means the child is gone
      drop(std);
      // a working directory removed since it was checked: its error
      let child = r.map_err(|e| {
        cwd
          .and_then(|c| crate::process::spec::check_cwd(c).err())
          .unwrap_or_else(|| ExecError::from_spawn(&shown, &e))
      })?;
      let pid = child.id().unwrap_or(0) as i32;
      Ok((child, pid))
    })
  }

  /// Spawn `cmd` through the addon's own clone, in a group of its own, and
  /// register it. `launch` gets the program the child execs and the
  /// [`RawSpawner`](command::RawSpawner) (exec image, working directory, child routine) and
  /// returns what spawns: its pipes, then the spawner's `spawn` (or the kept
  /// sandbox helper when nothing runs before exec).
  #[cfg(target_os = "linux")]
  pub fn spawn_raw<T, F>(
    &self,
    cmd: &ChildCommand,
    launch: impl FnOnce(RawLaunch<'_>) -> Result<F, ExecError>,
  ) -> Result<Spawned<T>, ExecError>
  where
    F: FnOnce() -> Result<(T, i32), ExecError>,
  {
    let p = self.prepare(cmd, true)?;
    let line = sandbox::line(self, cmd, p.invocation.as_ref(), p.report.as_ref())?;
    let routine = command::ChildRoutine::new(Leader::Group, p.plan, p.restriction);
    let spawner = command::RawSpawner::new(&line, cmd, &p.mark, routine)?;
    crate::trace::at("rt.image");
    let start = launch(RawLaunch {
      program: line.program,
      spawner,
    })?;
    self.start(p.mark, p.guard, p.report, start)
  }

  /// Spawn with `spawn`, which returns the child and its pid, holding a
  /// spawn ticket, and register it. Nothing is registered when `spawn`
  /// fails (nor when the host is shutting down: `ECANCELED`, nothing runs).
  fn start<T>(
    &self,
    mark: String,
    guard: LimitGuard,
    sandbox: Option<SandboxReport>,
    spawn: impl FnOnce() -> Result<(T, i32), ExecError>,
  ) -> Result<Spawned<T>, ExecError> {
    // the reaper watches the registry from before the child is registered
    crate::process::reaper::init();
    let ticket = crate::process::registry::begin_spawn(self.owner)?;
    let (child, pid) = spawn()?;
    ticket.register(pid);
    guard.set_leader(pid);
    Ok(Spawned {
      child,
      pid,
      mark,
      guard,
      sandbox,
    })
  }
}
