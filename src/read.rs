//! Reading JavaScript arguments. Every option object is declared once, with
//! [`js_options!`]: napi-rs turns the declaration (and its doc comments) into
//! `index.d.ts`, and the same declaration gets a [`FromJs`] reader that
//! carries the path of each value, so a wrong one is a `TypeError` that names
//! it: `exec: options.limits.memoryBytes must be at least 1, got 0 (EINVAL)`.
//! A call reads its arguments before it starts anything and rejects (or, for
//! a synchronous call, throws) with that error; nothing is converted by
//! napi-rs's generic conversion, whose errors name Rust types.

use std::fmt;
use std::time::Duration;

use exec_core::ExecError;
use napi::bindgen_prelude::*;
use napi::ValueType;

use crate::error::type_error;

pub type ArgResult<T> = std::result::Result<T, ExecError>;

/// Where a value sits in the caller's arguments: `options`,
/// `options.limits.memoryBytes`, `args[2]`. Made on the stack while
/// reading; spelled out only in an error.
#[derive(Clone, Copy)]
pub struct At<'a> {
  parent: Option<&'a At<'a>>,
  name: &'a str,
  index: Option<usize>,
}

impl<'a> At<'a> {
  /// An argument of the call.
  pub const fn arg(name: &'a str) -> Self {
    At {
      parent: None,
      name,
      index: None,
    }
  }

  /// A property of the object at `self`.
  pub fn key(&'a self, name: &'a str) -> At<'a> {
    At {
      parent: Some(self),
      name,
      index: None,
    }
  }

  /// An item of the array at `self`.
  pub fn item(&'a self, index: usize) -> At<'a> {
    At {
      parent: Some(self),
      name: "",
      index: Some(index),
    }
  }

  /// `exec: <path> <what> (EINVAL)`, a TypeError.
  pub fn error(&self, what: impl fmt::Display) -> ExecError {
    type_error(format!("{self} {what}"))
  }

  /// "must be <expected>, got <what v is>".
  pub fn wrong(&self, expected: &str, v: &Unknown) -> ExecError {
    self.error(format_args!("must be {expected}, got {}", kind_name(v)))
  }
}

impl fmt::Display for At<'_> {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if let Some(p) = self.parent {
      p.fmt(f)?;
    }
    match (self.index, self.parent) {
      (Some(i), _) => write!(f, "[{i}]"),
      (None, Some(_)) => write!(f, ".{}", self.name),
      (None, None) => f.write_str(self.name),
    }
  }
}

/// A value read from JavaScript with the path it came from.
pub trait FromJs<'env>: Sized {
  /// Read `v`, which is neither `undefined` nor `null`.
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self>;
}

fn kind(v: &Unknown) -> ValueType {
  v.get_type().unwrap_or(ValueType::Unknown)
}

/// The type of `v` in an error: "a string", "null".
pub fn kind_name(v: &Unknown) -> &'static str {
  match kind(v) {
    ValueType::Undefined => "undefined",
    ValueType::Null => "null",
    ValueType::Boolean => "a boolean",
    ValueType::Number => "a number",
    ValueType::String => "a string",
    ValueType::Symbol => "a symbol",
    ValueType::Object => "an object",
    ValueType::Function => "a function",
    ValueType::BigInt => "a bigint",
    _ => "an unknown value",
  }
}

pub fn is_nullish(v: &Unknown) -> bool {
  matches!(kind(v), ValueType::Undefined | ValueType::Null)
}

/// A required argument.
pub fn required<'env, T: FromJs<'env>>(v: Unknown<'env>, at: &At) -> ArgResult<T> {
  if is_nullish(&v) {
    return Err(at.error("is required"));
  }
  T::from_js(v, at)
}

/// An optional argument: absent, `undefined` and `null` are `None`.
pub fn optional<'env, T: FromJs<'env>>(v: Option<Unknown<'env>>, at: &At) -> ArgResult<Option<T>> {
  match v {
    Some(v) if !is_nullish(&v) => T::from_js(v, at).map(Some),
    _ => Ok(None),
  }
}

/// A field of an options object: `Option<T>` (may be absent, `undefined` or
/// `null`) or [`Required<T>`].
pub trait Field<'env>: Sized {
  fn read(obj: &Object<'env>, at: &At, key: &str) -> ArgResult<Self>;
}

impl<'env, T: FromJs<'env>> Field<'env> for Option<T> {
  fn read(obj: &Object<'env>, at: &At, key: &str) -> ArgResult<Self> {
    field(obj, at, key)
  }
}

