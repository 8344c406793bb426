//! The command runner's options (`runCommand`, `new CommandRunner()`, its
//! `run` and `start`), converted once into the core's: a call's
//! `CallOptions` (the process fields as given, the run fields as given: the
//! timeout, the answer's bytes; the lines and the truncation) merged over
//! the runner's `CommandDefaults` (its `run` holds the runner's
//! `forceKillAfterDelay`) by the core (`CommandDefaults::merge`). The
//! process fields move out as the core's `ProcessFields`, the one route of
//! every API's; the run fields as the core's `RunFields`.

use std::path::PathBuf;

use exec_core::command::{self as core, CallOptions, CommandDefaults, CommandSpec, RunnerConfig};
use exec_core::RunFields;
use napi::bindgen_prelude::*;

use crate::command::{CommandOptions, CommandRunnerOptions, StartCommandOptions};
use crate::host;
use crate::read::{self, ArgResult, At};

/// `options.truncation`: `'tail'` or `'head_tail'`.
fn read_truncation(given: Option<&str>) -> ArgResult<Option<core::TruncationMode>> {
  given
    .map(|s| {
      s.parse()
        .map_err(|e: exec_core::error::ExecError| At::arg("options.truncation").error(e.what))
    })
    .transpose()
}

impl TryFrom<CommandOptions> for CallOptions {
  type Error = exec_core::ExecError;

  fn try_from(mut o: CommandOptions) -> ArgResult<Self> {
    Ok(CallOptions {
      process: o.process(),
      run: RunFields {
        timeout: o.timeout.map(|t| t.0),
        max_output_bytes: o.max_bytes.map(|n| n.0),
        ..RunFields::default()
      },
      max_lines: o.max_lines.map(|n| n.0),
      truncation: read_truncation(o.truncation.as_deref())?,
      output_dir: o.output_dir.map(PathBuf::from),
      background: o.background,
      cleanup: o.cleanup,
    })
  }
}

/// The options of one `run` (at `options`) over the runner's.
pub fn read_command_options(
  options: Option<Unknown>,
  d: &CommandDefaults,
) -> ArgResult<CommandSpec> {
  let o: CommandOptions = read::optional(options, &At::arg("options"))?.unwrap_or_default();
  d.merge(
    CallOptions::try_from(o)?,
    exec_core::process::options::host_cwd,
  )
}

/// The options of `new CommandRunner()`: the defaults of its calls and the
/// runner's own settings.
pub fn read_runner_options(options: Option<Unknown>) -> ArgResult<(CommandDefaults, RunnerConfig)> {
  let mut o: CommandRunnerOptions =
    read::optional(options, &At::arg("options"))?.unwrap_or_default();
  let d = RunnerConfig::default();
  let config = RunnerConfig {
    owner: host::owner(),
    output_dir: o.output_dir.take().map_or(d.output_dir, PathBuf::from),
    retention: o.retention.map_or(d.retention, |t| t.0),
    stateful: o.stateful.unwrap_or(false),
    shell: match o.shell.as_deref() {
      None => d.shell,
      Some(name) => exec_core::command::Shell::parse(name).map_err(|_| {
        At::arg("options").key("shell").error(format_args!(
          "must be 'bash', 'powershell' or 'cmd', got '{name}'"
        ))
      })?,
    },
  };
  if config.stateful && config.shell != exec_core::command::Shell::Bash {
    return Err(At::arg("options").key("stateful").error(format_args!(
      "needs shell 'bash': {} runs each command in its own process",
      config.shell.name()
    )));
  }
  let defaults = CommandDefaults::new(CallOptions {
    process: o.process(),
    // the grace of every kill of the runner's commands and their jobs
    run: RunFields {
      timeout: o.timeout.map(|t| t.0),
      kill_grace: o.force_kill_after_delay.map(|m| m.0),
      max_output_bytes: o.max_bytes.map(|n| n.0),
      ..RunFields::default()
    },
    max_lines: o.max_lines.map(|n| n.0),
    truncation: read_truncation(o.truncation.as_deref())?,
    ..Default::default()
  })?;
  Ok((defaults, config))
}

/// The options of `CommandRunner.start` over the runner's.
pub fn read_start_options(
  options: Option<Unknown>,
  d: &CommandDefaults,
) -> ArgResult<core::StartOptions> {
  let mut o: StartCommandOptions =
    read::optional(options, &At::arg("options"))?.unwrap_or_default();
  let call = CallOptions {
    process: o.process(),
    run: RunFields {
      max_output_bytes: o.max_bytes.map(|n| n.0),
      ..RunFields::default()
    },
    max_lines: o.max_lines.map(|n| n.0),
    truncation: read_truncation(o.truncation.as_deref())?,
    ..Default::default()
  };
  let base = d.merge(call, exec_core::process::options::host_cwd)?;
  let limits = base.limits();
  let mut s = core::StartOptions::with_process(base.process);
  s.cwd_given = base.cwd_given;
  s.limits = limits;
  if let Some(y) = o.yield_ms {
    s.yield_time = y.0;
  }
  s.tty = o.tty.unwrap_or(s.tty);
  s.rows = o.rows.map_or(s.rows, |n| n.0);
  s.cols = o.cols.map_or(s.cols, |n| n.0);
  Ok(s)
}
