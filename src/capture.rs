//! `executeAndCapture`: run code in a language, capture both streams into
//! head+tail buffers, resolve with a structured result.

use std::path::PathBuf;
use std::time::Duration;

use exec_core::buffer::HeadTailBuffer;
use exec_core::language::{self, Language};
use exec_core::process::supervise::{run, ProcessSpec, RunPolicy, StdinMode};
use exec_core::{CancellationToken, ErrorCode, ExecError};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::abort;
use crate::args::{self, ArgResult};
use crate::error::reject_type_error;
use crate::host;
use crate::options::CapturedExecutionResult;
use crate::text::JsText;

pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_KILL_GRACE_MS: u64 = 500;
pub const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;

/// Everything read from the arguments, checked.
pub struct CommonOptions {
  pub cwd: PathBuf,
  pub env: exec_core::EnvSpec,
  pub policy: RunPolicy,
  pub input: Option<Vec<u8>>,
  pub limits: exec_core::limits::Limits,
  pub die_with_parent: bool,
  pub sandbox: Option<exec_core::sandbox::SandboxPolicy>,
}

impl CommonOptions {
  /// Put what the options say about the process itself into `spec`.
  pub fn apply_to(self, spec: &mut ProcessSpec) -> RunPolicy {
    spec.cwd = Some(self.cwd);
    spec.env = self.env;
    spec.stdin = self.input.map_or(StdinMode::Null, StdinMode::Bytes);
    spec.limits = self.limits;
    spec.die_with_parent = self.die_with_parent;
    spec.sandbox = self.sandbox;
    self.policy
  }
}

/// Read the options every run takes; `default_timeout_ms` (0: none) applies
/// when `timeout` is absent.
pub fn common_options(opts: Option<&Object>, default_timeout_ms: u64) -> ArgResult<CommonOptions> {
  let cwd = match args::opt_string_in(opts, "cwd")? {
    Some(c) => PathBuf::from(c),
    None => args::host_cwd()?,
  };
  let mut env = args::env_with_lists(opts)?;
  let sandbox = args::sandbox(opts)?;
  args::sandbox_env(opts, &sandbox, &mut env)?;
  let timeout = args::opt_timeout(opts, "timeout", default_timeout_ms)?;
  let timeout_label = timeout.map(exec_core::process::supervise::format_duration);
  let policy = RunPolicy {
    timeout,
    timeout_label,
    kill_grace: args::opt_ms(opts, "forceKillAfterDelay", DEFAULT_KILL_GRACE_MS)?,
    drain: Duration::from_millis(100),
    cleanup_group_on_exit: true,
    owner: host::owner(),
  };
  Ok(CommonOptions {
    cwd,
    env,
    policy,
    input: args::opt_input(opts)?,
    limits: args::limits(opts)?,
    die_with_parent: args::opt_bool_in(opts, "dieWithParent")?.unwrap_or(false),
    sandbox,
  })
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
  pub sandbox: Option<exec_core::sandbox::SandboxReport>,
}

impl Captured {
  /// A run that never started.
  pub fn failed(error: ExecError) -> Self {
    Captured {
      stdout: Vec::new(),
      stderr: Vec::new(),
      exit_code: -1,
      execution_time: 0.0,
      timed_out: false,
      canceled: false,
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
      error_code: self.error.as_ref().map(|e| e.code.as_str().to_owned()),
      error: self.error.map(|e| e.message()),
      pid: self.pid,
      sandbox: self.sandbox.map(Into::into),
    }
  }
}

