//! The sandbox of a spawn: its command line (the sandbox helper, or macOS's
//! `sandbox-exec`, in front of the program) or, where no namespace is made
//! and the child runs a step before exec anyway, the program itself and the
//! restriction the child applies (Landlock + seccomp, no helper between
//! them). See [`crate::process::sandbox::launch`]. A sandboxed spawn only
//! ever runs the command line made here (fail closed).

use super::command::Line;
use super::{ChildCommand, ChildSetup};
use crate::error::{ErrorCode, ExecError};
use crate::process::sandbox::{InChild, Invocation, SandboxReport};

/// What the sandbox made of a spawn (all `None` without one).
pub(super) struct Sandboxed {
  pub invocation: Option<Invocation>,
  pub report: Option<SandboxReport>,
  pub restriction: Option<InChild>,
}

/// The sandbox's command line for `cmd` and its report; the restriction
/// for the child when `in_child` allows it (no namespaces).
pub(super) fn apply(
  setup: &ChildSetup,
  cmd: &ChildCommand,
  in_child: bool,
) -> Result<Sandboxed, ExecError> {
  let Some(policy) = setup.sandbox else {
    return Ok(Sandboxed {
      invocation: None,
      report: None,
      restriction: None,
    });
  };
  let plain = Invocation {
    program: cmd.program.to_path_buf(),
    argv0: cmd.argv0.map(ToOwned::to_owned),
    args: cmd.args.to_vec(),
  };
  let (inv, report, restriction) =
    crate::process::sandbox::launch(policy, setup.cwd, plain, cmd.env.path_var(), in_child)?;
  Ok(Sandboxed {
    invocation: Some(inv),
    report: Some(report),
    restriction,
  })
}

/// The command line the child execs: `cmd`'s own without a sandbox, the
/// sandbox's with one. A sandboxed spawn without the sandbox's command line
/// and report is refused: nothing runs.
pub(super) fn line<'a>(
  setup: &ChildSetup,
  cmd: &ChildCommand<'a>,
  invocation: Option<&'a Invocation>,
  report: Option<&SandboxReport>,
) -> Result<Line<'a>, ExecError> {
  match (setup.sandbox, invocation, report) {
    (None, _, _) => Ok(Line {
      program: cmd.program,
      argv0: cmd.argv0,
      args: cmd.args,
    }),
    (Some(_), Some(inv), Some(_)) => Ok(Line {
      program: &inv.program,
      argv0: inv.argv0.as_deref(),
      args: &inv.args,
    }),
    (Some(_), _, _) => Err(ExecError::new(
      ErrorCode::ESANDBOX,
      "sandbox: the command line was not made by the sandbox (nothing ran)",
    )),
  }
}
