//! Text for JavaScript, prepared off the JS thread.
//!
//! A big string made with `napi_create_string_utf8` costs the JS thread a
//! decode and a fresh large-object allocation whose pages fault in one by one
//! (`perf record` of a 512 MiB stream: page faults were the main thread's top
//! cost). Here the worker thread does the work instead: ASCII text (the common
//! case) is kept as Latin-1 bytes, other text is encoded to UTF-16, and a big
//! string is handed to V8 as an *external* string that points at our buffer
//! (`node_api_create_external_string_*`, Node 20.4+, looked up at run time;
//! V8 frees the buffer through the finalizer). Small strings, and Node
//! versions without the call, get a plain copy.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, OnceLock};

use napi::bindgen_prelude::*;
use napi::sys;

/// A string ready to be handed to JavaScript with a plain copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsText {
  Latin1(Vec<u8>),
  Utf16(Vec<u16>),
}

impl JsText {
  /// Convert (cost: one pass over ASCII text; an encode for other text).
  pub fn new(s: String) -> Self {
    if s.is_ascii() {
      JsText::Latin1(s.into_bytes())
    } else {
      let units = s.encode_utf16().collect();
      give_back(s.into_bytes());
      JsText::Utf16(units)
    }
  }

  /// Length in UTF-16 code units (what `string.length` says in JavaScript).
  pub fn js_len(&self) -> usize {
    match self {
      JsText::Latin1(b) => b.len(),
      JsText::Utf16(u) => u.len(),
    }
  }
}

impl From<String> for JsText {
  fn from(s: String) -> Self {
    JsText::new(s)
  }
}

impl TypeName for JsText {
  fn type_name() -> &'static str {
    "String"
  }

  fn value_type() -> ValueType {
    ValueType::String
  }
}

/// From this many units a string is handed to V8 as an external string, below
/// it is copied. Streamed chunks are at most 64 KiB (`stream.rs`) and always
/// copied: a copy lands in V8's young generation, where a cheap scavenge
/// frees it, while an external string waits for a full collection (measured
/// in docs/PERFORMANCE.md, streaming item 1). Captured results over 64 KiB still
/// go external (one big string, no copy on the JS thread).
const EXTERNAL_MIN: usize = 64 * 1024 + 1;

type Finalize = unsafe extern "C" fn(sys::napi_env, *mut c_void, *mut c_void);
type CreateExternal<T> = unsafe extern "C" fn(
  sys::napi_env,
  *const T,
  isize,
  Option<Finalize>,
  *mut c_void,
  *mut sys::napi_value,
  *mut bool,
) -> sys::napi_status;

struct ExternalApi {
  latin1: Option<CreateExternal<u8>>,
  utf16: Option<CreateExternal<u16>>,
}

fn external_api() -> &'static ExternalApi {
  static API: OnceLock<ExternalApi> = OnceLock::new();
  API.get_or_init(|| {
    #[cfg(unix)]
    // SAFETY: `name` is a live NUL-terminated CStr; dlsym with RTLD_DEFAULT only looks the symbol
    // up and returns null when it is missing.
    let find = |name: &std::ffi::CStr| unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    // Windows: not looked up (node.exe's exports are not searched): the
    // strings are copied, as on a Node without them
    #[cfg(windows)]
    let find = |_: &std::ffi::CStr| std::ptr::null_mut::<c_void>();
    let latin1 = find(c"node_api_create_external_string_latin1");
    let utf16 = find(c"node_api_create_external_string_utf16");
    // SAFETY: the signatures are those of node_api.h (Node 20.4+)
    unsafe {
      ExternalApi {
        latin1: (!latin1.is_null())
          .then(|| std::mem::transmute::<*mut c_void, CreateExternal<u8>>(latin1)),
        utf16: (!utf16.is_null())
          .then(|| std::mem::transmute::<*mut c_void, CreateExternal<u16>>(utf16)),
      }
    }
  })
}

