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
