//! `spawnCall`: run a command (no shell) and stream its output to callbacks.

use std::time::Duration;

use exec_core::language::{self, Language, Launch};
use exec_core::run::{run, ProcessSpec};
use exec_core::spawn::{check_cwd, resolve_program};
use exec_core::{CancellationToken, ExecError};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::abort;
use crate::args::{self, ArgResult};
use crate::capture::common_options;
use crate::error::{reject_type_error, type_error};
use crate::host;
use crate::options::SpawnResult;
use crate::stream::{CallbackSink, StringCallback};

const DEFAULT_INTERVAL_MS: u64 = 10;

pub(crate) fn callback(v: Option<Unknown>, name: &str) -> ArgResult<Option<StringCallback>> {
  let Some(v) = v else { return Ok(None) };
  if args::is_nullish(&v) {
    return Ok(None);
  }
  if v.get_type().ok() != Some(napi::ValueType::Function) {
    return Err(type_error(format!("{name} must be a function")));
  }
  let f: Function<crate::text::JsText, Unknown> =
    unsafe { v.cast() }.map_err(|e| type_error(e.to_string()))?;
  let tsfn = f
    .build_threadsafe_function()
    .weak::<true>()
    .callee_handled::<false>()
    .build()
    .map_err(|e| type_error(e.to_string()))?;
  // SAFETY of the lifetime: the function is referenced by the threadsafe function
  let tsfn: StringCallback = unsafe { std::mem::transmute(tsfn) };
  Ok(Some(tsfn))
}

fn string_args(v: Option<Unknown>) -> ArgResult<Vec<String>> {
  let Some(v) = v else { return Ok(Vec::new()) };
  if args::is_nullish(&v) {
    return Ok(Vec::new());
  }
  args::string_array(&v, "args")
}

fn failed(e: ExecError) -> SpawnResult {
  SpawnResult {
    exit_code: -1,
    signal: Either::B(Null),
    timed_out: false,
    canceled: false,
    execution_time: 0.0,
    pid: 0,
    stdout_bytes: 0.0,
    stderr_bytes: 0.0,
    error_code: Some(e.code.as_str().to_owned()),
    error: Some(e.message()),
  }
}

/// Everything a streaming run needs, read from the arguments.
struct Streaming {
  common: crate::capture::CommonOptions,
  interval: Duration,
  out_cb: Option<StringCallback>,
  err_cb: Option<StringCallback>,
  cancel: CancellationToken,
  binding: Option<abort::AbortBinding>,
}

fn streaming_args(
  env: &Env,
  options: Option<Unknown>,
  on_stdout: Option<Unknown>,
  on_stderr: Option<Unknown>,
) -> ArgResult<Streaming> {
  let opts = args::options(options, "options")?;
  let common = common_options(opts.as_ref())?;
  let interval = args::opt_ms(opts.as_ref(), "callbackIntervalMs", DEFAULT_INTERVAL_MS)?;
  let out_cb = callback(on_stdout, "onStdout")?;
  let err_cb = callback(on_stderr, "onStderr")?;
  let cancel = CancellationToken::new();
  let binding = abort::bind(env, opts.as_ref(), &cancel)?;
  Ok(Streaming {
    common,
    interval,
    out_cb,
    err_cb,
    cancel,
    binding,
  })
}

