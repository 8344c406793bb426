//! The runs of a program: each API's options converted once into the core's
//! `ProcessOptions` (its cwd resolved: the host's when absent) and
//! `RunOptions` (the timeout and its kill grace, the input, the output cap),
//! plus what stays in the binding (the signal, the encoding, the callbacks).
//! `executeAndCapture` / `captureCall` take [`CaptureRun`]; `spawnCall`,
//! `executeStreaming` and `spawn` take [`StreamRun`].

use std::time::Duration;

use exec_core::{ExecError, ProcessFields, ProcessOptions, RunFields, RunOptions, TsPath};

use super::{ExecuteOptions, SpawnOptions};
use crate::read::{ArgResult, At, Input, JsFn, JsSignal, Ms, Size, Timeout};
use crate::subprocess::{SubprocessOptions, DEFAULT_INTERVAL};

/// Where `spawn`'s options are, for the paths of its callbacks.
static OPTIONS: At<'static> = At::arg("options");

/// The process fields checked, the cwd resolved (ENOENT when the host's
/// own directory is gone).
fn process(fields: ProcessFields) -> ArgResult<ProcessOptions> {
  let mut process = ProcessOptions::try_from(fields)?;
  process.resolve_cwd()?;
  Ok(process)
}

/// The core's [`RunOptions`] from what the options gave over `d`, the
/// API's defaults (`spawn`: no timeout, as with Node's).
fn run(
  d: RunOptions,
  timeout: Option<Timeout>,
  grace: Option<Ms>,
  input: Option<Input>,
  cap: Option<Size>,
) -> RunOptions {
  RunFields {
    timeout: timeout.map(|t| t.0),
    kill_grace: grace.map(|g| g.0),
    input: input.map(|i| i.0),
    max_output_bytes: cap.map(|s| s.0),
  }
  .over(&d)
}

/// The options of `executeAndCapture` and `captureCall`, converted.
pub struct CaptureRun<'env> {
  pub process: ProcessOptions,
  /// The timeout (30 s), the grace, the input, `maxOutputBytes`.
  pub run: RunOptions,
  pub signal: Option<JsSignal<'env>>,
  /// `encoding: 'buffer'`.
  pub raw: bool,
  pub ts: TsPath,
}

impl<'env> TryFrom<ExecuteOptions<'env>> for CaptureRun<'env> {
  type Error = ExecError;

  fn try_from(mut o: ExecuteOptions<'env>) -> ArgResult<Self> {
    let process = process(o.process())?;
    Ok(CaptureRun {
      process,
      run: run(
        RunOptions::default(),
        o.timeout,
        o.force_kill_after_delay,
        o.input,
        o.max_output_bytes,
      ),
      signal: o.signal,
      raw: o.encoding.unwrap_or_default().raw,
      ts: o.typescript.map_or(TsPath::Auto, |t| t.0),
    })
  }
}

/// The options of a streaming run (`spawnCall`, `executeStreaming`,
/// `spawn`), converted; the output callbacks and where they were found.
pub struct StreamRun<'env> {
  pub process: ProcessOptions,
  /// The timeout (30 s; `spawn`: none), the grace, the input.
  pub run: RunOptions,
  pub signal: Option<JsSignal<'env>>,
  /// `callbackIntervalMs`.
  pub interval: Duration,
  /// `encoding: 'buffer'`.
  pub raw: bool,
  pub ts: TsPath,
  /// `spawn`'s `stdin: 'pipe'`.
  pub piped: bool,
  /// The callbacks, from the arguments (`spawnCall`, set by the caller) or
  /// the options (`spawn`), and where they were found.
  pub on_stdout: (Option<JsFn<'env>>, At<'static>),
  pub on_stderr: (Option<JsFn<'env>>, At<'static>),
}

impl<'env> TryFrom<SpawnOptions<'env>> for StreamRun<'env> {
  type Error = ExecError;

  fn try_from(mut o: SpawnOptions<'env>) -> ArgResult<Self> {
    let process = process(o.process())?;
    Ok(StreamRun {
      process,
      run: run(
        RunOptions::default(),
        o.timeout,
        o.force_kill_after_delay,
        o.input,
        None,
      ),
      signal: o.signal,
      interval: o.callback_interval_ms.map_or(DEFAULT_INTERVAL, |m| m.0),
      raw: o.encoding.unwrap_or_default().raw,
      ts: o.typescript.map_or(TsPath::Auto, |t| t.0),
      piped: false,
      on_stdout: (None, At::arg("onStdout")),
      on_stderr: (None, At::arg("onStderr")),
    })
  }
}

impl<'env> TryFrom<SubprocessOptions<'env>> for StreamRun<'env> {
  type Error = ExecError;

  /// `onError` is taken out before (it is not a run's).
  fn try_from(mut o: SubprocessOptions<'env>) -> ArgResult<Self> {
    let process = process(o.process())?;
    Ok(StreamRun {
      process,
      run: run(
        RunOptions::untimed(),
        o.timeout,
        o.force_kill_after_delay,
        o.input,
        None,
      ),
      signal: o.signal,
      interval: o.callback_interval_ms.map_or(DEFAULT_INTERVAL, |m| m.0),
      raw: o.encoding.unwrap_or_default().raw,
      ts: TsPath::Auto,
      piped: o.stdin.is_some_and(|s| s.piped),
      on_stdout: (o.on_stdout, OPTIONS.key("onStdout")),
      on_stderr: (o.on_stderr, OPTIONS.key("onStderr")),
    })
  }
}
