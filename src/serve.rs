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
  /// The token WebSocket clients must send (`Authorization: Bearer <token>`,
  /// or `?token=<token>`). Absent: read from `tokenFile`, else from
  /// `EXEC_NATIVE_SERVE_TOKEN`, else a random one is made, printed once to
  /// stderr and written to a file only the user can read
  /// (`$XDG_RUNTIME_DIR/exec-native/serve-<port>.token`, else
  /// `<tmpdir>/exec-native-<uid>/serve-<port>.token`).
  pub token: Option<String>,
  /// A file holding the token (its first line).
  pub token_file: Option<String>,
  /// No authentication; only on a loopback address. @default false
  pub no_auth: Option<bool>,
  /// Origins whose pages may connect (exact: `http://localhost:5173`). A
  /// handshake with any other `Origin` header is refused (403). @default []
  pub allow_origin: Option<Vec<String>>,
  /// WebSocket connections at once; more are refused (503). @default 64
  pub max_connections: Option<f64>,
  /// Milliseconds between pings; a peer silent for two intervals is dropped
  /// and its processes terminated. @default 30000
  pub ping_interval_ms: Option<f64>,
  /// Milliseconds a connection has to complete its handshake. @default 10000
  pub handshake_timeout_ms: Option<f64>,
}

/// The listener's token: given, from a file, from the environment, or made.
fn resolve_token(
  token: Option<String>,
  token_file: Option<String>,
  no_auth: bool,
  addr: std::net::SocketAddr,
) -> std::result::Result<(Option<String>, bool), ExecError> {
  if no_auth {
    if !addr.ip().is_loopback() {
      return Err(ExecError::invalid(format!(
        "noAuth is only allowed on a loopback address, not {} (anyone who can connect could run commands)",
        addr.ip()
      )));
    }
    return Ok((None, false));
  }
  let from_file = token_file
    .map(|f| {
      std::fs::read_to_string(&f)
        .map(|t| t.lines().next().unwrap_or("").trim().to_owned())
        .map_err(|e| ExecError::invalid(format!("cannot read the token file {f}: {e}")))
    })
    .transpose()?;
  let given = token
    .or(from_file)
    .or_else(|| std::env::var("EXEC_NATIVE_SERVE_TOKEN").ok());
  match given {
    Some(t) if t.len() < 16 => Err(ExecError::invalid(
      "the token must be at least 16 characters long",
    )),
    Some(t) => Ok((Some(t), false)),
    None => Ok((Some(server::random_token()?), true)),
  }
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
    let mut policy = server::WsPolicy {
      allow_remote,
      ..Default::default()
    };
    policy.allowed_origins = match o
      .map(|o| args::prop(o, "allowOrigin"))
      .transpose()?
      .flatten()
    {
      Some(v) => args::opt_string_array(Some(v), "options.allowOrigin")?,
      None => Vec::new(),
    };
    policy.max_connections = args::opt_usize(o, "maxConnections", policy.max_connections)?;
    policy.ping_interval =
      args::opt_ms(o, "pingIntervalMs", policy.ping_interval.as_millis() as u64)?;
    policy.handshake_timeout = args::opt_ms(
      o,
      "handshakeTimeoutMs",
      policy.handshake_timeout.as_millis() as u64,
    )?;
    if policy.max_connections == 0
      || policy.ping_interval.is_zero()
      || policy.handshake_timeout.is_zero()
    {
      return Err(crate::error::type_error(
        "options.maxConnections, pingIntervalMs and handshakeTimeoutMs must be at least 1",
      ));
    }
    let token = o
      .map(|o| args::opt_string(o, "token"))
      .transpose()?
      .flatten();
    let token_file = o
      .map(|o| args::opt_string(o, "tokenFile"))
      .transpose()?
      .flatten();
    let no_auth = o
      .map(|o| args::opt_bool(o, "noAuth"))
      .transpose()?
      .flatten()
      .unwrap_or(false);
    Ok((addr, config, policy, (token, token_file, no_auth)))
  })();
  let (addr, config, mut policy, (token, token_file, no_auth)) = match parsed {
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
        let (token, made) = resolve_token(token, token_file, no_auth, addr)?;
        let listener = server::bind_ws(addr).await?;
        let local = listener.local_addr().unwrap_or(addr);
        if let (Some(t), true) = (&token, made) {
          let file = server::write_token_file(t, local.port())?;
          eprintln!(
            "exec-native: token {t} (also in {}; clients send Authorization: Bearer <token>)",
            file.display()
          );
        }
        policy.token = token;
        eprintln!("exec-native: listening on ws://{local}");
        server::serve_ws(listener, config, policy).await
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
  exec_core::process::registry::kill_all(Some(host::owner())) as u32
}
