//! The run's limits and parent death: the limit guard (its cgroups are made
//! here) and the plan the child applies before exec (resource limits, a
//! move into the cgroups, the parent-death signal). No plan: nothing runs
//! in the child for them, so a plain spawn keeps its fast path.

use super::ChildSetup;
use crate::error::ExecError;
use crate::process::limits::{ChildPlan, LimitGuard};

/// The guard of the tree marked `mark` and the child's plan.
pub(super) fn prepare(
  setup: &ChildSetup,
  mark: &str,
) -> Result<(LimitGuard, Option<ChildPlan>), ExecError> {
  // the sandbox helper and its init (with namespaces) are two processes of
  // ours in the tree: not the run's
  let helpers = match setup.sandbox {
    Some(_) if cfg!(target_os = "linux") && crate::process::sandbox::namespaces().is_ok() => 2,
    _ => 0,
  };
  let guard = LimitGuard::with_helpers(setup.limits, mark, helpers);
  let plan = guard.child_plan(setup.die_with_parent)?;
  Ok((guard, plan))
}