/// A field that must be given (`spec.argv`): TypeScript shows it without `?`.
#[derive(Default)]
#[cfg_attr(windows, allow(dead_code))] // used by the POSIX-only features
pub struct Required<T>(pub T);

impl<'env, T: FromJs<'env>> Field<'env> for Required<T> {
  fn read(obj: &Object<'env>, at: &At, key: &str) -> ArgResult<Self> {
    field(obj, at, key)?
      .map(Required)
      .ok_or_else(|| at.key(key).error("is required"))
  }
}

/// The property `key` of `obj` (at `at`): `None` when absent, `undefined` or
/// `null`. A getter or Proxy trap that throws is an error naming the property.
pub fn field<'env, T: FromJs<'env>>(
  obj: &Object<'env>,
  at: &At,
  key: &str,
) -> ArgResult<Option<T>> {
  let at = at.key(key);
  let v = property(obj, &at, key)?;
  optional(Some(v), &at)
}

fn property<'env>(obj: &Object<'env>, at: &At, key: &str) -> ArgResult<Unknown<'env>> {
  obj.get_named_property(key).map_err(|e| {
    let why = take_exception(obj.value().env).unwrap_or_else(|| e.to_string());
    at.error(format_args!("could not be read: {why}"))
  })
}

/// The message of a JavaScript exception now pending (a getter or a Proxy
/// trap of the caller's object threw), cleared: the call then rejects with a
/// clear `EINVAL` instead of throwing the caller's error synchronously.
pub fn take_exception(env: napi::sys::napi_env) -> Option<String> {
  use napi::sys;
  let mut pending = false;
  // SAFETY: `env` is the live napi_env of the current call (on the JS thread) and `pending` a live
  // bool for it to write.
  if unsafe { sys::napi_is_exception_pending(env, &mut pending) } != sys::Status::napi_ok
    || !pending
  {
    return None;
  }
  let mut exc = std::ptr::null_mut();
  // SAFETY: `env` is live; `exc` is a live out-pointer for the handle.
  unsafe { sys::napi_get_and_clear_last_exception(env, &mut exc) };
  if exc.is_null() {
    return Some("it threw".to_owned());
  }
  // String(exception), without letting a second throw escape
  let mut s = std::ptr::null_mut();
  // SAFETY: `env` is live; `exc` is the exception handle just taken in this scope and `s` a live
  // out-pointer.
  if unsafe { sys::napi_coerce_to_string(env, exc, &mut s) } != sys::Status::napi_ok {
    let mut again = std::ptr::null_mut();
    // SAFETY: `env` is live; `again` is a live out-pointer; this only clears a second exception.
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut again) };
    return Some("it threw".to_owned());
  }
  let mut len = 0usize;
  // SAFETY: `env` is live and `s` a string handle of this scope; a null buffer with size 0 asks
  // only for the length, written to the live `len`.
  unsafe { sys::napi_get_value_string_utf8(env, s, std::ptr::null_mut(), 0, &mut len) };
  let mut buf = vec![0u8; len + 1];
  // SAFETY: `buf` is a live Vec of `len + 1` bytes, its length passed as the size, so napi writes
  // within it (NUL included).
  unsafe { sys::napi_get_value_string_utf8(env, s, buf.as_mut_ptr().cast(), buf.len(), &mut len) };
  buf.truncate(len);
  Some(format!("it threw {}", String::from_utf8_lossy(&buf)))
}

/// The own enumerable string keys of `obj` (not its prototype's, as an
/// object spread sees them). A Proxy trap that throws is an error naming `at`.
fn own_keys(obj: &Object, at: &At) -> ArgResult<Vec<String>> {
  use napi::sys;
  let env = obj.value().env;
  let failed = |why: String| at.error(format_args!("could not be read: {why}"));
  let mut names = std::ptr::null_mut();
  // SAFETY: `env` and the object's value are the live handles of this call.
  let status = unsafe {
    sys::napi_get_all_property_names(
      env,
      obj.value().value,
      sys::KeyCollectionMode::own_only,
      sys::KeyFilter::enumerable | sys::KeyFilter::skip_symbols,
      sys::KeyConversion::numbers_to_strings,
      &mut names,
    )
  };
  if status != sys::Status::napi_ok {
    return Err(failed(
      take_exception(env).unwrap_or_else(|| "its keys could not be listed".to_owned()),
    ));
  }
  // SAFETY: napi_get_all_property_names returned an array of strings.
  let names = unsafe { Array::from_napi_value(env, names) }.map_err(|e| failed(e.to_string()))?;
  (0..names.len())
    .map(|i| {
      names
        .get_element::<String>(i)
        .map_err(|e| failed(e.to_string()))
    })
    .collect()
}

