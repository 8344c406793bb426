//! Windows: the exports whose features the Windows build leaves out for now
//! (issue 25). Each has the name it has on Linux and macOS, so that
//! `index.js` exports the same API everywhere, and fails with
//! `exec: <what> is not supported on Windows yet (ENOTSUP)`: a class's
//! constructor and a synchronous function throw it, an asynchronous one
//! rejects with it. Nothing is silently ignored.

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

/// A promise rejected with `what`'s ENOTSUP error.
fn reject<'env>(env: &'env Env, what: &str) -> Result<PromiseRaw<'env, ()>> {
  let e = not_yet(what);
  let err = JsError::from(Error::new(e.code.as_str(), e.message()));
  PromiseRaw::reject(env, err.into_unknown(*env))
}

macro_rules! unsupported_class {
  ($($name:ident => $what:literal),* $(,)?) => {$(
    #[doc = concat!("Not supported on Windows yet: the constructor throws `ENOTSUP`.")]
    #[napi]
    pub struct $name {}

    #[napi]
    impl $name {
      #[napi(constructor)]
      pub fn new(env: Env) -> Result<Self> {
        throw(&env, $what)
      }
    }
  )*};
}

unsupported_class! {
  CommandRunner => "CommandRunner (the agent tool's shell sessions)",
  NodeSession => "NodeSession",
  ProcessManager => "ProcessManager (pipes and ConPTY)",
  ShellSession => "ShellSession",
}

#[napi]
pub fn run_command(env: &Env) -> Result<PromiseRaw<'_, ()>> {
  reject(env, "runCommand (the agent tool)")
}

#[napi]
pub fn kill_background(env: &Env) -> Result<PromiseRaw<'_, ()>> {
  reject(env, "killBackground")
}

#[napi]
pub fn serve(env: &Env) -> Result<PromiseRaw<'_, ()>> {
  reject(env, "serve")
}

#[napi]
pub fn serve_mcp(env: &Env) -> Result<PromiseRaw<'_, ()>> {
  reject(env, "serveMcp (the MCP server)")
}

#[napi]
pub fn check_background(env: Env) -> Result<()> {
  throw(&env, "checkBackground")
}

#[napi]
pub fn list_background(env: Env) -> Result<()> {
  throw(&env, "listBackground")
}

#[napi]
pub fn command_tool(env: Env) -> Result<()> {
  throw(&env, "commandTool")
}

#[napi]
pub fn command_tools(env: Env) -> Result<()> {
  throw(&env, "commandTools")
}

#[napi]
pub fn sanitize(env: Env) -> Result<()> {
  throw(&env, "sanitize")
}

#[napi]
pub fn truncate_tail(env: Env) -> Result<()> {
  throw(&env, "truncateTail")
}

/// End every run started from this Node environment that is still running
/// (`TerminateJobObject`). Returns how many were ended.
#[napi]
pub fn kill_all_process_groups() -> u32 {
  exec_core::process::registry::kill_all(Some(crate::host::owner())) as u32
}
