//! `spawnCall` and `executeStreaming`: run a command (no shell) or code and
//! stream its output to callbacks; the promise is the handle's `exited`
//! (see `subprocess.rs`, whose machinery they share).

use exec_core::language::{self, Language, Launch};
use exec_core::process::spec::{check_cwd, explain_spawn_failure, program_for_spawn};
use exec_core::process::supervise::{canceled_before_start, ProcessSpec};
use exec_core::{ExecError, TsPath};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::abort::AbortBinding;
use crate::call;
use crate::host;
use crate::options::{SpawnOptions, SpawnResult, StreamRun};
use crate::read::{self, ArgResult, At};
use crate::subprocess::{failed, settle, start, streaming, Streaming};

/// The options and callbacks of `spawnCall` / `executeStreaming`, read.
fn read_streaming<'env>(
  env: &'env Env,
  options: Option<Unknown<'env>>,
  on_stdout: Option<Unknown<'env>>,
  on_stderr: Option<Unknown<'env>>,
) -> ArgResult<(Streaming, Option<AbortBinding>, TsPath)> {
  let at = At::arg("options");
  let o: SpawnOptions = read::optional(options, &at)?.unwrap_or_default();
  let mut r = StreamRun::try_from(o)?;
  r.on_stdout.0 = read::optional(on_stdout, &r.on_stdout.1)?;
  r.on_stderr.0 = read::optional(on_stderr, &r.on_stderr.1)?;
  let ts = r.ts;
  let (st, binding) = streaming(env, r, &at)?;
  Ok((st, binding, ts))
}

/// Spawn what `prepare` resolves to (on the runtime: preparing may write a
/// temp file) and stream its output; settle on the JS thread.
/// A spawn's failure goes through `explain` (see
/// `exec_core::process::spec::explain_spawn_failure`).
async fn stream_run<P, X>(st: Streaming, prepare: P, explain: X) -> SpawnResult
where
  P: FnOnce() -> std::result::Result<Launch, ExecError> + Send + 'static,
  X: FnOnce(ExecError) -> ExecError + Send + 'static,
{
  let Streaming {
    process,
    run,
    owner,
    out,
    err,
    cancel,
  } = st;
  // an already aborted signal: nothing is spawned
  if cancel.is_cancelled() {
    return failed(canceled_before_start());
  }
  let launch = match prepare() {
    Err(e) => return failed(e),
    Ok(l) => l,
  };
  // aborted while it was prepared
  if cancel.is_cancelled() {
    return failed(canceled_before_start());
  }
  let (exec, policy) = match start(launch.spec, (process, run, owner), false, out, err) {
    Err(e) => return failed(explain(e)),
    Ok(s) => s,
  };
  let r = settle(exec, policy, cancel).await;
  drop(launch.temp);
  r
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
  exec_core::trace::at("js.enter");
  let args = (|| -> ArgResult<_> {
    let command: String = read::required(command, &At::arg("command"))?;
    let argv: Option<Vec<String>> = read::optional(argv, &At::arg("args"))?;
    let (st, binding, _) = read_streaming(env, options, on_stdout, on_stderr)?;
    Ok(((command, argv.unwrap_or_default(), st), binding))
  })();
  call::abortable(
    env,
    args,
    |(command, argv, st)| {
      let cwd = st.process.cwd().to_path_buf();
      let path = st.process.env.path_var();
      let sandboxed = st.process.sandbox.is_some();
      let (cwd2, path2, command2) = (cwd.clone(), path.clone(), command.clone());
      stream_run(
        st,
        move || {
          let program = program_for_spawn(&command, path.as_ref(), &cwd, sandboxed)?;
          let mut spec = ProcessSpec::new(program);
          spec.args = argv.into_iter().map(Into::into).collect();
          Ok(Launch { spec, temp: None })
        },
        move |e| explain_spawn_failure(&command2, path2.as_ref(), &cwd2, e),
      )
    },
    |_, r| Ok(r),
  )
}

/// Run code like `executeAndCapture`, but stream the output to callbacks as
/// `spawnCall` does instead of capturing it (no cap: every byte is delivered).
#[napi(
  ts_args_type = "code: string, language: 'bash' | 'javascript' | 'typescript' | 'python' | 'powershell' | 'cmd', options?: SpawnOptions | null, onStdout?: ((data: any) => void) | null, onStderr?: ((data: any) => void) | null",
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
  let args = (|| -> ArgResult<_> {
    let code: String = read::required(code, &At::arg("code"))?;
    let language: String = read::required(language, &At::arg("language"))?;
    let (st, binding, ts) = read_streaming(env, options, on_stdout, on_stderr)?;
    Ok(((code, language, ts, st), binding))
  })();
  call::abortable(
    env,
    args,
    |(code, language, ts, st)| {
      let cwd = st.process.cwd().to_path_buf();
      let child_env = st.process.env.clone();
      let no_unix = st.process.sandbox.as_ref().is_some_and(|s| !s.network);
      stream_run(
        st,
        move || {
          let lang: Language = language.parse()?;
          check_cwd(&cwd)?;
          language::prepare_with(
            lang,
            &code,
            &cwd,
            &child_env,
            host::toolchain(),
            ts,
            no_unix,
          )
        },
        |e| e,
      )
    },
    |_, r| Ok(r),
  )
}
