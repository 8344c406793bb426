//! `executeAndCapture`: run code in a language, capture both streams into
//! head+tail buffers, resolve with a structured result.

use exec_core::buffer::HeadTailBuffer;
use exec_core::language::{self, Language};
use exec_core::process::supervise::{run, ProcessSpec, RunPolicy};
use exec_core::{CancellationToken, ErrorCode, ExecError, ProcessOptions, RunOptions};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::abort::{self, AbortBinding};
use crate::call;
use crate::host;
use crate::options::{CaptureRun, CapturedExecutionResult, ExecuteOptions};
use crate::read::{self, ArgResult, At};
use crate::text::JsText;

/// The options of `executeAndCapture` and `captureCall`, read and converted.
struct CaptureArgs {
  process: ProcessOptions,
  run: RunOptions,
  raw: bool,
  ts: exec_core::TsPath,
  /// The environment that owns the run (read on the JS thread).
  owner: u64,
  cancel: CancellationToken,
}

fn capture_args(
  env: &Env,
  options: Option<Unknown>,
) -> ArgResult<(CaptureArgs, Option<AbortBinding>)> {
  let at = At::arg("options");
  let o: ExecuteOptions = read::optional(options, &at)?.unwrap_or_default();
  let c = CaptureRun::try_from(o)?;
  let cancel = CancellationToken::new();
  let binding = abort::bind(env, c.signal, &at.key("signal"), &cancel)?;
  let args = CaptureArgs {
    process: c.process,
    run: c.run,
    raw: c.raw,
    ts: c.ts,
    owner: host::owner(),
    cancel,
  };
  Ok((args, binding))
}

/// What the future hands back to the JS thread.
pub struct Captured {
  pub stdout: Vec<u8>,
  pub stderr: Vec<u8>,
  pub exit_code: i32,
  pub execution_time: f64,
  pub timed_out: bool,
  pub canceled: bool,
  pub signal: Option<String>,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  pub truncated: bool,
  pub error: Option<ExecError>,
  pub pid: u32,
  pub sandbox: Option<exec_core::process::sandbox::SandboxReport>,
}

impl Captured {
  /// A run that never started (`canceled` when an aborted signal stopped it).
  pub fn failed(error: ExecError) -> Self {
    Captured {
      canceled: error.code == ErrorCode::ECANCELED,
      stdout: Vec::new(),
      stderr: Vec::new(),
      exit_code: -1,
      execution_time: 0.0,
      timed_out: false,
      signal: None,
      stdout_bytes: 0,
      stderr_bytes: 0,
      truncated: false,
      error: Some(error),
      pid: 0,
      sandbox: None,
    }
  }

  pub fn into_js(mut self, raw: bool) -> CapturedExecutionResult {
    let (stdout, stderr) = if raw {
      (
        Either::B(Buffer::from(std::mem::take(&mut self.stdout))),
        Either::B(Buffer::from(std::mem::take(&mut self.stderr))),
      )
    } else {
      let out = String::from_utf8(std::mem::take(&mut self.stdout));
      let err = String::from_utf8(std::mem::take(&mut self.stderr));
      let binary = out.is_err() || err.is_err();
      let lossy = |r: std::result::Result<String, std::string::FromUtf8Error>| match r {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
      };
      if binary && self.error.is_none() {
        self.error = Some(ExecError::new(
          ErrorCode::EBINARY,
          "output is not valid UTF-8 (shown lossily; use encoding: 'buffer' for the raw bytes)",
        ));
      }
      (
        Either::A(JsText::new(lossy(out))),
        Either::A(JsText::new(lossy(err))),
      )
    };
    let (error, error_code) = (
      call::error_message(&self.error),
      call::error_code(&self.error),
    );
    CapturedExecutionResult {
      stdout,
      stderr,
      exit_code: self.exit_code,
      execution_time: self.execution_time,
      success: self.exit_code == 0 && self.error.is_none(),
      timed_out: self.timed_out,
      canceled: self.canceled,
      signal: crate::options::nullable(self.signal),
      stdout_bytes: self.stdout_bytes as f64,
      stderr_bytes: self.stderr_bytes as f64,
      truncated: self.truncated,
      error,
      error_code,
      pid: self.pid,
      sandbox: self.sandbox.map(Into::into),
    }
  }
}

/// Run `spec` for `owner`, capturing both streams with its
/// `run.max_output_bytes` each.
/// A spawn's failure goes through `explain` (see
/// `exec_core::process::spec::explain_spawn_failure`).
pub async fn capture(
  spec: ProcessSpec,
  owner: u64,
  cancel: CancellationToken,
  explain: impl FnOnce(ExecError) -> ExecError,
) -> Captured {
  let cap = spec.run.max_output_bytes;
  let policy = RunPolicy {
    owner,
    ..RunPolicy::default()
  };
  match run(
    &spec,
    &policy,
    HeadTailBuffer::new(cap),
    HeadTailBuffer::new(cap),
    &cancel,
  )
  .await
  {
    Err(e) => Captured::failed(explain(e)),
    Ok(f) => {
      let out = f.stdout.render();
      let err = f.stderr.render();
      let mut o = f.outcome;
      if o.sandbox.is_some() {
        o.judge_sandbox(&[
          &String::from_utf8_lossy(&err.bytes),
          &String::from_utf8_lossy(&out.bytes),
        ]);
      }
      Captured {
        truncated: out.truncated || err.truncated,
        stdout: out.bytes,
        stderr: err.bytes,
        exit_code: o.exit_code,
        execution_time: o.duration.as_secs_f64() * 1000.0,
        timed_out: o.timed_out,
        canceled: o.canceled,
        signal: o.signal,
        stdout_bytes: o.stdout_bytes,
        stderr_bytes: o.stderr_bytes,
        error: o.error,
        pid: o.pid,
        sandbox: o.sandbox,
      }
    }
  }
}

