//! Reading JavaScript arguments by hand, so that a wrong type gets a clear
//! `TypeError` (`exec: options.timeout must be ... (EINVAL)`) through a
//! rejected promise instead of a generic conversion error thrown synchronously.

use std::time::Duration;

use exec_core::{EnvSpec, ErrorCode, ExecError};
use napi::bindgen_prelude::*;
use napi::ValueType;

use crate::error::type_error;

pub type ArgResult<T> = std::result::Result<T, ExecError>;

fn kind(v: &Unknown) -> ValueType {
  v.get_type().unwrap_or(ValueType::Unknown)
}

fn kind_name(v: &Unknown) -> &'static str {
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

pub fn string(v: &Unknown, name: &str) -> ArgResult<String> {
  if kind(v) != ValueType::String {
    return Err(type_error(format!(
      "{name} must be a string, got {}",
      kind_name(v)
    )));
  }
  unsafe { v.cast::<String>() }.map_err(|e| type_error(format!("{name}: {e}")))
}

/// A boolean argument.
pub fn boolean(v: &Unknown, name: &str) -> ArgResult<bool> {
  if kind(v) != ValueType::Boolean {
    return Err(type_error(format!(
      "{name} must be a boolean, got {}",
      kind_name(v)
    )));
  }
  unsafe { v.cast::<bool>() }.map_err(|e| type_error(format!("{name}: {e}")))
}

/// An options object, or `None` when undefined/null.
pub fn options<'a>(v: Option<Unknown<'a>>, name: &str) -> ArgResult<Option<Object<'a>>> {
  match v {
    None => Ok(None),
    Some(v) if is_nullish(&v) => Ok(None),
    Some(v) if kind(&v) == ValueType::Object => Ok(Some(
      unsafe { v.cast::<Object>() }.map_err(|e| type_error(e.to_string()))?,
    )),
    Some(v) => Err(type_error(format!(
      "{name} must be an object, got {}",
      kind_name(&v)
    ))),
  }
}

/// A property, `None` when absent, undefined or null.
pub fn prop<'a>(obj: &Object<'a>, key: &str) -> ArgResult<Option<Unknown<'a>>> {
  let v: Unknown = obj.get_named_property(key).map_err(|e| {
    let why = take_exception(obj.value().env).unwrap_or_else(|| e.to_string());
    type_error(format!("options.{key} could not be read: {why}"))
  })?;
  Ok(if is_nullish(&v) { None } else { Some(v) })
}

/// The message of a JavaScript exception now pending (a getter or a Proxy
/// trap of the caller's object threw), cleared: the call then rejects with a
/// clear `EINVAL` instead of throwing the caller's error synchronously.
pub fn take_exception(env: napi::sys::napi_env) -> Option<String> {
  use napi::sys;
  let mut pending = false;
  if unsafe { sys::napi_is_exception_pending(env, &mut pending) } != sys::Status::napi_ok
    || !pending
  {
    return None;
  }
  let mut exc = std::ptr::null_mut();
  unsafe { sys::napi_get_and_clear_last_exception(env, &mut exc) };
  if exc.is_null() {
    return Some("it threw".to_owned());
  }
  // String(exception), without letting a second throw escape
  let mut s = std::ptr::null_mut();
  if unsafe { sys::napi_coerce_to_string(env, exc, &mut s) } != sys::Status::napi_ok {
    let mut again = std::ptr::null_mut();
    unsafe { sys::napi_get_and_clear_last_exception(env, &mut again) };
    return Some("it threw".to_owned());
  }
  let mut len = 0usize;
  unsafe { sys::napi_get_value_string_utf8(env, s, std::ptr::null_mut(), 0, &mut len) };
  let mut buf = vec![0u8; len + 1];
  unsafe { sys::napi_get_value_string_utf8(env, s, buf.as_mut_ptr().cast(), buf.len(), &mut len) };
  buf.truncate(len);
  Some(format!("it threw {}", String::from_utf8_lossy(&buf)))
}

pub fn opt_string(obj: &Object, key: &str) -> ArgResult<Option<String>> {
  prop(obj, key)?
    .map(|v| string(&v, &format!("options.{key}")))
    .transpose()
}