/// Bytes of external strings V8 let go of since the last adjustment.
///
/// V8 does not count a Node-API external string's buffer as external memory,
/// so without `napi_adjust_external_memory` no garbage collection is ever
/// triggered by them (measured: a 1 GiB stream grew the RSS by 1 GiB). The
/// finalizer may run inside a garbage collection, where calling into V8 is not
/// allowed: it only adds to this counter, settled at the next creation.
static FREED: AtomicI64 = AtomicI64::new(0);

unsafe extern "C" fn free_latin1(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
  // V8 is done with the characters (or copied them): the buffer goes back
  // SAFETY: `hint` is the Box<Vec<u8>> `external` leaked with Box::into_raw for this string; V8
  // calls the finalizer once, so the box is taken back exactly once.
  let buf = *unsafe { Box::from_raw(hint.cast::<Vec<u8>>()) };
  FREED.fetch_add(buf.len() as i64, Ordering::Relaxed);
  give_back(buf);
}

unsafe extern "C" fn free_utf16(_env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
  // SAFETY: `hint` is the Box<Vec<u16>> `external` leaked with Box::into_raw for this string; V8
  // calls the finalizer once, so the box is taken back exactly once.
  let buf = unsafe { Box::from_raw(hint.cast::<Vec<u16>>()) };
  FREED.fetch_add(2 * buf.len() as i64, Ordering::Relaxed);
}

/// Chunk buffers (see `stream.rs`) V8 is done with, for the next chunks.
///
/// A stream fills a 64 KiB buffer per chunk on the runtime's thread and V8
/// copies it (or, for a Buffer, keeps it until a garbage collection). Fresh
/// buffers cost page faults: glibc gives a freed 64 KiB block back to the
/// kernel when it tops the arena, so the next one faults its 16 pages in
/// again (`perf record` of a 1 GiB stream: `clear_page_erms` under the pump's
/// `memmove`, 12% of all samples). Buffers come back here instead, from the
/// JS thread, and the pump fills them again while their pages are mapped.
static POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Buffers kept at most: two batches of a stream (see `stream.rs`), and a few.
const POOL_MAX: usize = 40;

/// An empty buffer of `capacity` bytes for a chunk, reused when one came back.
pub fn chunk_buffer(capacity: usize) -> Vec<u8> {
  let reused = POOL.lock().ok().and_then(|mut p| p.pop());
  match reused {
    Some(b) if b.capacity() == capacity => b,
    _ => Vec::with_capacity(capacity),
  }
}

/// Give a chunk buffer back (only the stream's size is kept).
pub fn give_back(mut buf: Vec<u8>) {
  if buf.capacity() != crate::stream::CHUNK {
    return;
  }
  buf.clear();
  if let Ok(mut p) = POOL.lock() {
    if p.len() < POOL_MAX {
      p.push(buf);
    }
  }
}

/// Hand `data` to V8 without a copy; gives it back when `create` is missing.
unsafe fn external<T>(
  env: sys::napi_env,
  data: Vec<T>,
  create: Option<CreateExternal<T>>,
  free: Finalize,
) -> std::result::Result<Result<sys::napi_value>, Vec<T>> {
  let Some(create) = create else {
    return Err(data);
  };
  if data.len() < EXTERNAL_MIN {
    return Err(data);
  }
  let len = data.len();
  let boxed = Box::into_raw(Box::new(data));
  // SAFETY: `boxed` came from Box::into_raw just above and is not freed until the finalizer (or the
  // error path below) takes it back.
  let chars = unsafe { (*boxed).as_ptr() };
  let mut out = ptr::null_mut();
  let mut copied = false;
  // SAFETY: `env` is the caller's live env (this fn's contract); `chars` points at `len` units of
  // the boxed Vec, which stays put (boxed, never resized) until `free` runs with `boxed` as its
  // hint; `out` and `copied` are live out-pointers.
  let status = unsafe {
    create(
      env,
      chars,
      len as isize,
      Some(free),
      boxed.cast(),
      &mut out,
      &mut copied,
    )
  };
  if status != sys::Status::napi_ok {
    // no finalizer ran: the buffer is still ours
    // SAFETY: the call failed, so V8 took no ownership and no finalizer will run: `boxed` is still
    // only ours, taken back once.
    drop(unsafe { Box::from_raw(boxed) });
    return Ok(Err(Error::new(
      Status::from(status),
      format!("exec: cannot create a string of {len} units (EIO)"),
    )));
  }
  // tell V8 what it holds now, so that it collects what it no longer needs
  let held = (len * std::mem::size_of::<T>()) as i64 - FREED.swap(0, Ordering::Relaxed);
  let mut total = 0i64;
  // SAFETY: `env` is the caller's live env and `total` a live out-pointer.
  unsafe { sys::napi_adjust_external_memory(env, held, &mut total) };
  Ok(Ok(out))
}