/// Spawn what `prepared` resolved to and stream its output; settle on the JS thread.
fn stream_run<'env>(
  env: &'env Env,
  st: Streaming,
  prepared: std::result::Result<Launch, ExecError>,
) -> Result<PromiseRaw<'env, SpawnResult>> {
  let Streaming {
    common,
    interval,
    out_cb,
    err_cb,
    cancel,
    binding,
  } = st;
  let fut = async move {
    let launch = match prepared {
      Err(e) => return Ok(failed(e)),
      Ok(l) => l,
    };
    let mut spec = launch.spec;
    let policy = common.apply_to(&mut spec);
    let out = CallbackSink::new(out_cb, interval);
    let err = CallbackSink::new(err_cb, interval);
    let result = run(&spec, &policy, out, err, &cancel).await;
    drop(launch.temp);
    let f = match result {
      Err(e) => return Ok(failed(e)),
      Ok(f) => f,
    };
    let o = f.outcome;
    Ok(SpawnResult {
      exit_code: o.exit_code,
      signal: crate::options::nullable(o.signal),
      timed_out: o.timed_out,
      canceled: o.canceled,
      execution_time: o.duration.as_secs_f64() * 1000.0,
      pid: o.pid,
      stdout_bytes: o.stdout_bytes as f64,
      stderr_bytes: o.stderr_bytes as f64,
      error_code: o.error.as_ref().map(|e| e.code.as_str().to_owned()),
      error: o.error.map(|e| e.message()),
    })
  };
  env.spawn_future_with_callback(fut, move |env, r: SpawnResult| {
    if let Some(b) = binding {
      b.detach(env);
    }
    Ok(r)
  })
}

/// Run `command` (looked up in PATH, no shell) with `args`, streaming output to
/// `onStdout`/`onStderr` as strings decoded on UTF-8 boundaries, in order,
/// coalesced, every byte delivered before the promise resolves. A callback
/// that throws does not stop the run. Never rejects for a failure of the run:
/// check `exitCode`, `errorCode`.
#[napi(
  ts_args_type = "command: string, args: string[], options?: SpawnOptions | null, onStdout?: ((data: string) => void) | null, onStderr?: ((data: string) => void) | null",
  ts_return_type = "Promise<SpawnResult>"
)]
pub fn spawn_call<'env>(
  env: &'env Env,
  command: Unknown<'env>,
  argv: Option<Unknown<'env>>,
  options: Option<Unknown<'env>>,
  on_stdout: Option<Unknown<'env>>,
  on_stderr: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, SpawnResult>> {
  let parsed = (|| -> ArgResult<_> {
    let command = args::string(&command, "command")?;
    let argv = string_args(argv)?;
    Ok((
      command,
      argv,
      streaming_args(env, options, on_stdout, on_stderr)?,
    ))
  })();
  let (command, argv, st) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let prepared = (|| -> std::result::Result<Launch, ExecError> {
    check_cwd(&st.common.cwd)?;
    let program = resolve_program(&command, st.common.env.path_var().as_ref(), &st.common.cwd)?;
    let mut spec = ProcessSpec::new(program);
    spec.args = argv.into_iter().map(Into::into).collect();
    Ok(Launch { spec, temp: None })
  })();
  stream_run(env, st, prepared)
}

/// Run code like `executeAndCapture`, but stream the output to callbacks as
/// `spawnCall` does instead of capturing it (no cap: every byte is delivered).
#[napi(
  ts_args_type = "code: string, language: 'bash' | 'javascript' | 'typescript' | 'python', options?: SpawnOptions | null, onStdout?: ((data: string) => void) | null, onStderr?: ((data: string) => void) | null",
  ts_return_type = "Promise<SpawnResult>"
)]
pub fn execute_streaming<'env>(
  env: &'env Env,
  code: Unknown<'env>,
  language: Unknown<'env>,
  options: Option<Unknown<'env>>,
  on_stdout: Option<Unknown<'env>>,
  on_stderr: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, SpawnResult>> {
  let parsed = (|| -> ArgResult<_> {
    let code = args::string(&code, "code")?;
    let language = args::string(&language, "language")?;
    let ts = crate::typescript::ts_path(args::options(options, "options")?.as_ref())?;
    Ok((
      code,
      language,
      ts,
      streaming_args(env, options, on_stdout, on_stderr)?,
    ))
  })();
  let (code, language, ts, st) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let prepared = (|| -> std::result::Result<Launch, ExecError> {
    let lang: Language = language.parse()?;
    check_cwd(&st.common.cwd)?;
    language::prepare_with(
      lang,
      &code,
      &st.common.cwd,
      &st.common.env,
      host::toolchain(),
      ts,
    )
  })();
  stream_run(env, st, prepared)
}
