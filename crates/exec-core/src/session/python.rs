//! The Python session: a real `python3` running `python_driver.py` (beside this file) (see
//! [`super::driver`] for the protocol both drivers speak).

use std::time::Duration;

use super::cell::{DriverKind, DriverSpec};
use crate::process::{ProcessOptions, RunOptions};

/// The driver that runs inside the interpreter (`python_driver.py`, embedded).
pub const DRIVER: &str = include_str!("python_driver.py");

/// How the session's interpreter is started.
#[derive(Debug, Clone)]
pub struct PythonOptions {
  /// The interpreter: a name looked up in PATH or a path. Default `python3`
  /// (`python` on Windows, where `python3` is often the Store's stub).
  pub python: String,
  /// cwd (`None`: the host's), environment, opt-in resource limits of the
  /// interpreter's whole tree (memory and processes watched; CPU time
  /// counts across cells, per process), `PR_SET_PDEATHSIG`, opt-in OS
  /// sandbox of the interpreter and every cell.
  pub process: ProcessOptions,
  /// Run after every start of an interpreter (first start, restarts, reset).
  pub init_code: Option<String>,
  /// The host environment that owns the processes.
  pub owner: u64,
  /// The defaults of each cell ([`RunOptions::session`]): its timeout (an
  /// interrupt, the namespace kept), how long the cell may take to stop
  /// after the SIGINT of its timeout before the interpreter is killed
  /// (`kill_grace`), the bytes kept per stream. A cell has no stdin: an
  /// `input` is `EINVAL` at the start.
  pub run: RunOptions,
  /// Bound on starting the interpreter and running `init_code`.
  pub startup_timeout: Duration,
  /// Cells `history()` keeps (the oldest dropped past it). Default 1000.
  pub max_history: usize,
}

impl Default for PythonOptions {
  fn default() -> Self {
    PythonOptions {
      python: if crate::platform::WINDOWS {
        "python"
      } else {
        "python3"
      }
      .into(),
      process: ProcessOptions::default(),
      init_code: None,
      owner: 0,
      run: RunOptions::session(),
      startup_timeout: Duration::from_secs(30),
      max_history: super::cell::DEFAULT_MAX_HISTORY,
    }
  }
}

impl From<PythonOptions> for DriverSpec {
  fn from(o: PythonOptions) -> DriverSpec {
    DriverSpec {
      kind: DriverKind::Python,
      program: o.python,
      args: vec!["-u".into(), "-c".into(), DRIVER.into()],
      process: o.process,
      init_code: o.init_code,
      owner: o.owner,
      run: o.run,
      startup_timeout: o.startup_timeout,
      max_history: o.max_history,
    }
  }
}
