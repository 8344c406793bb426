//! `options.typescript`: how `'typescript'` code runs (the types stripped
//! in-process and plain node, or tsx). See `exec_core::ts_strip`.

use exec_core::TsPath;
use napi::bindgen_prelude::*;

use crate::args::{self, ArgResult};

/// `options.typescript`: `'auto'` (default), `'strip'` or `'tsx'`.
pub fn ts_path(opts: Option<&Object>) -> ArgResult<TsPath> {
  match opts
    .map(|o| args::opt_string(o, "typescript"))
    .transpose()?
    .flatten()
  {
    None => Ok(TsPath::Auto),
    Some(s) => s.parse(),
  }
}
