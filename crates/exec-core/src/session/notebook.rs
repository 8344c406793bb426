//! A session's history and its notebook: the cells run so far with their
//! outputs, written as nbformat 4.5 (`.ipynb`) and read back for a replay.
//!
//! The outputs of a cell, in the order they came (as Jupyter keeps them):
//! `stream` outputs for stdout and stderr and a `display_data` per
//! `display()` bundle, interleaved, then the `execute_result` of the last
//! value, or an `error` (`ename`, `evalue`, `traceback` lines).

use serde_json::{json, Map, Value};

use super::capture::OutputPiece;
use super::cell::{CellResult, DriverKind};
use super::SessionStatus;
use crate::error::{ErrorCode, ExecError};

/// One executed cell.
#[derive(Debug, Clone)]
pub struct HistoryCell {
  pub code: String,
  /// `python`, `javascript` or `typescript`.
  pub language: String,
  pub result: CellResult,
}

/// nbformat splits text into lines, each keeping its `\n`.
fn lines(text: &str) -> Value {
  Value::Array(
    text
      .split_inclusive('\n')
      .map(|l| Value::String(l.to_owned()))
      .collect(),
  )
}

fn bundle_data(b: &Map<String, Value>) -> Value {
  let mut data = Map::new();
  for (mime, v) in b {
    // text types as lines, JSON as itself, base64 as one string
    let v = match v {
      Value::String(s) if mime.starts_with("text/") || mime == "image/svg+xml" => lines(s),
      other => other.clone(),
    };
    data.insert(mime.clone(), v);
  }
  Value::Object(data)
}

/// The pieces of a cell's output in order; a result made without them
/// (none came) has its streams, then its bundles.
pub fn ordered(r: &CellResult) -> Vec<OutputPiece> {
  if !r.outputs.is_empty() {
    return r.outputs.clone();
  }
  let mut p = vec![
    OutputPiece::Stdout(0..r.stdout.len()),
    OutputPiece::Stderr(0..r.stderr.len()),
  ];
  p.extend((0..r.displays.len()).map(OutputPiece::Display));
  p
}

fn outputs(r: &CellResult) -> Vec<Value> {
  let mut out = Vec::new();
  for piece in ordered(r) {
    let (name, text) = match piece {
      OutputPiece::Stdout(at) => ("stdout", &r.stdout[at]),
      OutputPiece::Stderr(at) => ("stderr", &r.stderr[at]),
      OutputPiece::Display(i) => {
        if let Some(d) = r.displays.get(i) {
          out
            .push(json!({ "output_type": "display_data", "data": bundle_data(d), "metadata": {} }));
        }
        continue;
      }
    };
    if !text.is_empty() {
      out.push(json!({ "output_type": "stream", "name": name, "text": lines(text) }));
    }
  }
  if let Some(v) = &r.result_value {
    let mut b = r.result_data.clone().unwrap_or_default();
    b.entry("text/plain")
      .or_insert_with(|| Value::String(v.clone()));
    out.push(json!({
      "output_type": "execute_result",
      "execution_count": r.execution_count,
      "data": bundle_data(&b),
      "metadata": {},
    }));
  }
  if r.status != SessionStatus::Ok {
    let (ename, evalue, tb) = match &r.exception {
      Some(e) => (e.kind.clone(), e.message.clone(), e.traceback.clone()),
      None => (
        r.status.as_str().to_owned(),
        r.error.as_ref().map(|e| e.message()).unwrap_or_default(),
        String::new(),
      ),
    };
    out.push(json!({
      "output_type": "error",
      "ename": ename,
      "evalue": evalue,
      "traceback": tb.lines().collect::<Vec<_>>(),
    }));
  }
  out
}

/// The history as an nbformat 4.5 notebook; `dropped`: the older cells the
/// history no longer holds (a markdown cell at the top says so).
pub fn to_notebook(kind: DriverKind, cells: &[HistoryCell], dropped: u64) -> Value {
  let mut cells: Vec<Value> = cells
    .iter()
    .enumerate()
    .map(|(i, c)| {
      json!({
        "cell_type": "code",
        "id": format!("cell-{}", i + 1),
        "execution_count": c.result.execution_count,
        "metadata": { "exec_native": { "language": c.language, "status": c.result.status.as_str() } },
        "source": lines(&c.code),
        "outputs": outputs(&c.result),
      })
    })
    .collect();
  if dropped > 0 {
    let note = format!(
      "*exec-native: the {dropped} cells run before these are not in this notebook: the session's history keeps only its last cells (`maxHistory`).*"
    );
    cells.insert(
      0,
      json!({ "cell_type": "markdown", "id": "dropped-cells", "metadata": {}, "source": note }),
    );
  }
  let (kernelspec, language_info) = match kind {
    DriverKind::Python => (
      json!({ "name": "python3", "display_name": "Python 3", "language": "python" }),
      json!({ "name": "python", "file_extension": ".py", "mimetype": "text/x-python" }),
    ),
    DriverKind::Node => {
      let ts = cells
        .iter()
        .any(|c| c["metadata"]["exec_native"]["language"] == "typescript");
      let lang = if ts { "typescript" } else { "javascript" };
      (
        json!({ "name": "exec-native-node", "display_name": "Node.js (exec-native)", "language": lang }),
        json!({
          "name": lang,
          "file_extension": if ts { ".ts" } else { ".js" },
          "mimetype": if ts { "text/typescript" } else { "text/javascript" },
        }),
      )
    }
  };
  json!({
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {
      "kernelspec": kernelspec,
      "language_info": language_info,
      "exec_native": { "dropped_cells": dropped },
    },
    "cells": cells,
  })
}

/// Write the history to `path` as a notebook.
pub fn export(
  path: &std::path::Path,
  kind: DriverKind,
  cells: &[HistoryCell],
  dropped: u64,
) -> Result<(), ExecError> {
  let nb = to_notebook(kind, cells, dropped);
  let text = serde_json::to_string_pretty(&nb).expect("a JSON value serializes");
  std::fs::write(path, text + "\n").map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot write the notebook {}: {e}", path.display()),
    )
  })
}

/// The code cells of the notebook at `path`, in order, with the language a
/// cell was recorded with (`None`: the notebook's).
pub fn code_cells(path: &std::path::Path) -> Result<Vec<(String, Option<String>)>, ExecError> {
  let bad = |what: String| ExecError::invalid(format!("{}: {what}", path.display()));
  let text = std::fs::read_to_string(path).map_err(|e| {
    let code = if e.kind() == std::io::ErrorKind::NotFound {
      ErrorCode::ENOENT
    } else {
      ErrorCode::EIO
    };
    ExecError::new(
      code,
      format!("cannot read the notebook {}: {e}", path.display()),
    )
  })?;
  let nb: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not a notebook ({e})")))?;
  let cells = nb["cells"]
    .as_array()
    .ok_or_else(|| bad("not a notebook (no cells)".into()))?;
  let mut out = Vec::new();
  for c in cells {
    if c["cell_type"] != "code" {
      continue;
    }
    let source = match &c["source"] {
      Value::String(s) => s.clone(),
      Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
      _ => return Err(bad("a code cell without source".into())),
    };
    let lang = c["metadata"]["exec_native"]["language"]
      .as_str()
      .map(str::to_owned);
    out.push((source, lang));
  }
  Ok(out)
}
