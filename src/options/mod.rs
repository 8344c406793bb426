//! Options and results as JavaScript sees them. napi-rs copies these doc
//! comments into `index.d.ts`, so the types are the documentation. Options
//! are declared with `js_options!` (see `read.rs`): the declaration is both
//! the TypeScript interface and the reader; the fields every process takes
//! are declared once there and move out as the core's `ProcessFields`.
//!
//! Each API's options are converted once, into the core's types, here:
//! - `process`: the process fields' own values (`limits`, `sandbox`);
//! - `run`: the runs of a program (`executeAndCapture`, `captureCall`,
//!   `spawnCall`, `executeStreaming`, `spawn`) -> `ProcessOptions` +
//!   `RunOptions`;
//! - `command` (Unix, as the command tool): the command runner's
//!   (`runCommand`, `CommandRunner` and its `run`, `start`) -> `CallOptions`,
//!   `CommandDefaults`.

mod command;
mod process;
mod run;

pub use command::{read_command_options, read_runner_options, read_start_options};
pub use process::{Limit, Parsed, SandboxArg};
pub use run::{CaptureRun, StreamRun};

use exec_core::process::sandbox::{OnUnavailable, SandboxMode};
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::read::{self, ArgResult, At, Encoding, FromJs, Input, JsSignal, Ms, Size, Timeout};
use crate::text::JsText;

js_options! {
  /// Options of `executeAndCapture` and `captureCall`.
  pub struct ExecuteOptions<'env> {
    ..process,
    /// Milliseconds before the process group is killed; 0 or Infinity: none. @default 30000
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// Milliseconds between SIGTERM and SIGKILL. @default 500
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// Bytes kept per stream (head + tail); more is cut from the middle. @default 1048576
    #[napi(ts_type = "number")]
    pub max_output_bytes: Option<Size>,
    /// Written to stdin, then EOF. Without it stdin is closed (a read gets EOF).
    #[napi(ts_type = "string | Buffer | Uint8Array")]
    pub input: Option<Input>,
    /// Cancels the run: the group is killed, the result has `canceled: true`.
    /// Already aborted: nothing is spawned, the result has `canceled: true`,
    /// `pid: 0`, `errorCode: 'ECANCELED'`.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<JsSignal<'env>>,
    /// `'utf8'` decodes output to strings; `'buffer'` returns raw Buffers. @default 'utf8'
    #[napi(ts_type = "'utf8' | 'buffer'")]
    pub encoding: Option<Encoding>,
    /// How `'typescript'` code runs: `'auto'` strips the types in-process and
    /// runs plain node when the code and the project allow it (no enums,
    /// namespaces, decorators, ES module syntax; no tsconfig `paths` or own
    /// tsx), else tsx, with the same output; `'strip'` always strips (errors with
    /// `EINVAL` when the code needs more); `'tsx'` always uses tsx. @default 'auto'
    #[napi(ts_type = "'auto' | 'strip' | 'tsx'")]
    pub typescript: Option<TypeScript>,
  }
}

/// The result of `executeAndCapture`. Errors before execution (bad cwd,
/// missing interpreter, unsupported language) resolve with `success: false`,
/// `exitCode: -1` and `error`/`errorCode`.
#[napi(object, object_from_js = false)]
pub struct CapturedExecutionResult {
  /// Captured stdout: head + `[Output truncated] N bytes omitted` + tail when over the cap.
  #[napi(ts_type = "string | Buffer")]
  pub stdout: Either<JsText, Buffer>,
  #[napi(ts_type = "string | Buffer")]
  pub stderr: Either<JsText, Buffer>,
  /// The exit code; 128+N when signal N ended the child; 124 on timeout; -1 if it never ran.
  pub exit_code: i32,
  /// Milliseconds from spawn to settle.
  pub execution_time: f64,
  /// Exit 0 and no error.
  pub success: bool,
  pub timed_out: bool,
  pub canceled: bool,
  /// The signal that ended the child (`'SIGTERM'`), or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  /// Bytes the child wrote to stdout in total (not only what was kept).
  pub stdout_bytes: f64,
  pub stderr_bytes: f64,
  /// Whether either stream was cut.
  pub truncated: bool,
  /// `exec: <what> (<CODE>)`.
  pub error: Option<String>,
  /// ENOENT, ENOTDIR, EACCES, EINVAL, TIMEOUT, ECANCELED, EBINARY, ESPAWN, EIO.
  pub error_code: Option<String>,
  /// The child's pid (0 if it never ran).
  pub pid: u32,
  /// A sandboxed run (`sandbox` option): how it was applied, what it denied.
  pub sandbox: Option<SandboxResult>,
}

