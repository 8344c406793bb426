//! The values of the process fields every API takes (`..process` of
//! `js_options!`): `sandbox` and `limits` read and turned into the core's
//! `SandboxPolicy` and `Limits`. The fields themselves move out as the core's
//! `ProcessFields`, which the core checks (`ProcessOptions::try_from`).

use std::path::PathBuf;

use exec_core::process::limits::Limits;
use exec_core::process::sandbox::{OnUnavailable, SandboxMode, SandboxPolicy};
use napi::bindgen_prelude::*;

use super::{ResourceLimits, SandboxOptions};
use crate::read::{self, ArgResult, At, FromJs};

impl From<SandboxOptions> for SandboxPolicy {
  fn from(o: SandboxOptions) -> Self {
    let d = SandboxPolicy::default();
    SandboxPolicy {
      mode: o.mode.map_or(d.mode, |m| m.0),
      writable_roots: o.writable_roots.map_or(d.writable_roots, |r| {
        r.into_iter().map(PathBuf::from).collect()
      }),
      exclude_tmp: o.exclude_tmp.unwrap_or(d.exclude_tmp),
      network: o.network.unwrap_or(d.network),
      protect: o
        .protect
        .map_or(d.protect, |r| r.into_iter().map(PathBuf::from).collect()),
      on_unavailable: o.on_unavailable.map_or(d.on_unavailable, |u| u.0),
    }
  }
}

/// `sandbox: boolean | SandboxOptions`: `None` for `false`.
pub struct SandboxArg(pub Option<SandboxPolicy>);

impl<'env> FromJs<'env> for SandboxArg {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    match v.get_type() {
      Ok(napi::ValueType::Boolean) => Ok(SandboxArg(
        bool::from_js(v, at)?.then(SandboxPolicy::default),
      )),
      Ok(napi::ValueType::Object) => Ok(SandboxArg(Some(SandboxOptions::from_js(v, at)?.into()))),
      _ => Err(at.wrong("true or an object", &v)),
    }
  }
}

/// A string one of the core's `parse` functions reads (a sandbox mode...).
pub struct Parsed<T>(pub T);

impl<'env> FromJs<'env> for Parsed<SandboxMode> {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::parsed(v, at, SandboxMode::parse).map(Parsed)
  }
}

impl<'env> FromJs<'env> for Parsed<OnUnavailable> {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::parsed(v, at, OnUnavailable::parse).map(Parsed)
  }
}

/// One resource limit, checked by the core (`exec_core::process::limits::limit_value`,
/// which `serve` uses too).
pub struct Limit(pub u64);

impl<'env> FromJs<'env> for Limit {
  fn from_js(v: Unknown<'env>, at: &At) -> ArgResult<Self> {
    read::checked(v, at, exec_core::process::limits::limit_value).map(Limit)
  }
}

impl From<ResourceLimits> for Limits {
  fn from(l: ResourceLimits) -> Self {
    Limits {
      memory_bytes: l.memory_bytes.map(|n| n.0),
      cpu_seconds: l.cpu_seconds.map(|n| n.0),
      max_processes: l.max_processes.map(|n| n.0),
      file_size_bytes: l.file_size_bytes.map(|n| n.0),
      open_files: l.open_files.map(|n| n.0),
    }
  }
}
