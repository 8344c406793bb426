//! The one shape of an asynchronous call: read the arguments (a wrong one
//! rejects with a TypeError, code `EINVAL`, before anything starts), run a
//! future on the runtime, convert its output on the JS thread. Also the one
//! way to make a JavaScript function callable from the runtime, and the
//! `error` / `errorCode` pair of every result.

use std::future::Future;

use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;

use crate::abort::AbortBinding;
use crate::error::{coded_error, reject_type_error, throw_type};
use crate::read::{ArgResult, At, JsFn};

/// A promise of `fut`'s output converted by `convert` on the JS thread, or,
/// when reading the arguments failed, a promise rejected with that TypeError.
pub fn promise<'env, F, T, V, C>(
  env: &'env Env,
  fut: ArgResult<F>,
  convert: C,
) -> Result<PromiseRaw<'env, V>>
where
  F: Future<Output = T> + Send + 'static,
  T: Send + 'static,
  V: ToNapiValue,
  C: FnOnce(&Env, T) -> Result<V> + 'static,
{
  exec_core::trace::at("js.args");
  match fut {
    Err(e) => reject_type_error(env, e),
    // one threadsafe function of the environment settles it (promise.rs);
    // napi-rs's own bridge where the environment has none
    Ok(fut) if crate::promise::ready() => crate::promise::spawn(env, fut, convert),
    Ok(fut) => env.spawn_future_with_callback(async move { Ok(fut.await) }, convert),
  }
}

/// [`promise`] of a call that takes an `AbortSignal`: `run` makes the future
/// from the arguments read, and the signal's listener is removed when the
/// promise settles.
pub fn abortable<'env, A, F, T, V, C>(
  env: &'env Env,
  args: ArgResult<(A, Option<AbortBinding>)>,
  run: impl FnOnce(A) -> F,
  convert: C,
) -> Result<PromiseRaw<'env, V>>
where
  F: Future<Output = T> + Send + 'static,
  T: Send + 'static,
  V: ToNapiValue,
  C: FnOnce(&Env, T) -> Result<V> + 'static,
{
  let (fut, binding) = match args {
    Ok((a, binding)) => (Ok(run(a)), binding),
    Err(e) => (Err(e), None),
  };
  promise(env, fut, move |env, t| {
    if let Some(b) = binding {
      b.detach(env);
    }
    convert(env, t)
  })
}

/// [`promise`] of a future that may fail: a failure rejects with an `Error`
/// whose `code` is the exec code.
#[cfg_attr(windows, allow(dead_code))] // used by the POSIX-only features
pub fn fallible<'env, F, T, V, C>(
  env: &'env Env,
  fut: ArgResult<F>,
  convert: C,
) -> Result<PromiseRaw<'env, V>>
where
  F: Future<Output = std::result::Result<T, ExecError>> + Send + 'static,
  T: Send + 'static,
  V: ToNapiValue,
  C: FnOnce(&Env, T) -> Result<V> + 'static,
{
  promise(env, fut, move |env, r| match r {
    Ok(t) => convert(env, t),
    Err(e) => Err(coded_error(env, e)),
  })
}

/// The arguments of a synchronous call (a constructor, a getter-like
/// method): a wrong one throws the TypeError.
pub fn sync_args<T>(env: &Env, args: ArgResult<T>) -> Result<T> {
  args.map_err(|e| throw_type(env, &e))
}

/// A JavaScript function taking one `T`, callable from any thread. `WEAK`:
/// whether it lets Node exit while it is alive (an output callback: the
/// pending promise keeps Node alive) or not (an event listener).
pub type JsCallback<T, const WEAK: bool> =
  ThreadsafeFunction<T, Unknown<'static>, T, Status, false, WEAK, 0>;

/// Make `f` callable from the runtime.
pub fn callback<T, const WEAK: bool>(f: JsFn, at: &At) -> ArgResult<JsCallback<T, WEAK>>
where
  T: ToNapiValue + JsValuesTupleIntoVec + 'static,
{
  // the function's return value is never read: `Unknown<'static>` names it
  // without borrowing the call's scope
  // SAFETY: a JsFn is made only from a value whose type was checked to be Function
  // (`JsFn::from_js`), the type this cast names.
  let f: Function<T, Unknown<'static>> = unsafe { f.0.cast() }.map_err(|e| at.error(e))?;
  f.build_threadsafe_function()
    .weak::<WEAK>()
    .callee_handled::<false>()
    .build()
    .map_err(|e| at.error(e))
}

/// The `error` field of a result: `exec: <what> (<CODE>)`.
pub fn error_message(e: &Option<ExecError>) -> Option<String> {
  e.as_ref().map(ExecError::message)
}

/// The `errorCode` field of a result, beside [`error_message`].
pub fn error_code(e: &Option<ExecError>) -> Option<String> {
  e.as_ref().map(|e| e.code.as_str().to_owned())
}
