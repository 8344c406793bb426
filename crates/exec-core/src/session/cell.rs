//! What a driver session (Python, Node) and its callers say about a cell:
//! which interpreter, how it is started, what a cell returns or raises. Below
//! [`super::driver`], [`super::node`], [`super::python`] and
//! [`super::notebook`], which all speak of cells and none of each other's.

use std::ffi::OsString;
use std::time::Duration;

use serde::Deserialize;

use super::capture::OutputPiece;
use super::display::Bundle;
use super::SessionStatus;
use crate::error::ExecError;

/// Which interpreter a driver session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
  Python,
  Node,
}

/// How a driver session's interpreter is started (made from `PythonOptions`
/// or `NodeOptions`).
#[derive(Debug, Clone)]
pub struct DriverSpec {
  pub kind: DriverKind,
  /// The interpreter: a name looked up in PATH or a path.
  pub program: String,
  /// Its arguments, the driver among them.
  pub args: Vec<OsString>,
  /// cwd, environment, limits, parent death, sandbox of the interpreter.
  pub process: crate::process::ProcessOptions,
  /// Run after every start of an interpreter (first start, restarts, reset).
  pub init_code: Option<String>,
  /// The host environment that owns the processes.
  pub owner: u64,
  /// The defaults of each cell: its timeout, how long it may take to stop
  /// after the SIGINT of its timeout (Node: of an interrupt too) before the
  /// interpreter is killed (`kill_grace`), the bytes kept per stream.
  pub run: crate::process::RunOptions,
  /// Bound on starting the interpreter and running `init_code`.
  pub startup_timeout: Duration,
  /// Cells `history()` keeps; the oldest are dropped past it.
  pub max_history: usize,
}

/// Cells a session's history keeps unless told otherwise.
pub const DEFAULT_MAX_HISTORY: usize = 1000;

/// An exception raised by a cell (Python) or an error it threw (JavaScript).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct CellException {
  /// The class name, e.g. `ZeroDivisionError`, `TypeError`.
  #[serde(rename = "type")]
  pub kind: String,
  /// `str(exception)` / `error.message`.
  pub message: String,
  /// The formatted traceback / stack, starting at the cell (`File "<cell 3>",
  /// line 2` / `at <cell 3>:2:5`).
  pub traceback: String,
}

/// The result of one cell.
#[derive(Debug, Clone)]
pub struct CellResult {
  pub status: SessionStatus,
  pub stdout: String,
  pub stderr: String,
  /// Whether either stream was cut (head + tail kept).
  pub truncated: bool,
  pub stdout_bytes: u64,
  pub stderr_bytes: u64,
  /// The cell's last expression as text (`repr` / `util.inspect`; not for
  /// `None`/`undefined`, not for statements).
  pub result_value: Option<String>,
  /// The last expression's MIME bundle, when it has more than text.
  pub result_data: Option<Bundle>,
  /// The bundles of `display()` calls, in order.
  pub displays: Vec<Bundle>,
  /// stdout, stderr and the bundles in the order they came (empty when the
  /// cell had none).
  pub outputs: Vec<OutputPiece>,
  pub exception: Option<CellException>,
  /// The cell's number in its interpreter (1, 2, ...; `<cell N>` in tracebacks).
  pub execution_count: u32,
  pub execution_time: Duration,
  /// With `Died` (and a killing timeout): how the interpreter ended.
  pub exit_code: Option<i32>,
  pub signal: Option<String>,
  /// The interpreter is gone and its namespace with it; also set (with
  /// `restarted`) when the last one died between cells.
  pub state_lost: bool,
  /// This cell ran in a new interpreter because the previous one was lost.
  pub restarted: bool,
  /// TIMEOUT, or ECANCELED when the session was closed under the cell.
  pub error: Option<ExecError>,
}