/// Refuse a key of `obj` (at `at`) that is not one of `known` (the
/// JavaScript names of its declaration), whatever its value: a misspelt
/// option would otherwise be ignored, and `limits: { memory }` would run
/// with no limit. The error names the nearest known key.
pub fn known_keys_only(obj: &Object, at: &At, known: &[String]) -> ArgResult<()> {
  for key in own_keys(obj, at)? {
    if known.contains(&key) {
      continue;
    }
    let at = at.key(&key);
    return Err(match nearest(&key, known) {
      Some(k) => at.error(format_args!("is not a known option; did you mean {k}?")),
      None => at.error(format_args!(
        "is not a known option; known: {}",
        known.join(", ")
      )),
    });
  }
  Ok(())
}

/// The known key nearest to `key`: fewest edits (case aside), among those a
/// few edits away or that contain it or are contained in it (`memory` ->
/// `memoryBytes`).
pub fn nearest<'k>(key: &str, known: &'k [String]) -> Option<&'k str> {
  let key = key.to_lowercase();
  known
    .iter()
    .filter_map(|k| {
      let lower = k.to_lowercase();
      let d = edit_distance(&key, &lower);
      let contains = key.len() >= 3 && (lower.contains(&key) || key.contains(&lower));
      (d <= 2.max(k.len() / 3) || contains).then_some((d, k.as_str()))
    })
    .min_by_key(|(d, _)| *d)
    .map(|(_, k)| k)
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
  let b: Vec<char> = b.chars().collect();
  let mut row: Vec<usize> = (0..=b.len()).collect();
  for (i, ca) in a.chars().enumerate() {
    let mut diag = row[0];
    row[0] = i + 1;
    for (j, cb) in b.iter().enumerate() {
      let next = (diag + usize::from(ca != *cb))
        .min(row[j] + 1)
        .min(row[j + 1] + 1);
      diag = row[j + 1];
      row[j + 1] = next;
    }
  }
  row[b.len()]
}

/// The name napi-rs gives a field in JavaScript: `extend_env` -> `extendEnv`.
pub fn camel_case(field: &str) -> String {
  let field = field.strip_prefix("r#").unwrap_or(field);
  let mut out = String::with_capacity(field.len());
  let mut upper = false;
  for c in field.chars() {
    match (c, upper) {
      ('_', _) => upper = true,
      (c, true) => {
        out.extend(c.to_uppercase());
        upper = false;
      }
      (c, false) => out.push(c),
    }
  }
  out
}

// ---------------------------------------------------------------- primitives

impl<'env> FromJs<'env> for String {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if kind(&v) != ValueType::String {
      return Err(at.wrong("a string", &v));
    }
    // SAFETY: `kind` was checked above to be String, the type this cast reads.
    unsafe { v.cast::<String>() }.map_err(|e| at.error(e))
  }
}

impl<'env> FromJs<'env> for bool {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if kind(&v) != ValueType::Boolean {
      return Err(at.wrong("a boolean", &v));
    }
    // SAFETY: `kind` was checked above to be Boolean, the type this cast reads.
    unsafe { v.cast::<bool>() }.map_err(|e| at.error(e))
  }
}

/// A number that is not NaN.
impl<'env> FromJs<'env> for f64 {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if kind(&v) != ValueType::Number {
      return Err(at.wrong("a number", &v));
    }
    // SAFETY: `kind` was checked above to be Number, the type this cast reads.
    let n = unsafe { v.cast::<f64>() }.map_err(|e| at.error(e))?;
    if n.is_nan() {
      return Err(at.error("must be a number, got NaN"));
    }
    Ok(n)
  }
}

impl<'env> FromJs<'env> for Object<'env> {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if kind(&v) != ValueType::Object {
      return Err(at.wrong("an object", &v));
    }
    // SAFETY: `kind` was checked above to be Object, the type this cast reads.
    unsafe { v.cast::<Object>() }.map_err(|e| at.error(e))
  }
}