pub fn opt_bool(obj: &Object, key: &str) -> ArgResult<Option<bool>> {
  match prop(obj, key)? {
    None => Ok(None),
    Some(v) if kind(&v) == ValueType::Boolean => {
      Ok(Some(unsafe { v.cast::<bool>() }.unwrap_or(false)))
    }
    Some(v) => Err(type_error(format!(
      "options.{key} must be a boolean, got {}",
      kind_name(&v)
    ))),
  }
}

pub fn number(v: &Unknown, name: &str) -> ArgResult<f64> {
  if kind(v) != ValueType::Number {
    return Err(type_error(format!(
      "{name} must be a number, got {}",
      kind_name(v)
    )));
  }
  unsafe { v.cast::<f64>() }.map_err(|e| type_error(e.to_string()))
}

/// A non-negative finite number (or `Infinity` when `allow_inf`), else a TypeError.
pub fn opt_non_negative(obj: &Object, key: &str, allow_inf: bool) -> ArgResult<Option<f64>> {
  let Some(v) = prop(obj, key)? else {
    return Ok(None);
  };
  let n = number(&v, &format!("options.{key}"))?;
  if n.is_nan() {
    return Err(type_error(format!(
      "options.{key} must be a number, got NaN"
    )));
  }
  if n < 0.0 {
    return Err(type_error(format!(
      "options.{key} must not be negative, got {n}"
    )));
  }
  if n.is_infinite() && !allow_inf {
    return Err(type_error(format!("options.{key} must be finite")));
  }
  Ok(Some(n))
}

/// [`opt_string`] of options that may be absent.
pub fn opt_string_in(obj: Option<&Object>, key: &str) -> ArgResult<Option<String>> {
  match obj {
    Some(o) => opt_string(o, key),
    None => Ok(None),
  }
}

/// [`opt_bool`] of options that may be absent.
pub fn opt_bool_in(obj: Option<&Object>, key: &str) -> ArgResult<Option<bool>> {
  match obj {
    Some(o) => opt_bool(o, key),
    None => Ok(None),
  }
}

/// A non-negative finite number of options that may be absent.
pub fn opt_number_in(obj: Option<&Object>, key: &str) -> ArgResult<Option<f64>> {
  match obj {
    Some(o) => opt_non_negative(o, key, false),
    None => Ok(None),
  }
}

/// The host's working directory (ENOENT when it was removed).
pub fn host_cwd() -> ArgResult<std::path::PathBuf> {
  std::env::current_dir().map_err(|e| {
    ExecError::new(
      ErrorCode::ENOENT,
      format!("the host's working directory is gone: {e}"),
    )
  })
}

/// A timeout in ms: 0 or Infinity mean none.
pub fn opt_timeout(
  obj: Option<&Object>,
  key: &str,
  default_ms: u64,
) -> ArgResult<Option<Duration>> {
  let ms = match obj {
    Some(o) => opt_non_negative(o, key, true)?,
    None => None,
  };
  Ok(match ms {
    None => (default_ms > 0).then(|| Duration::from_millis(default_ms)),
    Some(n) if n == 0.0 || n.is_infinite() => None,
    Some(n) => Some(Duration::from_micros((n * 1000.0) as u64)),
  })
}

pub fn opt_ms(obj: Option<&Object>, key: &str, default_ms: u64) -> ArgResult<Duration> {
  let ms = opt_number_in(obj, key)?;
  Ok(Duration::from_micros(
    (ms.unwrap_or(default_ms as f64) * 1000.0) as u64,
  ))
}

pub fn opt_usize(obj: Option<&Object>, key: &str, default: usize) -> ArgResult<usize> {
  let n = opt_number_in(obj, key)?;
  Ok(n.map(|n| n as usize).unwrap_or(default))
}

