//! Turning core errors into JavaScript errors with a stable `err.code`.

use exec_core::{ErrorCode, ExecError};
use napi::bindgen_prelude::*;
use napi::JsTypeError;

/// A TypeError whose `code` is `EINVAL` and whose message is `exec: ... (EINVAL)`.
pub fn type_error(what: impl Into<String>) -> ExecError {
  ExecError::new(ErrorCode::EINVAL, what)
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