impl ToNapiValue for JsText {
  unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
    let api = external_api();
    let len = val.js_len();
    let mut out = ptr::null_mut();
    let status = match val {
      // SAFETY: `env` is the live env this to_napi_value was called with; `free_latin1` takes back
      // a Box<Vec<u8>>, the type handed over.
      JsText::Latin1(b) => match unsafe { external(env, b, api.latin1, free_latin1) } {
        Ok(r) => return r,
        Err(b) => {
          // SAFETY: `env` is live; `b` is a live Vec whose pointer and length bound what napi
          // copies.
          let status = unsafe {
            sys::napi_create_string_latin1(env, b.as_ptr().cast(), b.len() as isize, &mut out)
          };
          give_back(b);
          status
        }
      },
      // SAFETY: `env` is the live env this to_napi_value was called with; `free_utf16` takes back a
      // Box<Vec<u16>>, the type handed over.
      JsText::Utf16(u) => match unsafe { external(env, u, api.utf16, free_utf16) } {
        Ok(r) => return r,
        // SAFETY: `env` is live; `u` is a live Vec whose pointer and length bound what napi copies.
        Err(u) => unsafe {
          sys::napi_create_string_utf16(env, u.as_ptr(), u.len() as isize, &mut out)
        },
      },
    };
    check_status!(
      status,
      "exec: cannot create a string of {} units (EIO)",
      len
    )?;
    Ok(out)
  }
}

/// Bytes for a Buffer (a streamed chunk).
pub struct JsBytes(pub Vec<u8>);

impl TypeName for JsBytes {
  fn type_name() -> &'static str {
    "Buffer"
  }

  fn value_type() -> ValueType {
    ValueType::Object
  }
}

impl ToNapiValue for JsBytes {
  unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> Result<sys::napi_value> {
    // Copied into a Buffer of Node's, and the chunk buffer goes back to the
    // pool at once, its pages still mapped and in cache. Handing the Vec over
    // as an external Buffer (no copy) kept it until a garbage collection and
    // its finalizer a turn later: fresh pages for the pump meanwhile and a
    // peak RSS three times Node's own (docs/PERFORMANCE.md, streaming item 4).
    let len = val.0.len();
    let mut out = ptr::null_mut();
    let mut data = ptr::null_mut();
    let status =
      // SAFETY: `env` is the live env this to_napi_value was called with; `val.0` is a live Vec of
      // `len` bytes that napi copies before it returns; `data` and `out` are live out-pointers.
      unsafe { sys::napi_create_buffer_copy(env, len, val.0.as_ptr().cast(), &mut data, &mut out) };
    give_back(val.0);
    check_status!(
      status,
      "exec: cannot create a Buffer of {} bytes (EIO)",
      len
    )?;
    Ok(out)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn ascii_goes_as_latin1_and_the_rest_as_utf16() {
    assert_eq!(JsText::new("abc".into()), JsText::Latin1(b"abc".to_vec()));
    let t = JsText::new("é😀".into());
    assert_eq!(t, JsText::Utf16(vec![0xe9, 0xd83d, 0xde00]));
    assert_eq!(t.js_len(), 3);
  }
}
