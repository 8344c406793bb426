//! exec-native: the napi binding. It only converts types; the work is done by
//! `exec-core`.
#![deny(clippy::all)]
#![cfg_attr(test, allow(dead_code, unused_imports))]

#[macro_use]
mod read;

mod abort;
mod call;
mod capture;
#[cfg(unix)]
mod command;
mod error;
mod host;
#[cfg(unix)]
mod manager;
mod options;
mod reaping;
mod sandbox;
#[cfg(unix)]
mod serve;
#[cfg(unix)]
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
  host::init_env(&env)
}

/// Number of process groups exec-native is still tracking (running children,
/// or leftovers being terminated). 0 when nothing is left behind.
#[napi]
pub fn live_process_groups() -> u32 {
  exec_core::process::registry::live_count() as u32
}