/// Run code in a fresh process and resolve with everything it printed.
///
/// Languages: `'bash'` (on Windows Git for Windows' bash), `'javascript'`
/// (node), `'typescript'` (tsx: the caller's `<cwd>/node_modules/.bin/tsx`,
/// else the bundled one), `'python'` (python3; on Windows `python` or `py
/// -3`), `'powershell'` (pwsh, else powershell), `'cmd'` (Windows' cmd.exe).
/// Never rejects for a failure of the run itself: check `success`,
/// `errorCode`. Rejects with a TypeError (code `EINVAL`) for arguments of the
/// wrong type.
#[napi(
  ts_args_type = "code: string, language: 'bash' | 'javascript' | 'typescript' | 'python' | 'powershell' | 'cmd', options?: ExecuteOptions",
  ts_return_type = "Promise<CapturedExecutionResult>"
)]
pub fn execute_and_capture<'env>(
  env: &'env Env,
  code: Unknown<'env>,
  language: Unknown<'env>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CapturedExecutionResult>> {
  let args = (|| -> ArgResult<_> {
    let code: String = read::required(code, &At::arg("code"))?;
    let language: String = read::required(language, &At::arg("language"))?;
    let (a, binding) = capture_args(env, options)?;
    Ok(((code, language, a), binding))
  })();
  call::abortable(
    env,
    args,
    |(code, language, a)| async move {
      // errors before execution resolve with success: false; preparing (a
      // temp file, the TypeScript strip) happens here, off the JS thread
      let prepared = (|| -> std::result::Result<_, ExecError> {
        let lang: Language = language.parse()?;
        exec_core::process::spec::check_cwd(a.process.cwd())?;
        language::prepare_with(
          lang,
          &code,
          a.process.cwd(),
          &a.process.env,
          host::toolchain(),
          a.ts,
          a.process.sandbox.as_ref().is_some_and(|s| !s.network),
        )
      })();
      let launch = match prepared {
        Err(e) => return Captured::failed(e).into_js(a.raw),
        Ok(l) => l,
      };
      let mut spec = launch.spec;
      spec.process = a.process;
      spec.run = a.run;
      let captured = capture(spec, a.owner, a.cancel, |e| e).await;
      drop(launch.temp);
      // decoded here, off the JS thread
      captured.into_js(a.raw)
    },
    |_, result| Ok(result),
  )
}

/// Run `command` (looked up in PATH, no shell) with `args` and resolve with
/// everything it printed, capped as `executeAndCapture` caps it (head + tail
/// per stream, `[Output truncated]` in between). Never rejects for a failure
/// of the run itself; rejects with a TypeError (code `EINVAL`) for arguments
/// of the wrong type.
#[napi(
  ts_args_type = "command: string, args?: string[] | null, options?: ExecuteOptions | null",
  ts_return_type = "Promise<CapturedExecutionResult>"
)]
pub fn capture_call<'env>(
  env: &'env Env,
  command: Unknown<'env>,
  argv: Option<Unknown<'env>>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CapturedExecutionResult>> {
  exec_core::trace::at("js.enter");
  let args = (|| -> ArgResult<_> {
    let command: String = read::required(command, &At::arg("command"))?;
    let argv: Option<Vec<String>> = read::optional(argv, &At::arg("args"))?;
    let (a, binding) = capture_args(env, options)?;
    Ok(((command, argv.unwrap_or_default(), a), binding))
  })();
  call::abortable(
    env,
    args,
    |(command, argv, a)| async move {
      use exec_core::process::spec::{explain_spawn_failure, program_for_spawn};
      let path = a.process.env.path_var();
      let cwd = a.process.cwd().to_path_buf();
      let sandboxed = a.process.sandbox.is_some();
      let prepared = (|| -> std::result::Result<ProcessSpec, ExecError> {
        let program = program_for_spawn(&command, path.as_ref(), &cwd, sandboxed)?;
        let mut spec = ProcessSpec::new(program);
        spec.args = argv.into_iter().map(Into::into).collect();
        Ok(spec)
      })();
      let mut spec = match prepared {
        Err(e) => return Captured::failed(e).into_js(a.raw),
        Ok(s) => s,
      };
      spec.process = a.process;
      spec.run = a.run;
      let explain = |e| explain_spawn_failure(&command, path.as_ref(), &cwd, e);
      capture(spec, a.owner, a.cancel, explain)
        .await
        .into_js(a.raw)
    },
    |_, result| Ok(result),
  )
}
