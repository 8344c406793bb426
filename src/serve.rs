//! `serve()`: run the exec-server (JSON-RPC 2.0 over stdio lines, or over
//! WebSocket with `listen`) inside the addon's runtime. `bin/serve.mjs` is
//! the `exec-native serve` command on top of it.

use exec_core::manager::ManagerConfig;
use exec_core::server;
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::args::{self, ArgResult};
use crate::error::reject_type_error;
use crate::host;

/// Options of `serve`.
#[allow(dead_code)] // the TypeScript shape; read by hand for clear errors
#[napi(object, object_to_js = false)]
pub struct ServeOptions {
  /// `ws://HOST:PORT` to serve WebSocket connections (port 0 picks a free
  /// one; the address is printed to stderr as `exec-native: listening on
  /// ws://...`). Absent: serve one connection over stdin/stdout.
  pub listen: Option<String>,
  /// Accept a `listen` address that is not loopback. Anyone who can connect
  /// can run commands as this user. @default false
  pub allow_remote: Option<bool>,
  /// Per connection, as in `ProcessManagerConfig`. @default 1048576
  pub retained_output_bytes: Option<f64>,
  /// Per connection. @default 64
  pub max_processes: Option<f64>,
  /// @default 30000
  pub exited_retention_ms: Option<f64>,
}

/// Run the exec-server. Over stdio it resolves when stdin closes, after the
/// connection's processes were terminated; over WebSocket it runs until the
/// process ends. Rejects when `listen` is invalid, not loopback (without
/// `allowRemote`), or cannot be bound.
#[napi(
  ts_args_type = "options?: ServeOptions | null",
  ts_return_type = "Promise<void>"
)]
pub fn serve<'env>(env: &'env Env, options: Option<Unknown<'env>>) -> Result<PromiseRaw<'env, ()>> {
  let parsed = (|| -> ArgResult<_> {
    let obj = args::options(options, "options")?;
    let o = obj.as_ref();
    let listen = o
      .map(|o| args::opt_string(o, "listen"))
      .transpose()?
      .flatten();
    let allow_remote = o
      .map(|o| args::opt_bool(o, "allowRemote"))
      .transpose()?
      .flatten()
      .unwrap_or(false);
    let mut config = ManagerConfig {
      owner: host::owner(),
      ..Default::default()
    };
    config.retained_output_bytes =
      args::opt_usize(o, "retainedOutputBytes", config.retained_output_bytes)?;
    config.max_processes = args::opt_usize(o, "maxProcesses", config.max_processes)?;
    config.exited_retention = args::opt_ms(
      o,
      "exitedRetentionMs",
      config.exited_retention.as_millis() as u64,
    )?;
    let addr = listen
      .as_deref()
      .map(|l| server::parse_listen(l, allow_remote))
      .transpose()?;
    Ok((addr, config))
  })();
  let (addr, config) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  let fut = async move {
    match addr {
      None => {
        server::serve_stdio(config).await;
        Ok(())
      }
      Some(addr) => {
        let listener = server::bind_ws(addr).await?;
        let local = listener.local_addr().unwrap_or(addr);
        eprintln!("exec-native: listening on ws://{local}");
        server::serve_ws(listener, config).await
      }
    }
  };
  env.spawn_future_with_callback(
    async move { Ok(fut.await) },
    |env, r: std::result::Result<(), ExecError>| match r {
      Ok(()) => Ok(()),
      Err(e) => Err(crate::error::coded_error(env, e)),
    },
  )
}

/// SIGKILL every process group started from this Node environment that is
/// still running. `exec-native serve` calls it from `process.on('exit')`:
/// the environment cleanup hook does not run on the main thread's exit.
/// Returns how many groups were killed.
#[napi]
pub fn kill_all_process_groups() -> u32 {
  exec_core::group::kill_all(Some(host::owner())) as u32
}