/// `env` (merged over the host's unless `extendEnv: false`).
pub fn env_spec(obj: Option<&Object>) -> ArgResult<EnvSpec> {
  let mut spec = EnvSpec::inherit();
  let Some(obj) = obj else { return Ok(spec) };
  if let Some(false) = opt_bool(obj, "extendEnv")? {
    spec.extend = false;
  }
  if let Some(v) = prop(obj, "env")? {
    if kind(&v) != ValueType::Object {
      return Err(type_error(format!(
        "options.env must be an object, got {}",
        kind_name(&v)
      )));
    }
    let env_obj = unsafe { v.cast::<Object>() }.map_err(|e| type_error(e.to_string()))?;
    let raw_env = env_obj.value().env;
    let keys = Object::keys(&env_obj).map_err(|e| {
      let why = take_exception(raw_env).unwrap_or_else(|| e.to_string());
      type_error(format!("options.env could not be read: {why}"))
    })?;
    for k in keys {
      if k.contains('\0') {
        return Err(type_error(format!(
          "options.env has a variable name with a NUL byte: {k:?}"
        )));
      }
      let val: Unknown = env_obj.get_named_property(&k).map_err(|e| {
        let why = take_exception(raw_env).unwrap_or_else(|| e.to_string());
        type_error(format!("options.env.{k} could not be read: {why}"))
      })?;
      match kind(&val) {
        // like Node: undefined drops the variable
        ValueType::Undefined => spec.remove.push(k),
        ValueType::String => spec
          .vars
          .push((k, unsafe { val.cast::<String>() }.unwrap_or_default())),
        ValueType::Number | ValueType::Boolean => {
          let s = val
            .coerce_to_string()
            .ok()
            .and_then(|s| s.into_utf8().ok())
            .and_then(|s| s.into_owned().ok())
            .unwrap_or_default();
          spec.vars.push((k, s))
        }
        _ => {
          return Err(type_error(format!(
            "options.env.{k} must be a string, got {}",
            kind_name(&val)
          )))
        }
      }
    }
  }
  spec.validate()?;
  Ok(spec)
}

fn string_list(obj: &Object, key: &str) -> ArgResult<Option<Vec<String>>> {
  prop(obj, key)?
    .map(|v| string_array(&v, &format!("options.{key}")))
    .transpose()
}

/// An array of strings named `name` in errors (`<name>[i]` for an item).
pub fn string_array(v: &Unknown, name: &str) -> ArgResult<Vec<String>> {
  if !v.is_array().unwrap_or(false) {
    return Err(type_error(format!("{name} must be an array of strings")));
  }
  let arr: Array = unsafe { v.cast() }.map_err(|e| type_error(e.to_string()))?;
  (0..arr.len())
    .map(|i| {
      let item: Unknown = arr
        .get(i)
        .ok()
        .flatten()
        .ok_or_else(|| type_error(format!("{name} must be an array of strings")))?;
      string(&item, &format!("{name}[{i}]"))
    })
    .collect()
}

/// An optional array of strings (absent, null or undefined: empty).
pub fn opt_string_array(v: Option<Unknown>, name: &str) -> ArgResult<Vec<String>> {
  match v {
    Some(v) if !is_nullish(&v) => string_array(&v, name),
    _ => Ok(Vec::new()),
  }
}

/// [`env_spec`] with [`env_lists`] applied.
pub fn env_with_lists(obj: Option<&Object>) -> ArgResult<EnvSpec> {
  let mut env = env_spec(obj)?;
  env_lists(obj, &mut env)?;
  Ok(env)
}

/// `envAllowlist` / `envDenylist` into `spec`.
pub fn env_lists(obj: Option<&Object>, spec: &mut EnvSpec) -> ArgResult<()> {
  let Some(obj) = obj else { return Ok(()) };
  spec.allow = string_list(obj, "envAllowlist")?;
  spec.deny = string_list(obj, "envDenylist")?.unwrap_or_default();
  Ok(())
}

/// `limits: { memoryBytes, cpuSeconds, maxProcesses, fileSizeBytes, openFiles }`.
pub fn limits(obj: Option<&Object>) -> ArgResult<exec_core::limits::Limits> {
  let mut l = exec_core::limits::Limits::default();
  let Some(obj) = obj else { return Ok(l) };
  let Some(v) = prop(obj, "limits")? else {
    return Ok(l);
  };
  if kind(&v) != ValueType::Object {
    return Err(type_error(format!(
      "options.limits must be an object, got {}",
      kind_name(&v)
    )));
  }
  let lo: Object = unsafe { v.cast() }.map_err(|e| type_error(e.to_string()))?;
  let get = |key: &str| -> ArgResult<Option<u64>> {
    let Some(n) = opt_non_negative(&lo, key, false)
      .map_err(|e| type_error(e.what.replace("options.", "options.limits.")))?
    else {
      return Ok(None);
    };
    if n < 1.0 {
      return Err(type_error(format!(
        "options.limits.{key} must be at least 1, got {n}"
      )));
    }
    Ok(Some(n as u64))
  };
  l.memory_bytes = get("memoryBytes")?;
  l.cpu_seconds = get("cpuSeconds")?;
  l.max_processes = get("maxProcesses")?;
  l.file_size_bytes = get("fileSizeBytes")?;
  l.open_files = get("openFiles")?;
  Ok(l)
}

