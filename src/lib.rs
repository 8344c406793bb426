//! exec-native: the napi binding. It only converts types; the work is done by
//! `exec-core`.
#![deny(clippy::all)]
#![cfg_attr(test, allow(dead_code, unused_imports))]

#[macro_use]
mod read;

mod abort;
mod call;
mod capture;
mod command;
mod error;
mod host;
mod manager;
mod options;
mod promise;
mod reaping;
mod sandbox;
mod serve;
mod session;
mod spawn_call;
mod stream;
mod subprocess;
mod text;
// Windows: the same exports, failing with ENOTSUP where the feature is not
// there yet (issue 25)
#[cfg(windows)]
mod unsupported;

use napi::bindgen_prelude::*;
use napi_derive::napi;

#[napi(module_exports)]
pub fn init(_exports: Object, env: Env) -> Result<()> {
  host::init_env(&env)?;
  promise::init_env(&env)
}

/// Number of process groups exec-native is still tracking (running children,
/// or leftovers being terminated). 0 when nothing is left behind.
#[napi]
pub fn live_process_groups() -> u32 {
  exec_core::process::registry::live_count() as u32
}

/// The phases of the runs so far, with the `spawn-trace` feature only (the
/// spawn profile, issue 28: `benchmark/spawn-trace.mjs`): `[name, µs]` pairs.
#[cfg(feature = "spawn-trace")]
#[napi]
pub fn spawn_trace() -> Vec<(String, f64)> {
  exec_core::trace::take()
    .into_iter()
    .map(|(w, t)| (w.to_owned(), t))
    .collect()
}

/// Record that JavaScript resumed after the await (`spawn-trace` only).
#[cfg(feature = "spawn-trace")]
#[napi]
pub fn spawn_trace_resumed() {
  exec_core::trace::at("js.resumed");
}
