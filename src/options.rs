//! Options and results as JavaScript sees them. napi-rs copies these doc
//! comments into `index.d.ts`, so the types are the documentation. Options are
//! read by hand (see `args.rs`) so that bad input gets a clear TypeError; the
//! structs here define their TypeScript shape.
#![allow(dead_code)]

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::text::JsText;

/// Options of `executeAndCapture`.
#[napi(object, object_to_js = false)]
pub struct ExecuteOptions {
  /// Working directory, checked before spawning. @default process.cwd()
  pub cwd: Option<String>,
  /// Variables set over the host environment (`undefined` removes one).
  pub env: Option<std::collections::HashMap<String, String>>,
  /// Start from the host environment (`true`) or from `env` alone. @default true
  pub extend_env: Option<bool>,
  /// Milliseconds before the process group is killed; 0 or Infinity: none. @default 30000
  pub timeout: Option<f64>,
  /// Milliseconds between SIGTERM and SIGKILL. @default 500
  pub force_kill_after_delay: Option<f64>,
  /// Bytes kept per stream (head + tail); more is cut from the middle. @default 1048576
  pub max_output_bytes: Option<f64>,
  /// Written to stdin, then EOF. Without it stdin is closed (a read gets EOF).
  #[napi(ts_type = "string | Buffer | Uint8Array")]
  pub input: Option<Either<String, Buffer>>,
  /// Cancels the run: the group is killed, the result has `canceled: true`.
  #[napi(ts_type = "AbortSignal")]
  pub signal: Option<Unknown<'static>>,
  /// Opt-in resource limits; a child over a limit is stopped and the result
  /// has `errorCode: 'ELIMIT'`. Without them the fast spawn path is kept.
  pub limits: Option<ResourceLimits>,
  /// Only host variables matching one of these patterns reach the child
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill the child when the host dies by SIGKILL (Linux
  /// PR_SET_PDEATHSIG; only the direct child; costs the posix_spawn fast
  /// path; macOS has no such signal: there it does nothing). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox (Linux: Landlock + seccomp, applied by the thread
  /// that spawns; posix_spawn kept). `true` = `{ mode: 'workspace-write' }`.
  /// Also drops the host's secrets from the environment (`*_TOKEN`, `*_KEY`,
  /// `AWS_*`, ...) unless `envAllowlist`/`envDenylist` are given. Cannot be
  /// applied: rejected with `ESANDBOX`, nothing runs. The result's `sandbox`
  /// says how it was applied and what it likely denied. @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
  /// `'utf8'` decodes output to strings; `'buffer'` returns raw Buffers. @default 'utf8'
  #[napi(ts_type = "'utf8' | 'buffer'")]
  pub encoding: Option<String>,
  /// How `'typescript'` code runs: `'auto'` strips the types in-process and
  /// runs plain node when the code and the project allow it (no enums,
  /// namespaces, decorators, ES module syntax; no tsconfig `paths` or own
  /// tsx), else tsx, with the same output; `'strip'` always strips (errors with
  /// `EINVAL` when the code needs more); `'tsx'` always uses tsx. @default 'auto'
  #[napi(ts_type = "'auto' | 'strip' | 'tsx'")]
  pub typescript: Option<String>,
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

/// Options of `spawnCall`.
#[napi(object, object_to_js = false)]
pub struct SpawnOptions {
  /// @default process.cwd()
  pub cwd: Option<String>,
  pub env: Option<std::collections::HashMap<String, String>>,
  /// @default true
  pub extend_env: Option<bool>,
  /// Milliseconds; 0 or Infinity: none. @default 30000
  pub timeout: Option<f64>,
  /// @default 500
  pub force_kill_after_delay: Option<f64>,
  #[napi(ts_type = "string | Buffer | Uint8Array")]
  pub input: Option<Either<String, Buffer>>,
  #[napi(ts_type = "AbortSignal")]
  pub signal: Option<Unknown<'static>>,
  /// Opt-in resource limits; a child over a limit is stopped and the result
  /// has `errorCode: 'ELIMIT'`. Without them the fast spawn path is kept.
  pub limits: Option<ResourceLimits>,
  /// Only host variables matching one of these patterns reach the child
  /// (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
  pub env_allowlist: Option<Vec<String>>,
  /// Host variables matching one of these patterns are dropped
  /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
  pub env_denylist: Option<Vec<String>>,
  /// Also kill the child when the host dies by SIGKILL (Linux
  /// PR_SET_PDEATHSIG; only the direct child; costs the posix_spawn fast
  /// path; macOS has no such signal: there it does nothing). @default false
  pub die_with_parent: Option<bool>,
  /// Opt-in OS sandbox (Linux: Landlock + seccomp, applied by the thread
  /// that spawns; posix_spawn kept). `true` = `{ mode: 'workspace-write' }`.
  /// Also drops the host's secrets from the environment (`*_TOKEN`, `*_KEY`,
  /// `AWS_*`, ...) unless `envAllowlist`/`envDenylist` are given. Cannot be
  /// applied: rejected with `ESANDBOX`, nothing runs. The result's `sandbox`
  /// says how it was applied and what it likely denied. @default false
  #[napi(ts_type = "boolean | SandboxOptions")]
  pub sandbox: Option<bool>,
  /// Output is cut into chunks of at most 64 KiB (whole characters; a
  /// Buffer chunk is 64 KiB of bytes) and handed over in batches of at most
  /// 8 calls per turn of the event loop, the next batch once JavaScript
  /// returned from the previous one. A full chunk goes in the next batch; a
  /// partial one waits until this many milliseconds have passed since the
  /// last batch (the first goes at once), so a trickle of output gets at most
  /// one call per interval and a flood gets full chunks. @default 10
  pub callback_interval_ms: Option<f64>,
  /// `'utf8'`: the callbacks receive strings decoded on UTF-8 boundaries;
  /// `'buffer'`: raw Buffers. @default 'utf8'
  #[napi(ts_type = "'utf8' | 'buffer'")]
  pub encoding: Option<String>,
  /// How `'typescript'` code runs: `'auto'` strips the types in-process and
  /// runs plain node when the code and the project allow it (no enums,
  /// namespaces, decorators, ES module syntax; no tsconfig `paths` or own
  /// tsx), else tsx, with the same output; `'strip'` always strips (errors with
  /// `EINVAL` when the code needs more); `'tsx'` always uses tsx. @default 'auto'
  #[napi(ts_type = "'auto' | 'strip' | 'tsx'")]
  pub typescript: Option<String>,
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
  /// The kernel's Landlock ABI (0: none).
  pub abi: u32,
  /// Guarantees this kernel cannot give: `'refer'` (ABI < 2), `'truncate'`
  /// (< 3), `'signalScope'` and `'abstractUnixSockets'` (< 6),
  /// `'unixSockets'` (pathname Unix sockets, < 9).
  pub missing: Vec<String>,
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

impl From<exec_core::sandbox::SandboxReport> for SandboxResult {
  fn from(r: exec_core::sandbox::SandboxReport) -> Self {
    SandboxResult {
      applied: r.applied,
      abi: r.abi,
      missing: r.missing.iter().map(|m| (*m).to_owned()).collect(),
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

/// Resource limits of an execution and all its descendants.
/// The sandbox of a run (see `sandbox` in the options).
#[napi(object, object_to_js = false)]
#[allow(dead_code)] // the TypeScript shape; read by hand in args.rs
pub struct SandboxOptions {
  /// `'workspace-write'`: the cwd, `writableRoots`, `/tmp` and `$TMPDIR` are
  /// writable; `'read-only'`: nothing is. `/dev/null`, `/dev/zero`,
  /// `/dev/full`, `/dev/tty` always are. Reads are never restricted.
  /// @default 'workspace-write'
  #[napi(ts_type = "'read-only' | 'workspace-write'")]
  pub mode: Option<String>,
  /// More writable directories (absolute, or relative to the cwd; must exist).
  pub writable_roots: Option<Vec<String>>,
  /// Leave `/tmp` and `$TMPDIR` out of the writable roots. @default false
  pub exclude_tmp: Option<bool>,
  /// Allow network sockets (TCP, UDP, ...). Off: only Unix sockets. @default false
  pub network: Option<bool>,
  /// `'error'`: `ESANDBOX` and nothing runs when the sandbox cannot be
  /// applied; `'warn'`: run without it, say so in the result's
  /// `sandbox.warning` and in `runCommand`'s text; `'run-unsandboxed'`: run
  /// without it (the result's `sandbox.applied` is false). @default 'error'
  #[napi(ts_type = "'error' | 'warn' | 'run-unsandboxed'")]
  pub on_unavailable: Option<String>,
}

#[napi(object)]
pub struct ResourceLimits {
  /// Memory of the whole tree, in bytes (a memory cgroup where the host may
  /// create one; everywhere a watchdog sums the tree's resident memory every
  /// 20 ms). See docs/LIMITS.md.
  pub memory_bytes: Option<f64>,
  /// CPU time per process, in seconds (RLIMIT_CPU: SIGXCPU, SIGKILL one
  /// second later; both are reported as ELIMIT).
  pub cpu_seconds: Option<f64>,
  /// Processes in the tree at once (a pids cgroup where the host may create
  /// one, else RLIMIT_NPROC relative to the user's threads; plus a watchdog).
  /// Where the kernel enforces it, threads count.
  pub max_processes: Option<f64>,
  /// Largest file a process may write, in bytes (RLIMIT_FSIZE: SIGXFSZ).
  pub file_size_bytes: Option<f64>,
  /// Open file descriptors per process (RLIMIT_NOFILE; the child sees EMFILE,
  /// it is not stopped).
  pub open_files: Option<f64>,
}