js_options! {
  /// Options of `spawnCall` and `executeStreaming`.
  pub struct SpawnOptions<'env> {
    ..process,
    /// Milliseconds; 0 or Infinity: none. @default 30000
    #[napi(ts_type = "number")]
    pub timeout: Option<Timeout>,
    /// Milliseconds between SIGTERM and SIGKILL. @default 500
    #[napi(ts_type = "number")]
    pub force_kill_after_delay: Option<Ms>,
    /// Written to stdin, then EOF.
    #[napi(ts_type = "string | Buffer | Uint8Array")]
    pub input: Option<Input>,
    /// Cancels the run: the tree is killed, the result has `canceled: true`.
    /// Already aborted: nothing is spawned, the result has `canceled: true`,
    /// `pid: 0`, `errorCode: 'ECANCELED'`.
    #[napi(ts_type = "AbortSignal")]
    pub signal: Option<JsSignal<'env>>,
    /// Output is cut into chunks of at most 64 KiB (whole characters; a
    /// Buffer chunk is 64 KiB of bytes) and handed over in batches of at most
    /// 4 calls per turn of the event loop, the next batch once JavaScript
    /// returned from the previous one. A full chunk goes in the next batch; a
    /// partial one waits until this many milliseconds have passed since the
    /// last batch (the first goes at once), so a trickle of output gets at most
    /// one call per interval and a flood gets full chunks. @default 10
    #[napi(ts_type = "number")]
    pub callback_interval_ms: Option<Ms>,
    /// `'utf8'`: the callbacks receive strings decoded on UTF-8 boundaries;
    /// `'buffer'`: raw Buffers. @default 'utf8'
    #[napi(ts_type = "'utf8' | 'buffer'")]
    pub encoding: Option<Encoding>,
    /// How `'typescript'` code runs (see `ExecuteOptions.typescript`). @default 'auto'
    #[napi(ts_type = "'auto' | 'strip' | 'tsx'")]
    pub typescript: Option<TypeScript>,
  }
}

/// The result of `spawnCall`.
#[napi(object, object_from_js = false)]
pub struct SpawnResult {
  pub exit_code: i32,
  /// The signal that ended the child, or null.
  #[napi(ts_type = "string | null")]
  pub signal: Either<String, Null>,
  pub timed_out: bool,
  pub canceled: bool,
  /// Milliseconds.
  pub execution_time: f64,
  /// The child's pid (0 if it never ran).
  pub pid: u32,
  pub stdout_bytes: f64,
  pub stderr_bytes: f64,
  pub error: Option<String>,
  pub error_code: Option<String>,
  /// A sandboxed run (`sandbox` option): how it was applied; `denied` only
  /// from the exit here (the output went to the callbacks).
  pub sandbox: Option<SandboxResult>,
}

/// How the sandbox of a run was applied, and what it likely denied.
#[napi(object, object_from_js = false)]
pub struct SandboxResult {
  /// The sandbox was in force. False only when `onUnavailable` (`'warn'`,
  /// `'run-unsandboxed'`) let the run go on without it; `warning` says why.
  pub applied: bool,
  /// How it was applied: `'namespaces+landlock+seccomp'` (the full
  /// boundary), `'landlock+seccomp'` (no user namespaces here: see
  /// `missing`), `'seatbelt'` (macOS); `''` when not applied.
  pub mechanism: String,
  /// The kernel's Landlock ABI (0: none).
  pub abi: u32,
  /// Guarantees not given here: `'mountNamespace'`, `'pidNamespace'`,
  /// `'networkNamespace'` (no user namespaces: `.git` and file metadata
  /// outside the roots are not protected, the host's processes are visible
  /// though not reachable); `'refer'` (Landlock ABI < 2), `'truncate'` (< 3),
  /// `'signalScope'` and `'abstractUnixSockets'` (< 6); `'unixSockets'`
  /// (pathname Unix sockets with `network: true`, ABI < 9).
  pub missing: Vec<String>,
  /// The paths kept read-only inside the writable roots (`.git`, `protect`).
  pub protected: Vec<String>,
  /// Why it was not applied.
  pub warning: Option<String>,
  /// A denial likely explains the run's failure: it failed, and its output
  /// names a write outside the writable roots that the user could otherwise
  /// make, a network error (network off), or a refused signal or syscall.
  /// A permission error inside a writable root is not a denial. Judged from
  /// the output, so a heuristic; for streaming runs (whose output the
  /// library does not keep) only from the exit (SIGSYS).
  pub denied: bool,
  pub violations: Vec<SandboxViolation>,
}

/// One likely denial.
#[napi(object, object_from_js = false)]
pub struct SandboxViolation {
  #[napi(ts_type = "'write' | 'network' | 'other'")]
  pub kind: String,
  /// The path written (absolute), for `'write'`.
  pub path: Option<String>,
  /// The error line it was read from.
  pub message: String,
}

