//! The output a check or a result shows (what both streams hold since the
//! last take, rendered within the limits), the log closed once the pumps are
//! done, and old logs swept ([`sweep_logs`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;

use crate::command::format::Shown;
use crate::command::offload::{lock, render_pair, Rendered, SharedCapture, LOG_PREFIX, LOG_SUFFIX};
use crate::command::truncate::OutputLimits;
use crate::command::StreamOutput;

/// Take what both streams hold since the last take, rendered.
pub(super) fn take_streams(
  capture: &SharedCapture,
  limits: OutputLimits,
  carry: bool,
) -> (StreamOutput, StreamOutput) {
  let (o, e) = {
    let mut c = lock(capture);
    (c.out.take(carry), c.err.take(carry))
  };
  let (o, e) = render_pair(&o, &e, limits);
  let wrap = |r: Rendered| StreamOutput {
    text: r.text,
    truncation: r.truncation,
    binary: r.binary,
  };
  (wrap(o), wrap(e))
}

pub(super) fn shown<'a>(out: &'a StreamOutput, err: &'a StreamOutput) -> [Shown<'a>; 2] {
  [
    Shown {
      name: "stdout",
      text: &out.text,
      truncation: &out.truncation,
      binary: out.binary,
    },
    Shown {
      name: "stderr",
      text: &err.text,
      truncation: &err.truncation,
      binary: err.binary,
    },
  ]
}

/// Close the log once the pumps reached EOF (the last process that held
/// the output pipes is gone).
pub(super) fn close_log_after(capture: &SharedCapture, pumps: Option<JoinHandle<()>>) {
  let cap = capture.clone();
  tokio::spawn(async move {
    if let Some(p) = pumps {
      let _ = p.await;
    }
    lock(&cap).log.finish(true);
  });
}

/// Delete `exec-native-<hex>.log` files in `dir` last modified more than
/// `older_than` ago, except `keep`. Returns how many were deleted.
pub fn sweep_logs(dir: &Path, older_than: Duration, keep: &HashSet<PathBuf>) -> usize {
  let Ok(entries) = std::fs::read_dir(dir) else {
    return 0;
  };
  let now = SystemTime::now();
  let mut removed = 0;
  for entry in entries.flatten() {
    let name = entry.file_name();
    let Some(name) = name.to_str() else { continue };
    let Some(mid) = name
      .strip_prefix(LOG_PREFIX)
      .and_then(|r| r.strip_suffix(LOG_SUFFIX))
    else {
      continue;
    };
    if mid.is_empty() || !mid.bytes().all(|b| b.is_ascii_hexdigit()) {
      continue;
    }
    let path = entry.path();
    if keep.contains(&path) {
      continue;
    }
    let Ok(meta) = entry.metadata() else { continue };
    if !meta.is_file() {
      continue;
    }
    let old = meta
      .modified()
      .ok()
      .and_then(|m| now.duration_since(m).ok())
      .is_some_and(|age| age > older_than);
    if old && std::fs::remove_file(&path).is_ok() {
      removed += 1;
    }
  }
  removed
}