/// `input`: a string or a Buffer.
pub fn opt_input(obj: Option<&Object>) -> ArgResult<Option<Vec<u8>>> {
  let Some(obj) = obj else { return Ok(None) };
  let Some(v) = prop(obj, "input")? else {
    return Ok(None);
  };
  match kind(&v) {
    ValueType::String => Ok(Some(
      unsafe { v.cast::<String>() }
        .unwrap_or_default()
        .into_bytes(),
    )),
    ValueType::Object => {
      if v.is_buffer().unwrap_or(false) {
        let b = unsafe { v.cast::<BufferSlice>() }.map_err(|e| type_error(e.to_string()))?;
        Ok(Some(b.to_vec()))
      } else if v.is_typedarray().unwrap_or(false) {
        let b = unsafe { v.cast::<Uint8Array>() }.map_err(|e| type_error(e.to_string()))?;
        Ok(Some(b.to_vec()))
      } else {
        Err(type_error(
          "options.input must be a string or a Buffer, got an object",
        ))
      }
    }
    _ => Err(type_error(format!(
      "options.input must be a string or a Buffer, got {}",
      kind_name(&v)
    ))),
  }
}

/// `sandbox: true | { mode, writableRoots, excludeTmp, network, onUnavailable }`
/// (see `SandboxOptions`). `true` is `{ mode: 'workspace-write' }`.
pub fn sandbox(obj: Option<&Object>) -> ArgResult<Option<exec_core::sandbox::SandboxPolicy>> {
  use exec_core::sandbox::{OnUnavailable, SandboxMode, SandboxPolicy};
  let Some(obj) = obj else { return Ok(None) };
  let Some(v) = prop(obj, "sandbox")? else {
    return Ok(None);
  };
  match kind(&v) {
    ValueType::Boolean => {
      let on = unsafe { v.cast::<bool>() }.unwrap_or(false);
      return Ok(on.then(SandboxPolicy::default));
    }
    ValueType::Object => {}
    _ => {
      return Err(type_error(format!(
        "options.sandbox must be true or an object, got {}",
        kind_name(&v)
      )))
    }
  }
  let o = unsafe { v.cast::<Object>() }.map_err(|e| type_error(e.to_string()))?;
  let mut p = SandboxPolicy::default();
  if let Some(mode) = opt_string(&o, "mode")? {
    p.mode =
      SandboxMode::parse(&mode).map_err(|e| type_error(format!("options.sandbox.mode {e}")))?;
  }
  if let Some(roots) = string_list(&o, "writableRoots")? {
    p.writable_roots = roots.into_iter().map(std::path::PathBuf::from).collect();
  }
  p.exclude_tmp = opt_bool(&o, "excludeTmp")?.unwrap_or(false);
  p.network = opt_bool(&o, "network")?.unwrap_or(false);
  if let Some(u) = opt_string(&o, "onUnavailable")? {
    p.on_unavailable = OnUnavailable::parse(&u)
      .map_err(|e| type_error(format!("options.sandbox.onUnavailable {e}")))?;
  }
  Ok(Some(p))
}

/// A sandboxed run drops the host's secrets unless the caller gave its own
/// env lists (see `exec_core::sandbox::SECRET_ENV`).
pub fn sandbox_env(
  obj: Option<&Object>,
  sandbox: &Option<exec_core::sandbox::SandboxPolicy>,
  env: &mut EnvSpec,
) -> ArgResult<()> {
  let explicit = match (obj, sandbox) {
    (Some(o), Some(_)) => prop(o, "envAllowlist")?.is_some() || prop(o, "envDenylist")?.is_some(),
    _ => false,
  };
  exec_core::sandbox::drop_secrets(sandbox, explicit, env);
  Ok(())
}
