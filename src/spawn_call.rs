//! `spawnCall` and `executeStreaming`: run a command (no shell) or code and
//! stream its output to callbacks; the promise is the handle's `exited`
//! (see `subprocess.rs`, whose machinery they share).

use exec_core::language::{self, Language, Launch};
use exec_core::process::spec::{check_cwd, resolve_program};
use exec_core::process::supervise::ProcessSpec;
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{self, ArgResult};
use crate::capture::DEFAULT_TIMEOUT_MS;
use crate::error::reject_type_error;
use crate::host;
use crate::options::SpawnResult;
use crate::subprocess::{failed, settle, start, streaming_args, Streaming};

fn read_streaming<'env>(
  env: &'env Env,
  options: Option<Unknown<'env>>,
  on_stdout: Option<Unknown<'env>>,
  on_stderr: Option<Unknown<'env>>,
) -> ArgResult<Streaming> {
  let opts = args::options(options, "options")?;
  streaming_args(env, opts.as_ref(), DEFAULT_TIMEOUT_MS, on_stdout, on_stderr)
}

/// Spawn what `prepared` resolved to (on the runtime: preparing may have
/// written a temp file) and stream its output; settle on the JS thread.
fn stream_run<'env, P>(
  env: &'env Env,
  st: Streaming,
  prepare: P,
) -> Result<PromiseRaw<'env, SpawnResult>>
where
  P: FnOnce() -> std::result::Result<Launch, ExecError> + Send + 'static,
{
  let Streaming {
    common,
    out,
    err,
    cancel,
    binding,
  } = st;
  let fut = async move {
    let launch = match prepare() {
      Err(e) => return Ok(failed(e)),
      Ok(l) => l,
    };
    let (exec, policy) = match start(launch.spec, common, false, out, err) {
      Err(e) => return Ok(failed(e)),
      Ok(s) => s,
    };
    let r = settle(exec, policy, cancel).await;
    drop(launch.temp);
    Ok(r)
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
  ts_args_type = "command: string, args: string[], options?: SpawnOptions | null, onStdout?: ((data: any) => void) | null, onStderr?: ((data: any) => void) | null",
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
    let argv = args::opt_string_array(argv, "args")?;
    Ok((
      command,
      argv,
      read_streaming(env, options, on_stdout, on_stderr)?,
    ))
  })();
  let (command, argv, st) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let cwd = st.common.cwd.clone();
  let path = st.common.env.path_var();
  stream_run(env, st, move || {
    check_cwd(&cwd)?;
    let program = resolve_program(&command, path.as_ref(), &cwd)?;
    let mut spec = ProcessSpec::new(program);
    spec.args = argv.into_iter().map(Into::into).collect();
    Ok(Launch { spec, temp: None })
  })
}

/// Run code like `executeAndCapture`, but stream the output to callbacks as
/// `spawnCall` does instead of capturing it (no cap: every byte is delivered).
#[napi(
  ts_args_type = "code: string, language: 'bash' | 'javascript' | 'typescript' | 'python', options?: SpawnOptions | null, onStdout?: ((data: any) => void) | null, onStderr?: ((data: any) => void) | null",
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
      read_streaming(env, options, on_stdout, on_stderr)?,
    ))
  })();
  let (code, language, ts, st) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let cwd = st.common.cwd.clone();
  let child_env = st.common.env.clone();
  stream_run(env, st, move || {
    let lang: Language = language.parse()?;
    check_cwd(&cwd)?;
    language::prepare_with(lang, &code, &cwd, &child_env, host::toolchain(), ts)
  })
}
