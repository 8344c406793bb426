//! The promise of a run: one threadsafe function per environment settles
//! every run's promise (issue 28).
//!
//! napi-rs's `spawn_future_with_callback` makes, on the JS thread, for each
//! call: an `Error` (with its stack trace) kept to reject with, a threadsafe
//! function (and its libuv handle, closed again after the call), an
//! environment cleanup hook, and two tasks on the runtime (the future and one
//! that waits for it to catch a panic). Here the JS thread makes the promise
//! and keeps how to convert the output under an id; the runtime runs the
//! future (a panic caught in the same task) and queues `(id, output)` to the
//! environment's one threadsafe function, which is referenced while a promise
//! is pending (so Node stays alive for it, as for napi-rs's) and unreferenced
//! otherwise.
//!
//! For the calls whose conversion cannot fail (`call::promise`): a rejection
//! made here carries no stack trace of the call site.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use napi::bindgen_prelude::*;
use napi::{sys, JsError};

type Output = std::thread::Result<Box<dyn Any + Send>>;
type Convert = Box<dyn FnOnce(sys::napi_env, Box<dyn Any + Send>) -> Result<sys::napi_value>>;

/// What the runtime queues to the JS thread.
struct Done {
  id: u64,
  output: Output,
}

/// A promise waiting for its run.
struct Pending {
  deferred: sys::napi_deferred,
  convert: Convert,
}

/// The environment's threadsafe function, as the runtime's threads see it:
/// `None` once Node finalized it (the environment is going away).
#[derive(Clone)]
struct Queue(Arc<RwLock<Option<Raw>>>);

#[derive(Clone, Copy)]
struct Raw(sys::napi_threadsafe_function);
// SAFETY: a napi_threadsafe_function is made to be called from any thread;
// it is only called while the lock says Node has not finalized it.
unsafe impl Send for Raw {}
// SAFETY: shared use is the same call (napi_call_threadsafe_function is
// thread-safe), made under the read lock that proves it not finalized.
unsafe impl Sync for Raw {}

impl Queue {
  /// Queue `done` to the JS thread; dropped when the environment is gone.
  fn send(&self, done: Done) {
    let guard = self.0.read().unwrap_or_else(|e| e.into_inner());
    let Some(raw) = *guard else { return };
    let data = Box::into_raw(Box::new(done));
    // SAFETY: `raw` is alive (its finalizer takes the write lock to clear
    // it); on success `call_js` owns `data`, on failure it is ours again.
    let status = unsafe {
      sys::napi_call_threadsafe_function(
        raw.0,
        data.cast(),
        sys::ThreadsafeFunctionCallMode::nonblocking,
      )
    };
    if status != sys::Status::napi_ok {
      // SAFETY: not queued: still ours
      drop(unsafe { Box::from_raw(data) });
    }
  }
}

/// The JS thread's side: the pending promises of this environment.
struct Bridge {
  queue: Queue,
  raw: Raw,
  pending: HashMap<u64, Pending>,
  next: u64,
}

thread_local! {
  static BRIDGE: RefCell<Option<Bridge>> = const { RefCell::new(None) };
}

/// Make this environment's threadsafe function (once per environment, from
/// the module's init on its JS thread).
pub fn init_env(env: &Env) -> Result<()> {
  let raw_env = env.raw();
  let name = env.create_string("exec-native:settle")?;
  let queue = Queue(Arc::new(RwLock::new(None)));
  let finalize_data = Box::into_raw(Box::new(queue.clone()));
  let mut raw = ptr::null_mut();
  // SAFETY: called on the JS thread with valid arguments; `finalize_data`
  // is given back to `finalized`, which frees it.
  let status = unsafe {
    sys::napi_create_threadsafe_function(
      raw_env,
      ptr::null_mut(),
      ptr::null_mut(),
      name.raw(),
      0,
      1,
      finalize_data.cast(),
      Some(finalized),
      ptr::null_mut(),
      Some(call_js),
      &mut raw,
    )
  };
  if status != sys::Status::napi_ok {
    // SAFETY: not handed to Node
    drop(unsafe { Box::from_raw(finalize_data) });
    return Err(Error::new(
      Status::GenericFailure,
      "exec: cannot make the threadsafe function that settles promises (EIO)",
    ));
  }
  // an idle addon does not keep Node alive: referenced only while a
  // promise is pending
  // SAFETY: on the JS thread, `raw` just made
  unsafe { sys::napi_unref_threadsafe_function(raw_env, raw) };
  *queue.0.write().unwrap_or_else(|e| e.into_inner()) = Some(Raw(raw));
  BRIDGE.with(|b| {
    *b.borrow_mut() = Some(Bridge {
      queue,
      raw: Raw(raw),
      pending: HashMap::new(),
      next: 0,
    })
  });
  Ok(())
}