impl From<exec_core::process::sandbox::SandboxReport> for SandboxResult {
  fn from(r: exec_core::process::sandbox::SandboxReport) -> Self {
    SandboxResult {
      applied: r.applied,
      mechanism: r.mechanism.to_owned(),
      abi: r.abi,
      missing: r.missing.iter().map(|m| (*m).to_owned()).collect(),
      protected: r
        .protected
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect(),
      warning: r.warning,
      denied: r.denied,
      violations: r
        .violations
        .into_iter()
        .map(|v| SandboxViolation {
          kind: v.kind.as_str().to_owned(),
          path: v.path,
          message: v.message,
        })
        .collect(),
    }
  }
}

/// `Some(s)` -> `s`, `None` -> `null` (not `undefined`).
pub fn nullable(v: Option<String>) -> Either<String, Null> {
  v.map_or(Either::B(Null), Either::A)
}

js_options! {
  /// The sandbox of a run (see `sandbox` in the options).
  pub struct SandboxOptions {
    /// `'workspace-write'`: the cwd, `writableRoots`, `/tmp` and `$TMPDIR` are
    /// writable; `'read-only'`: nothing is. `/dev/null`, `/dev/zero`,
    /// `/dev/full`, `/dev/tty` always are. Reads are never restricted.
    /// @default 'workspace-write'
    #[napi(ts_type = "'read-only' | 'workspace-write'")]
    pub mode: Option<Parsed<SandboxMode>>,
    /// More writable directories (absolute, or relative to the cwd; must exist).
    pub writable_roots: Option<Vec<String>>,
    /// Leave `/tmp` and `$TMPDIR` out of the writable roots. @default false
    pub exclude_tmp: Option<bool>,
    /// Allow network sockets (TCP, UDP, ...). Off: an empty network
    /// namespace (where user namespaces work) and no socket at all but a Unix
    /// `socketpair` (so no host Unix socket either, `docker.sock` included).
    /// @default false
    pub network: Option<bool>,
    /// More paths kept read-only inside the writable roots (absolute, or
    /// relative to the cwd). Each writable root's `.git` (and a worktree's
    /// `gitdir:`) always is, where a mount namespace is available. Given
    /// explicitly, they need one: without it the sandbox is unavailable
    /// (`onUnavailable`).
    pub protect: Option<Vec<String>>,
    /// `'error'`: `ESANDBOX` and nothing runs when the sandbox cannot be
    /// applied; `'warn'`: run without it, say so in the result's
    /// `sandbox.warning` and in `runCommand`'s text; `'run-unsandboxed'`: run
    /// without it (the result's `sandbox.applied` is false). @default 'error'
    #[napi(ts_type = "'error' | 'warn' | 'run-unsandboxed'")]
    pub on_unavailable: Option<Parsed<OnUnavailable>>,
  }
}

/// `typescript: 'auto' | 'strip' | 'tsx'`.
pub struct TypeScript(pub exec_core::TsPath);

impl<'env> FromJs<'env> for TypeScript {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::parsed(v, at, exec_core::TsPath::parse).map(TypeScript)
  }
}

js_options! {
  /// Resource limits of an execution and all its descendants. Each is a
  /// number of at least 1 (a fraction is cut). Any other key is refused
  /// (`EINVAL`), like an unknown key of every options object.
  pub struct ResourceLimits {
    /// Memory of the whole tree, in bytes (a memory cgroup where the host may
    /// create one; everywhere a watchdog sums the tree's resident memory every
    /// 20 ms). See docs/LIMITS.md.
    #[napi(ts_type = "number")]
    pub memory_bytes: Option<Limit>,
    /// CPU time per process, in seconds (RLIMIT_CPU: SIGXCPU, SIGKILL one
    /// second later; both are reported as ELIMIT).
    #[napi(ts_type = "number")]
    pub cpu_seconds: Option<Limit>,
    /// Processes in the tree at once (a pids cgroup where the host may create
    /// one, else RLIMIT_NPROC relative to the user's threads; plus a watchdog).
    /// Where the kernel enforces it, threads count.
    #[napi(ts_type = "number")]
    pub max_processes: Option<Limit>,
    /// Largest file a process may write, in bytes (RLIMIT_FSIZE: SIGXFSZ).
    #[napi(ts_type = "number")]
    pub file_size_bytes: Option<Limit>,
    /// Open file descriptors per process (RLIMIT_NOFILE; the child sees EMFILE,
    /// it is not stopped).
    #[napi(ts_type = "number")]
    pub open_files: Option<Limit>,
  }
}
