//! Turning core errors into JavaScript errors with a stable `err.code`.

use exec_core::{ErrorCode, ExecError};
use napi::bindgen_prelude::*;
use napi::{JsError, JsTypeError};

/// A TypeError whose `code` is `EINVAL` and whose message is `exec: ... (EINVAL)`.
pub fn type_error(what: impl Into<String>) -> ExecError {
  ExecError::new(ErrorCode::EINVAL, what)
}

/// An `Error` whose `code` is the exec code, made on the JS thread: what a
/// promise of ours rejects with.
pub fn coded_error(env: &Env, e: ExecError) -> Error {
  let err = JsError::from(Error::new(e.code.as_str(), e.message()));
  Error::from(err.into_unknown(*env))
}

/// Throw an `Error` whose `code` is the exec code from a synchronous call.
pub fn throw_coded(env: &Env, e: &ExecError) -> Error {
  let err = JsError::from(Error::new(e.code.as_str(), e.message()));
  let _ = env.throw(err.into_unknown(*env));
  Error::new(Status::PendingException, e.message())
}

/// Throw a `TypeError` with `code` `EINVAL` from a synchronous call.
pub fn throw_type(env: &Env, e: &ExecError) -> Error {
  let err = JsTypeError::from(Error::new(e.code.as_str(), e.message()));
  let _ = env.throw(err.into_unknown(*env));
  Error::new(Status::PendingException, e.message())
}

/// A rejected promise holding a `TypeError` (wrong argument types reject, not throw).
pub fn reject_type_error<'env, T: ToNapiValue>(
  env: &'env Env,
  e: ExecError,
) -> Result<PromiseRaw<'env, T>> {
  let err = JsTypeError::from(Error::new(e.code.as_str(), e.message()));
  let value = err.into_unknown(*env);
  PromiseRaw::reject(env, value)
}
