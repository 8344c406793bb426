//! Windows: the exports whose features the Windows build leaves out for now
//! (issue 25). Each has the name it has on Linux and macOS, so that
//! `index.js` exports the same API everywhere, and fails with
//! `exec: <what> is not supported on Windows yet (ENOTSUP)`: a class's
//! constructor and a synchronous function throw it, an asynchronous one
//! rejects with it. Nothing is silently ignored.

use exec_core::language::needs_bash;
use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi::JsError;
use napi_derive::napi;

use crate::error::throw_coded;

fn not_yet(what: &str) -> ExecError {
  ExecError::not_on_windows(what)
}

/// Throw `what`'s ENOTSUP error from a synchronous call.
fn throw<T>(env: &Env, what: &str) -> Result<T> {
  Err(throw_coded(env, &not_yet(what)))
}

fn reject_with(env: &Env, e: ExecError) -> Result<PromiseRaw<'_, ()>> {
  let err = JsError::from(Error::new(e.code.as_str(), e.message()));
  PromiseRaw::reject(env, err.into_unknown(*env))
}

/// Not on Windows yet: `start` rejects with bash's `ENOENT` (no Git bash
/// found) or `ENOTSUP`.
#[napi]
pub struct ShellSession {}

#[napi]
impl ShellSession {
  #[napi(constructor)]
  pub fn new(env: Env) -> Result<Self> {
    throw(&env, "ShellSession")
  }

  #[napi]
  pub fn start(env: &Env) -> Result<PromiseRaw<'_, ()>> {
    reject_with(env, needs_bash("ShellSession"))
  }
}