/// An array of strings; an item of the wrong type is named by its index.
impl<'env> FromJs<'env> for Vec<String> {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if !v.is_array().unwrap_or(false) {
      return Err(at.error("must be an array of strings"));
    }
    // SAFETY: `is_array` was checked above, and an Array is the type this cast reads.
    let arr: Array = unsafe { v.cast() }.map_err(|e| at.error(e))?;
    (0..arr.len())
      .map(|i| {
        let item: Unknown = arr
          .get(i)
          .ok()
          .flatten()
          .ok_or_else(|| at.error("must be an array of strings"))?;
        String::from_js(item, &at.item(i as usize))
      })
      .collect()
  }
}

/// A function (an output callback, an event listener), still to be wrapped.
#[derive(Clone, Copy)]
pub struct JsFn<'env>(pub Unknown<'env>);

impl<'env> FromJs<'env> for JsFn<'env> {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    if kind(&v) != ValueType::Function {
      return Err(at.error("must be a function"));
    }
    Ok(JsFn(v))
  }
}

/// An `AbortSignal` (checked when it is bound, see `abort.rs`).
#[derive(Clone, Copy)]
pub struct JsSignal<'env>(pub Unknown<'env>);

impl<'env> FromJs<'env> for JsSignal<'env> {
  fn from_js(v: Unknown<'env>, _at: &At) -> ArgResult<Self> {
    Ok(JsSignal(v))
  }
}

// ---------------------------------------------------------------- numbers

/// A non-negative number, finite unless `infinite_ok`.
fn non_negative(v: Unknown, at: &At, infinite_ok: bool) -> ArgResult<f64> {
  let n = f64::from_js(v, at)?;
  if n < 0.0 {
    return Err(at.error(format_args!("must not be negative, got {n}")));
  }
  if n.is_infinite() && !infinite_ok {
    return Err(at.error("must be finite"));
  }
  Ok(n)
}

fn millis(n: f64) -> Duration {
  Duration::from_micros((n * 1000.0) as u64)
}

/// Milliseconds: a non-negative finite number.
#[derive(Clone, Copy)]
pub struct Ms(pub Duration);

impl<'env> FromJs<'env> for Ms {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    non_negative(v, at, false).map(|n| Ms(millis(n)))
  }
}

/// A timeout in milliseconds: 0 and `Infinity` mean none.
#[derive(Clone, Copy)]
pub struct Timeout(pub Option<Duration>);

impl<'env> FromJs<'env> for Timeout {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let n = non_negative(v, at, true)?;
    Ok(Timeout((n != 0.0 && n.is_finite()).then(|| millis(n))))
  }
}

/// A size or a count: a non-negative finite number (a fraction is cut).
#[derive(Clone, Copy)]
pub struct Size(pub usize);

impl<'env> FromJs<'env> for Size {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    non_negative(v, at, false).map(|n| Size(n as usize))
  }
}

/// A positive integer (a line count, a pid, a session id).
#[derive(Clone, Copy)]
#[cfg_attr(windows, allow(dead_code))] // used by the POSIX-only features
pub struct Positive(pub usize);

impl<'env> FromJs<'env> for Positive {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let n = non_negative(v, at, false)?;
    if n < 1.0 || n.fract() != 0.0 {
      return Err(at.error(format_args!("must be a positive integer, got {n}")));
    }
    Ok(Positive(n as usize))
  }
}

/// A positive integer that fits an `i32` (a pid, a session id).
#[derive(Clone, Copy)]
#[cfg_attr(windows, allow(dead_code))] // used by the POSIX-only features
pub struct Id(pub u32);

impl<'env> FromJs<'env> for Id {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let n = f64::from_js(v, at)?;
    if !(1.0..=(i32::MAX as f64)).contains(&n) || n.fract() != 0.0 {
      return Err(at.error(format_args!("must be a positive integer, got {n}")));
    }
    Ok(Id(n as u32))
  }
}

/// A number checked by one of the core's validators (a resource limit, a
/// manager setting), the same ones `serve` uses.
pub fn checked<'env, T>(
  v: Unknown<'env>,
  at: &At,
  check: impl FnOnce(f64) -> std::result::Result<T, String>,
) -> ArgResult<T> {
  let n = f64::from_js(v, at)?;
  check(n).map_err(|e| at.error(e))
}

// ---------------------------------------------------------------- values of the options

/// `env`: variables to set (a string; a number or boolean is made a string,
/// as Node does) or, with `undefined`, to remove.
pub struct EnvVars(pub Vec<(String, Option<String>)>);

