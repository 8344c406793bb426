//! AbortSignal support. napi-rs's own `AbortSignal` overwrites `signal.onabort`
//! and cannot be moved into a future, so we add an `abort` event listener that
//! cancels a `Send` token, and remove it when the run settles.

use exec_core::CancellationToken;
use napi::bindgen_prelude::*;

use crate::read::{take_exception, ArgResult, At, JsSignal};

/// `signal.addEventListener` / `removeEventListener`.
type ListenerMethod<'a> = Function<'a, FnArgs<(String, Function<'a, (), ()>)>, Unknown<'a>>;

/// A listener attached to a signal; `detach` removes it.
pub struct AbortBinding {
  signal: ObjectRef<false>,
  listener: FunctionRef<(), ()>,
}

impl AbortBinding {
  pub fn detach(self, env: &Env) {
    let r = (|| -> Result<()> {
      let signal = self.signal.get_value(env)?;
      let listener = self.listener.borrow_back(env)?;
      let remove: ListenerMethod = signal.get_named_property("removeEventListener")?;
      remove.apply(signal, FnArgs::from(("abort".to_owned(), listener)))?;
      Ok(())
    })();
    // a signal whose removeEventListener throws must not keep the result
    // from being delivered: the run is over, its listener is moot
    if r.is_err() {
      take_exception(env.raw());
    }
  }
}

/// Wire `signal` (at `at` in the arguments) to `token`. An already aborted
/// signal cancels at once.
pub fn bind(
  env: &Env,
  signal: Option<JsSignal>,
  at: &At,
  token: &CancellationToken,
) -> ArgResult<Option<AbortBinding>> {
  let Some(JsSignal(v)) = signal else {
    return Ok(None);
  };
  let raw = env.raw();
  let bad = || match take_exception(raw) {
    Some(why) => at.error(format_args!("could not be used: {why}")),
    None => at.error("must be an AbortSignal"),
  };
  // SAFETY: Object's cast reads the value as a napi object handle in `env`'s scope; a non-object
  // fails in napi_get_named_property below (mapped to `bad`), so no wrong type is assumed.
  let signal: Object = unsafe { v.cast() }.map_err(|_| bad())?;
  let aborted: Unknown = signal.get_named_property("aborted").map_err(|_| bad())?;
  if aborted.get_type().ok() != Some(napi::ValueType::Boolean) {
    return Err(bad());
  }
  // SAFETY: `aborted` was checked above to be a Boolean, the type `cast::<bool>` reads.
  if unsafe { aborted.cast::<bool>() }.unwrap_or(false) {
    token.cancel();
    return Ok(None);
  }
  let add: ListenerMethod = signal
    .get_named_property("addEventListener")
    .map_err(|_| bad())?;
  let t = token.clone();
  let listener = env
    .create_function_from_closure::<(), (), _>("onAbort", move |_ctx| {
      t.cancel();
      Ok(())
    })
    .map_err(|e| at.error(e))?;
  add
    .apply(signal, FnArgs::from(("abort".to_owned(), listener)))
    .map_err(|_| bad())?;
  Ok(Some(AbortBinding {
    signal: signal.create_ref().map_err(|e| at.error(e))?,
    listener: listener.create_ref().map_err(|e| at.error(e))?,
  }))
}
