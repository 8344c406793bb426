//! One spawn sequence for every path (a pipe child, a session worker, a PTY
//! child): the run's mark, its limit guard and the plan the child applies
//! before exec ([`ChildSetup::prepare`]), the command line under the
//! sandbox ([`ChildSetup::invocation`]: the sandbox helper in front of the
//! program), then the spawn itself ([`ChildSetup::spawn`]): a spawn ticket
//! held from before the fork until the child is registered (so the host's
//! exit paths wait for it and the reaper never takes it for an orphan), and
//! the leader recorded for the limits' watchdog.
//!
//! The caller builds the command (stdio, environment with the mark, the
//! pre-exec step that applies [`Prepared::plan`]) from the invocation and
//! hands over a closure that forks or posix_spawns it. A sandboxed spawn
//! whose command line was not made by [`ChildSetup::invocation`] is refused
//! (fail closed).

use std::path::Path;

use crate::error::{ErrorCode, ExecError};
use crate::process::limits::{ChildPlan, LimitGuard, Limits};
use crate::process::sandbox::{InChild, Invocation, SandboxPolicy, SandboxReport};

/// What a child gets besides its command: the same for every path.
pub struct ChildSetup<'a> {
  /// The host environment that owns the run (its spawns stop when it goes).
  pub owner: u64,
  pub limits: &'a Limits,
  /// SIGKILL the child when the host dies (Linux parent-death signal).
  pub die_with_parent: bool,
  pub sandbox: Option<&'a SandboxPolicy>,
  /// The child's working directory (writable under a workspace-write sandbox).
  pub cwd: &'a Path,
}

/// What the caller builds its command from.
pub struct Prepared {
  /// The run's mark: the child's environment must carry
  /// `EXEC_NATIVE_RUN_ID=<mark>` (see [`crate::process::marks`]).
  pub mark: String,
  pub guard: LimitGuard,
  /// What the child must do before exec (limits, cgroups, parent-death
  /// signal): `None` keeps the posix_spawn fast path. The caller moves it
  /// into its pre-exec step.
  pub plan: Option<ChildPlan>,
  /// The sandbox's restriction for the child to apply before exec, when
  /// [`ChildSetup::launch`] chose that (no helper). The caller moves it into
  /// its pre-exec step; one left here makes [`ChildSetup::spawn`] refuse.
  pub in_child: Option<InChild>,
  /// How the sandbox was applied, once [`ChildSetup::invocation`] made the
  /// command line (a sandboxed spawn without it is refused).
  sandbox: Option<SandboxReport>,
}

/// A child that was spawned and registered.
pub struct Spawned<T> {
  /// What the spawn closure returned (a `Child`, a PTY's parts).
  pub child: T,
  /// Its pid, which is also its process group id.
  pub pid: i32,
  pub mark: String,
  pub guard: LimitGuard,
  /// A sandboxed child: how the sandbox was applied.
  pub sandbox: Option<SandboxReport>,
}