impl<'env> FromJs<'env> for EnvVars {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let obj = Object::from_js(v, at)?;
    let raw_env = obj.value().env;
    let keys = Object::keys(&obj).map_err(|e| {
      let why = take_exception(raw_env).unwrap_or_else(|| e.to_string());
      at.error(format_args!("could not be read: {why}"))
    })?;
    let mut vars = Vec::with_capacity(keys.len());
    for k in keys {
      if k.contains('\0') {
        return Err(at.error(format_args!("has a variable name with a NUL byte: {k:?}")));
      }
      let item = at.key(&k);
      let val = property(&obj, &item, &k)?;
      let val = match kind(&val) {
        // like Node: undefined drops the variable
        ValueType::Undefined => None,
        // SAFETY: `kind` is String in this arm, the type this cast reads.
        ValueType::String => Some(unsafe { val.cast::<String>() }.unwrap_or_default()),
        ValueType::Number | ValueType::Boolean => Some(
          val
            .coerce_to_string()
            .ok()
            .and_then(|s| s.into_utf8().ok())
            .and_then(|s| s.into_owned().ok())
            .unwrap_or_default(),
        ),
        _ => return Err(item.wrong("a string", &val)),
      };
      vars.push((k, val));
    }
    Ok(EnvVars(vars))
  }
}

/// `input`: a string, a Buffer or a Uint8Array, as bytes.
pub struct Input(pub Vec<u8>);

impl<'env> FromJs<'env> for Input {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    let bad = |v: &Unknown| at.wrong("a string or a Buffer", v);
    match kind(&v) {
      ValueType::String => Ok(Input(String::from_js(v, at)?.into_bytes())),
      ValueType::Object if v.is_buffer().unwrap_or(false) => {
        // SAFETY: `is_buffer` was checked in this arm's guard, and a Buffer is what BufferSlice
        // reads.
        let b = unsafe { v.cast::<BufferSlice>() }.map_err(|e| at.error(e))?;
        Ok(Input(b.to_vec()))
      }
      ValueType::Object if v.is_typedarray().unwrap_or(false) => {
        // SAFETY: `is_typedarray` was checked in this arm's guard; a typed array that is not a
        // Uint8Array fails in the cast (an error, not a wrong read).
        let b = unsafe { v.cast::<Uint8Array>() }.map_err(|e| at.error(e))?;
        Ok(Input(b.to_vec()))
      }
      _ => Err(bad(&v)),
    }
  }
}

/// `encoding`: `'utf8'` (strings) or `'buffer'` (raw bytes).
#[derive(Clone, Copy, Default)]
pub struct Encoding {
  pub raw: bool,
}

impl<'env> FromJs<'env> for Encoding {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    match String::from_js(v, at)?.as_str() {
      "utf8" | "utf-8" => Ok(Encoding { raw: false }),
      "buffer" => Ok(Encoding { raw: true }),
      other => Err(at.error(format_args!("must be 'utf8' or 'buffer', got '{other}'"))),
    }
  }
}

/// A string the core parses (`typescript`, a sandbox mode, a signal name):
/// its error says what is expected.
pub fn parsed<'env, T>(
  v: Unknown<'env>,
  at: &At,
  parse: impl FnOnce(&str) -> std::result::Result<T, String>,
) -> ArgResult<T> {
  let s = String::from_js(v, at)?;
  parse(&s).map_err(|e| at.error(e))
}