/// Run `spec` capturing both streams with `cap` bytes each.
pub async fn capture(
  spec: ProcessSpec,
  policy: RunPolicy,
  cap: usize,
  cancel: CancellationToken,
) -> Captured {
  match run(
    &spec,
    &policy,
    HeadTailBuffer::new(cap),
    HeadTailBuffer::new(cap),
    &cancel,
  )
  .await
  {
    Err(e) => Captured::failed(e),
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
/// Languages: `'bash'`, `'javascript'` (node), `'typescript'` (tsx: the
/// caller's `<cwd>/node_modules/.bin/tsx`, else the bundled one), `'python'`
/// (python3). Never rejects for a failure of the run itself: check `success`,
/// `errorCode`. Rejects with a TypeError (code `EINVAL`) for arguments of the
/// wrong type.
#[napi(
  ts_args_type = "code: string, language: 'bash' | 'javascript' | 'typescript' | 'python', options?: ExecuteOptions",
  ts_return_type = "Promise<CapturedExecutionResult>"
)]
pub fn execute_and_capture<'env>(
  env: &'env Env,
  code: Unknown<'env>,
  language: Unknown<'env>,
  options: Option<Unknown<'env>>,
) -> Result<PromiseRaw<'env, CapturedExecutionResult>> {
  let parsed = (|| -> ArgResult<_> {
    let code = args::string(&code, "code")?;
    let language = args::string(&language, "language")?;
    let opts = args::options(options, "options")?;
    let common = common_options(opts.as_ref(), DEFAULT_TIMEOUT_MS)?;
    let cap = args::opt_usize(opts.as_ref(), "maxOutputBytes", DEFAULT_MAX_OUTPUT)?;
    let raw = crate::subprocess::raw_encoding(opts.as_ref())?;
    let ts = crate::typescript::ts_path(opts.as_ref())?;
    let cancel = CancellationToken::new();
    let binding = abort::bind(env, opts.as_ref(), &cancel)?;
    Ok((code, language, common, cap, raw, ts, cancel, binding))
  })();
  let (code, language, common, cap, raw, ts, cancel, binding) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };

  let fut = async move {
    // errors before execution resolve with success: false; preparing (a
    // temp file, the TypeScript strip) happens here, off the JS thread
    let prepared = (|| -> std::result::Result<_, ExecError> {
      let lang: Language = language.parse()?;
      exec_core::process::spec::check_cwd(&common.cwd)?;
      language::prepare_with(lang, &code, &common.cwd, &common.env, host::toolchain(), ts)
    })();
    let launch = match prepared {
      Err(e) => return Ok(Captured::failed(e).into_js(raw)),
      Ok(l) => l,
    };
    let mut spec = launch.spec;
    let policy = common.apply_to(&mut spec);
    let captured = capture(spec, policy, cap, cancel).await;
    drop(launch.temp);
    // decoded here, off the JS thread
    Ok(captured.into_js(raw))
  };
  env.spawn_future_with_callback(fut, move |env, result: CapturedExecutionResult| {
    if let Some(b) = binding {
      b.detach(env);
    }
    Ok(result)
  })
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
  let parsed = (|| -> ArgResult<_> {
    let command = args::string(&command, "command")?;
    let argv = args::opt_string_array(argv, "args")?;
    let opts = args::options(options, "options")?;
    let common = common_options(opts.as_ref(), DEFAULT_TIMEOUT_MS)?;
    let cap = args::opt_usize(opts.as_ref(), "maxOutputBytes", DEFAULT_MAX_OUTPUT)?;
    let raw = crate::subprocess::raw_encoding(opts.as_ref())?;
    let cancel = CancellationToken::new();
    let binding = abort::bind(env, opts.as_ref(), &cancel)?;
    Ok((command, argv, common, cap, raw, cancel, binding))
  })();
  let (command, argv, common, cap, raw, cancel, binding) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let fut = async move {
    let prepared = (|| -> std::result::Result<ProcessSpec, ExecError> {
      exec_core::process::spec::check_cwd(&common.cwd)?;
      let path = common.env.path_var();
      let program =
        exec_core::process::spec::resolve_program(&command, path.as_ref(), &common.cwd)?;
      let mut spec = ProcessSpec::new(program);
      spec.args = argv.into_iter().map(Into::into).collect();
      Ok(spec)
    })();
    let mut spec = match prepared {
      Err(e) => return Ok(Captured::failed(e).into_js(raw)),
      Ok(s) => s,
    };
    let policy = common.apply_to(&mut spec);
    Ok(capture(spec, policy, cap, cancel).await.into_js(raw))
  };
  env.spawn_future_with_callback(fut, move |env, result: CapturedExecutionResult| {
    if let Some(b) = binding {
      b.detach(env);
    }
    Ok(result)
  })
}