impl ChildSetup<'_> {
  /// The mark, the limit guard (cgroups are created here) and the child's plan.
  pub fn prepare(&self) -> Result<Prepared, ExecError> {
    let mark = crate::process::marks::new_mark(self.owner);
    // the sandbox helper and its init (with namespaces) are two processes
    // of ours in the tree: not the run's
    let helpers = match self.sandbox {
      Some(_) if cfg!(target_os = "linux") && crate::process::sandbox::namespaces().is_ok() => 2,
      _ => 0,
    };
    let guard = LimitGuard::with_helpers(self.limits, &mark, helpers);
    let plan = guard.child_plan(self.die_with_parent)?;
    Ok(Prepared {
      mark,
      guard,
      plan,
      in_child: None,
      sandbox: None,
    })
  }

  /// The command line to spawn for `plain`: itself without a sandbox; the
  /// sandbox helper (or `sandbox-exec`) in front of it with one. `path_var`
  /// is the child's `PATH` (the program is found before the spawn).
  pub fn invocation(
    &self,
    prepared: &mut Prepared,
    plain: Invocation,
    path_var: Option<std::ffi::OsString>,
  ) -> Result<Invocation, ExecError> {
    self.make_invocation(prepared, plain, path_var, false)
  }

  /// [`ChildSetup::invocation`] for a caller whose child runs a step before
  /// exec ([`Prepared::in_child`]): where no namespace is made, the program
  /// itself, and the restriction in `prepared.in_child`.
  pub fn launch(
    &self,
    prepared: &mut Prepared,
    plain: Invocation,
    path_var: Option<std::ffi::OsString>,
  ) -> Result<Invocation, ExecError> {
    self.make_invocation(prepared, plain, path_var, true)
  }

  fn make_invocation(
    &self,
    prepared: &mut Prepared,
    plain: Invocation,
    path_var: Option<std::ffi::OsString>,
    in_child: bool,
  ) -> Result<Invocation, ExecError> {
    match self.sandbox {
      None => Ok(plain),
      Some(policy) => {
        let (inv, report, restriction) =
          crate::process::sandbox::launch(policy, self.cwd, plain, path_var, in_child)?;
        prepared.sandbox = Some(report);
        prepared.in_child = restriction;
        Ok(inv)
      }
    }
  }

  /// Spawn with `spawn`, which returns the child and its pid, and register
  /// it. Nothing is registered when `spawn` fails (nor when the host is
  /// shutting down: `ECANCELED`, nothing runs).
  pub fn spawn<T: Send + 'static>(
    &self,
    prepared: Prepared,
    spawn: impl FnOnce() -> Result<(T, i32), ExecError> + Send + 'static,
  ) -> Result<Spawned<T>, ExecError> {
    let Prepared {
      mark,
      guard,
      plan,
      in_child,
      sandbox,
    } = prepared;
    if self.sandbox.is_some() && sandbox.is_none() {
      return Err(ExecError::new(
        ErrorCode::ESANDBOX,
        "sandbox: the command line was not made by ChildSetup::invocation (nothing ran)",
      ));
    }
    // what the child must apply before exec was not moved into its step:
    // the spawn would run without its limits or its sandbox (fail closed)
    if in_child.is_some() {
      return Err(ExecError::new(
        ErrorCode::ESANDBOX,
        "sandbox: the restriction was not handed to the child (nothing ran)",
      ));
    }
    if plan.is_some() {
      return Err(ExecError::new(
        ErrorCode::ESPAWN,
        "limits: the child's plan was not handed to the child (nothing ran)",
      ));
    }
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

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::process::CommandExt;
  use std::process::Command;

  fn setup(limits: &Limits) -> ChildSetup<'_> {
    ChildSetup {
      owner: 0,
      limits,
      die_with_parent: false,
      sandbox: None,
      cwd: Path::new("/"),
    }
  }

  #[test]
  fn a_spawned_child_is_registered_under_its_pid_with_its_mark() {
    let limits = Limits::default();
    let s = setup(&limits);
    let prep = s.prepare().unwrap();
    assert!(prep.plan.is_none(), "no limits: the posix_spawn fast path");
    let mark = prep.mark.clone();
    let spawned = s
      .spawn(prep, move || {
        let c = Command::new("true")
          .env(crate::process::marks::MARK_VAR, &mark)
          .process_group(0)
          .spawn()
          .map_err(|e| ExecError::from_spawn("true", &e))?;
        let pid = c.id() as i32;
        Ok((c, pid))
      })
      .unwrap();
    assert!(crate::process::registry::is_registered(spawned.pid));
    assert_eq!(spawned.guard.mark(), spawned.mark);
    let mut child = spawned.child;
    child.wait().unwrap();
    crate::process::registry::unregister(spawned.pid);
  }

  #[test]
  fn a_failed_spawn_registers_nothing() {
    let limits = Limits::default();
    let s = setup(&limits);
    let before = crate::process::registry::live_count();
    let r = s.spawn(s.prepare().unwrap(), || -> Result<((), i32), ExecError> {
      Err(ExecError::invalid("no"))
    });
    assert!(r.is_err());
    assert_eq!(crate::process::registry::live_count(), before);
  }

  #[test]
  fn limits_ask_for_a_plan() {
    let limits = Limits {
      open_files: Some(64),
      ..Default::default()
    };
    assert!(setup(&limits).prepare().unwrap().plan.is_some());
    let plain = Limits::default();
    let dwp = ChildSetup {
      die_with_parent: true,
      ..setup(&plain)
    };
    assert!(dwp.prepare().unwrap().plan.is_some(), "dieWithParent forks");
  }
}