/// Declares an options object once. napi-rs makes its TypeScript interface
/// from the declaration and its doc comments (it is never converted by
/// napi-rs: `object_from_js = false`); the same declaration gets a
/// [`FromJs`] reader that reads each field by its JavaScript name with the
/// path of the value. Every field is an `Option` (or a [`Required`]) of a
/// type that implements `FromJs`. `..process,` first in the body adds the fields every process
/// takes (cwd, env, limits, sandbox, ...), declared once below, and a
/// `process()` method that moves them out as the core's `exec_core::ProcessFields` (the one
/// route of every API's process fields: `ProcessOptions::try_from`, or a command call's merge).
macro_rules! js_options {
  (
    $(#[$meta:meta])*
    pub struct $name:ident $(<$lt:lifetime>)? { ..process, $($body:tt)* }
  ) => {
    js_options! {
      $(#[$meta])*
      pub struct $name $(<$lt>)? {
        /// Working directory, checked before spawning. @default process.cwd()
        pub cwd: Option<String>,
        /// Variables set over the host environment (`undefined` removes one).
        #[napi(ts_type = "Record<string, string | undefined>")]
        pub env: Option<$crate::read::EnvVars>,
        /// Start from the host environment (`true`) or from `env` alone. @default true
        pub extend_env: Option<bool>,
        /// Only host variables matching one of these patterns reach the
        /// child (`*` wildcard: `['PATH', 'HOME', 'LC_*']`). `env` is always passed.
        pub env_allowlist: Option<Vec<String>>,
        /// Host variables matching one of these patterns are dropped
        /// (`['*_TOKEN', '*_KEY', 'AWS_*']`). `env` is always passed.
        pub env_denylist: Option<Vec<String>>,
        /// Opt-in resource limits of the child's whole process tree; a tree
        /// over a limit is stopped and the result has `errorCode: 'ELIMIT'`
        /// (see `ResourceLimits`). Without them the fast spawn path is kept.
        #[napi(ts_type = "ResourceLimits")]
        pub limits: Option<$crate::options::ResourceLimits>,
        /// Also kill the child when the host dies by SIGKILL (Linux
        /// PR_SET_PDEATHSIG; only the direct child: the interpreter, `bash`
        /// or the program; a PTY child gets SIGHUP from the kernel anyway;
        /// costs the posix_spawn fast path; macOS has no such signal: there
        /// it does nothing). @default false
        pub die_with_parent: Option<bool>,
        /// Opt-in OS sandbox (Linux: Landlock + seccomp, applied by the
        /// thread that spawns; posix_spawn kept). `true` = `{ mode:
        /// 'workspace-write' }`. Also drops the host's secrets from the
        /// environment (`*_TOKEN`, `*_KEY`, `AWS_*`, ...) unless
        /// `envAllowlist`/`envDenylist` are given. Cannot be applied:
        /// rejected with `ESANDBOX`, nothing runs. The result's `sandbox`
        /// says how it was applied and what it likely denied. @default false
        #[napi(ts_type = "boolean | SandboxOptions")]
        pub sandbox: Option<$crate::options::SandboxArg>,
        $($body)*
      }
    }

    impl $(<$lt>)? $name $(<$lt>)? {
      /// The fields every process takes, moved out.
      pub fn process(&mut self) -> exec_core::ProcessFields {
        exec_core::ProcessFields {
          cwd: self.cwd.take().map(std::path::PathBuf::from),
          env: self.env.take().map(|e| e.0),
          extend_env: self.extend_env.take(),
          env_allowlist: self.env_allowlist.take(),
          env_denylist: self.env_denylist.take(),
          limits: self.limits.take().map(Into::into),
          die_with_parent: self.die_with_parent.take(),
          sandbox: self.sandbox.take().map(|s| s.0),
        }
      }
    }
  };
  // a struct that holds JavaScript values (a callback, a signal): its
  // lifetime is the call's
  (
    $(#[$meta:meta])*
    pub struct $name:ident <$lt:lifetime> { $($fields:tt)* }
  ) => {
    js_options!(@emit [$(#[$meta])*] $name [<$lt>] $lt { $($fields)* });
  };
  (
    $(#[$meta:meta])*
    pub struct $name:ident { $($fields:tt)* }
  ) => {
    js_options!(@emit [$(#[$meta])*] $name [] 'env { $($fields)* });
  };
  (
    @emit [$(#[$meta:meta])*] $name:ident [$($generics:tt)*] $lt:lifetime {
      $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
    }
  ) => {
    $(#[$meta])*
    #[napi_derive::napi(object, object_to_js = false, object_from_js = false)]
    #[derive(Default)]
    pub struct $name $($generics)* {
      $( $(#[$fmeta])* pub $field: $ty ),*
    }

    impl<$lt> $crate::read::FromJs<$lt> for $name $($generics)* {
      fn from_js(v: napi::bindgen_prelude::Unknown<$lt>, at: &$crate::read::At) -> $crate::read::ArgResult<Self> {
        // the JavaScript names, made once
        static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        let keys = KEYS.get_or_init(|| vec![$($crate::read::camel_case(stringify!($field))),*]);
        let obj = <napi::bindgen_prelude::Object as $crate::read::FromJs>::from_js(v, at)?;
        let mut key = keys.iter().map(String::as_str);
        let read = $name {
          $( $field: <$ty as $crate::read::Field>::read(&obj, at, key.next().unwrap_or_default())?, )*
        };
        // then no key but these (a wrong value of a known one is named first)
        $crate::read::known_keys_only(&obj, at, keys)?;
        Ok(read)
      }
    }
  };
}
