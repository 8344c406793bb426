//! One spawn sequence for every path (a pipe child, a session worker, a PTY
//! child): the run's mark, its limit guard and the plan the child applies
//! before exec ([`ChildSetup::prepare`]), then the spawn itself
//! ([`ChildSetup::spawn`]): a spawn ticket held from before the fork until
//! the child is registered (so the host's exit paths wait for it and the
//! reaper never takes it for an orphan), the sandbox's restricted spawning
//! thread when asked (kept for the run when the child has a parent-death
//! signal, which follows the thread that spawned), and the leader recorded
//! for the limits' watchdog.
//!
//! The caller builds the command (stdio, environment with the mark, the
//! pre-exec step that applies [`Prepared::plan`]) and hands over a closure
//! that forks or posix_spawns it: that closure is all that runs on the
//! sandboxed thread.

use std::path::{Path, PathBuf};

use crate::error::ExecError;
use crate::limits::{ChildPlan, LimitGuard, Limits};
use crate::sandbox::{Anchor, SandboxPolicy, SandboxReport};

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
  /// Files the child writes before exec (its cgroups): the sandbox lets it.
  writes: Vec<PathBuf>,
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
  /// A sandboxed child with a parent-death signal: its spawning thread,
  /// which must live as long as the child may (drop it when the child is
  /// reaped).
  pub anchor: Option<Anchor>,
}

impl ChildSetup<'_> {
  /// The mark, the limit guard (cgroups are created here) and the child's plan.
  pub fn prepare(&self) -> Result<Prepared, ExecError> {
    let mark = crate::process::marks::new_mark(self.owner);
    let guard = LimitGuard::new(self.limits, &mark);
    let plan = guard.child_plan(self.die_with_parent)?;
    let writes = plan.as_ref().map(|p| p.written_files()).unwrap_or_default();
    Ok(Prepared {
      mark,
      guard,
      plan,
      writes,
    })
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
      plan: _,
      writes,
    } = prepared;
    let ticket = crate::process::registry::begin_spawn(self.owner)?;
    let ((child, pid), sandbox, anchor) = match self.sandbox {
      None => (spawn()?, None, None),
      // spawned from a thread that restricted itself: the child inherits it
      Some(policy) if self.die_with_parent => {
        let (c, report, anchor) = crate::sandbox::spawn_anchored(policy, self.cwd, &writes, spawn)?;
        (c, Some(report), Some(anchor))
      }
      Some(policy) => {
        let (c, report) = crate::sandbox::spawn_in(policy, self.cwd, &writes, spawn)?;
        (c, Some(report), None)
      }
    };
    ticket.register(pid);
    guard.set_leader(pid);
    Ok(Spawned {
      child,
      pid,
      mark,
      guard,
      sandbox,
      anchor,
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