/// Node finalized the threadsafe function (the environment is going away):
/// the runtime's threads stop queueing, and the promises still pending are
/// forgotten (their conversions may hold references into the environment).
unsafe extern "C" fn finalized(
  _env: sys::napi_env,
  data: *mut std::ffi::c_void,
  _hint: *mut std::ffi::c_void,
) {
  // SAFETY: `data` is the Box made in `init_env`, given back once
  let queue = unsafe { Box::from_raw(data.cast::<Queue>()) };
  *queue.0.write().unwrap_or_else(|e| e.into_inner()) = None;
  BRIDGE.with(|b| {
    if let Some(bridge) = b.borrow_mut().take() {
      for (_, p) in bridge.pending {
        std::mem::forget(p);
      }
    }
  });
}

/// On the JS thread: settle the promise `data` names.
unsafe extern "C" fn call_js(
  env: sys::napi_env,
  _js_callback: sys::napi_value,
  _context: *mut std::ffi::c_void,
  data: *mut std::ffi::c_void,
) {
  exec_core::trace::at("js.settle");
  // SAFETY: `data` is the Box queued by `Queue::send`, handed over once
  let done = unsafe { Box::from_raw(data.cast::<Done>()) };
  if env.is_null() {
    // the environment is going away: nothing to settle
    return;
  }
  let pending = BRIDGE.with(|b| {
    let mut b = b.borrow_mut();
    let bridge = b.as_mut()?;
    let p = bridge.pending.remove(&done.id)?;
    if bridge.pending.is_empty() {
      // SAFETY: on the JS thread, the function is alive (not finalized)
      unsafe { sys::napi_unref_threadsafe_function(env, bridge.raw.0) };
    }
    Some(p)
  });
  let Some(Pending { deferred, convert }) = pending else {
    return;
  };
  let settled = match done.output {
    Ok(out) => convert(env, out),
    Err(panic) => Err(Error::new(
      Status::GenericFailure,
      panic_message(panic.as_ref()),
    )),
  };
  // SAFETY: on the JS thread, `deferred` was made by napi_create_promise
  // and is settled exactly once, here
  unsafe {
    match settled {
      Ok(v) => {
        sys::napi_resolve_deferred(env, deferred, v);
        exec_core::trace::at("js.resolved");
      }
      Err(e) => {
        let value = JsError::from(e).into_value(env);
        sys::napi_reject_deferred(env, deferred, value);
      }
    }
  }
}

/// What napi-rs rejects with for a panic of the future.
fn panic_message(panic: &(dyn Any + Send)) -> String {
  match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
    (Some(s), _) => (*s).to_owned(),
    (_, Some(s)) => s.clone(),
    _ => "Panic in async function".to_owned(),
  }
}

/// A future whose panic is caught (the promise rejects, as napi-rs's does).
struct CatchUnwind<F>(F);

impl<F: Future> Future for CatchUnwind<F> {
  type Output = std::thread::Result<F::Output>;
  fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
    // SAFETY: the inner future is never moved out of the pinned wrapper
    let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
    match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
      Ok(Poll::Pending) => Poll::Pending,
      Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
      Err(panic) => Poll::Ready(Err(panic)),
    }
  }
}

/// Whether this thread's environment has its threadsafe function (not
/// before the module's init, nor once Node finalized it).
pub fn ready() -> bool {
  BRIDGE.with(|b| b.borrow().is_some())
}

/// A promise of `fut`'s output converted by `convert` on the JS thread; the
/// future runs on the runtime. Only where [`ready`].
pub fn spawn<'env, F, T, V, C>(env: &'env Env, fut: F, convert: C) -> Result<PromiseRaw<'env, V>>
where
  F: Future<Output = T> + Send + 'static,
  T: Send + 'static,
  V: ToNapiValue,
  C: FnOnce(&Env, T) -> Result<V> + 'static,
{
  BRIDGE.with(|b| {
    let mut b = b.borrow_mut();
    let Some(bridge) = b.as_mut() else {
      return Err(Error::new(
        Status::GenericFailure,
        "exec: the environment is going away (ECANCELED)",
      ));
    };
    let raw_env = env.raw();
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: on the JS thread
    let status = unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
      return Err(Error::new(
        Status::GenericFailure,
        "exec: cannot create a promise (EIO)",
      ));
    }
    let id = bridge.next;
    bridge.next += 1;
    let convert: Convert = Box::new(move |raw_env, out| {
      let t = *out
        .downcast::<T>()
        .expect("a run's output has the type its promise expects");
      let env = Env::from_raw(raw_env);
      let v = convert(&env, t)?;
      // SAFETY: as above
      unsafe { V::to_napi_value(raw_env, v) }
    });
    if bridge.pending.is_empty() {
      // SAFETY: on the JS thread, the function is alive
      unsafe { sys::napi_ref_threadsafe_function(raw_env, bridge.raw.0) };
    }
    bridge.pending.insert(id, Pending { deferred, convert });
    let queue = bridge.queue.clone();
    napi::bindgen_prelude::spawn(async move {
      exec_core::trace::at("rt.polled");
      let output = CatchUnwind(fut)
        .await
        .map(|t| Box::new(t) as Box<dyn Any + Send>);
      exec_core::trace::at("rt.done");
      queue.send(Done { id, output });
    });
    exec_core::trace::at("js.spawned");
    Ok(PromiseRaw::new(raw_env, promise))
  })
}
