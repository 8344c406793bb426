//! `serve()`: run the exec-server (JSON-RPC 2.0 over stdio lines, or over
//! WebSocket with `listen`) inside the addon's runtime. `bin/serve.mjs` is
//! the `exec-native serve` command on top of it.

use exec_core::server;
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi_derive::napi;

use std::time::Duration;

use crate::call;
use crate::error::reject_type_error;
use crate::host;
use crate::manager::manager_config;
use crate::read::{self, ArgResult, At, Positive};

js_options! {
  /// Options of `serve`.
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
    /// Per connection (at least 1). @default 64
    pub max_processes: Option<f64>,
    /// @default 30000
    pub exited_retention_ms: Option<f64>,
    /// The token WebSocket clients must send (`Authorization: Bearer <token>`,
    /// or `?token=<token>`). Absent: read from `tokenFile`, else from
    /// `EXEC_NATIVE_SERVE_TOKEN`, else a random one is made, printed once to
    /// stderr and written to a file only the user can read
    /// (`$XDG_RUNTIME_DIR/exec-native/serve-<port>.token`, else
    /// `<tmpdir>/exec-native-<uid>/serve-<port>.token`, mode 0600; Windows:
    /// `serve-<port>.token` in the `exec-native` folder of `%TEMP%`, which the
    /// access list of the user's temporary directory protects), removed when
    /// the process exits.
    pub token: Option<String>,
    /// A file holding the token (its first line).
    pub token_file: Option<String>,
    /// No authentication; only on a loopback address. @default false
    pub no_auth: Option<bool>,
    /// Origins whose pages may connect (exact: `http://localhost:5173`). A
    /// handshake with any other `Origin` header is refused (403). @default []
    pub allow_origin: Option<Vec<String>>,
    /// WebSocket connections at once (at least 1); more are refused (503). @default 64
    #[napi(ts_type = "number")]
    pub max_connections: Option<Positive>,
    /// Milliseconds between pings (at least 1); a peer silent for two
    /// intervals is dropped and its processes terminated. @default 30000
    #[napi(ts_type = "number")]
    pub ping_interval_ms: Option<Positive>,
    /// Milliseconds a connection has to send its handshake request (at least 1); until then it holds one of 256 handshake places, not a connection. @default 3000
    #[napi(ts_type = "number")]
    pub handshake_timeout_ms: Option<Positive>,
  }
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
///
/// On Windows the processes run with pipes, each in a Job Object (ended
/// with the server however it ends); `io: { type: 'pty' }` is `ENOTSUP`, a
/// `sandbox` `ESANDBOX`, and sessions are Python only (docs/PROTOCOL.md,
/// Windows).
#[napi(
  ts_args_type = "options?: ServeOptions | null",
  ts_return_type = "Promise<void>"
)]
pub fn serve<'env>(env: &'env Env, options: Option<Unknown<'env>>) -> Result<PromiseRaw<'env, ()>> {
  let parsed = (|| -> ArgResult<_> {
    let at = At::arg("options");
    let o: ServeOptions = read::optional(options, &at)?.unwrap_or_default();
    let allow_remote = o.allow_remote.unwrap_or(false);
    let config = manager_config(
      &at,
      o.retained_output_bytes,
      o.max_processes,
      o.exited_retention_ms,
    )?;
    let addr = o
      .listen
      .as_deref()
      .map(|l| server::parse_listen(l, allow_remote))
      .transpose()?;
    let d = server::WsPolicy::default();
    let policy = server::WsPolicy {
      allow_remote,
      allowed_origins: o.allow_origin.unwrap_or_default(),
      max_connections: o.max_connections.map_or(d.max_connections, |n| n.0),
      ping_interval: o
        .ping_interval_ms
        .map_or(d.ping_interval, |n| Duration::from_millis(n.0 as u64)),
      handshake_timeout: o
        .handshake_timeout_ms
        .map_or(d.handshake_timeout, |n| Duration::from_millis(n.0 as u64)),
      ..d
    };
    let auth = (o.token, o.token_file, o.no_auth.unwrap_or(false));
    Ok((addr, config, policy, auth))
  })();
  let (addr, config, mut policy, (token, token_file, no_auth)) = match parsed {
    Ok(p) => p,
    Err(e) => return reject_type_error(env, e),
  };
  #[cfg(windows)]
  if addr.is_some() {
    remove_token_files_at_exit(env)?;
  }
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
          say(&format!(
            "exec-native: token {t} (also in {}; clients send Authorization: Bearer <token>)",
            file.display()
          ));
        }
        policy.token = token;
        say(&format!("exec-native: listening on ws://{local}"));
        server::serve_ws(listener, config, policy).await
      }
    }
  };
  call::fallible(env, Ok(fut), |_, ()| Ok(()))
}

/// Windows: remove the token files `serve` wrote at `process.on('exit')`.
/// On POSIX the addon's `atexit` and signal handler do it (`host.rs`); a
/// DLL has no such hook that `process.exit()` is sure to run (nor does it
/// run the environment's cleanup hooks), so Node's own exit event does.
#[cfg(windows)]
fn remove_token_files_at_exit(env: &Env) -> Result<()> {
  type On<'a> = Function<'a, FnArgs<(String, Function<'a, (), ()>)>, Unknown<'a>>;
  let process: Object = env.get_global()?.get_named_property("process")?;
  let on: On = process.get_named_property("on")?;
  let hook = env.create_function_from_closure::<(), (), _>("removeServeTokenFiles", |_| {
    server::remove_token_files();
    Ok(())
  })?;
  on.apply(process, FnArgs::from(("exit".to_owned(), hook)))
    .map(drop)
}

/// SIGKILL every process group started from this Node environment that is
/// still running (Windows: `TerminateJobObject` of every run's job).
/// `exec-native serve` calls it from `process.on('exit')`: the environment
/// cleanup hook does not run on the main thread's exit. Returns how many
/// groups were killed.
#[napi]
pub fn kill_all_process_groups() -> u32 {
  exec_core::process::kill_all(Some(host::owner())) as u32
}

/// Write `line` and its newline to stderr in one write: `eprintln!` writes
/// each formatted piece on its own (an unbuffered stream), so a client
/// reading the address could see `ws://127.0.0.1:4` before the rest of the
/// port.
fn say(line: &str) {
  use std::io::Write;
  let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
