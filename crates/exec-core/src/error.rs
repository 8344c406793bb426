//! Errors with stable codes. Every message reads `exec: <what is wrong> (<CODE>)`.

use std::fmt;

/// Stable error codes. In JavaScript they surface as `err.code` / `result.errorCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
  /// A file, directory or interpreter does not exist.
  ENOENT,
  /// The working directory is not a directory.
  ENOTDIR,
  /// Permission denied (cwd not enterable, program not executable).
  EACCES,
  /// Invalid argument (unsupported language, bad option value).
  EINVAL,
  /// The run exceeded its timeout.
  TIMEOUT,
  /// The run was canceled (AbortSignal, kill).
  ECANCELED,
  /// The output was not valid UTF-8.
  EBINARY,
  /// A resource limit was exceeded.
  ELIMIT,
  /// A process limit of a manager was reached.
  EBUSY,
  /// The process could not be spawned for another reason.
  ESPAWN,
  /// An I/O error while talking to the process.
  EIO,
  /// Writing to a closed stdin.
  EPIPE,
  /// No such process handle.
  ESRCH,
  /// A process handle is already in use.
  EEXIST,
  /// The sandbox asked for could not be applied; nothing ran.
  ESANDBOX,
  /// Not available here: the interpreter is too old for the session
  /// (NodeSession needs Node 20.17+), or not on this platform yet (Windows:
  /// sessions, PTYs, the sandbox, the agent tool's shell sessions).
  ENOTSUP,
}

impl ErrorCode {
  pub fn as_str(&self) -> &'static str {
    match self {
      ErrorCode::ENOENT => "ENOENT",
      ErrorCode::ENOTDIR => "ENOTDIR",
      ErrorCode::EACCES => "EACCES",
      ErrorCode::EINVAL => "EINVAL",
      ErrorCode::TIMEOUT => "TIMEOUT",
      ErrorCode::ECANCELED => "ECANCELED",
      ErrorCode::EBINARY => "EBINARY",
      ErrorCode::ELIMIT => "ELIMIT",
      ErrorCode::EBUSY => "EBUSY",
      ErrorCode::ESPAWN => "ESPAWN",
      ErrorCode::EIO => "EIO",
      ErrorCode::EPIPE => "EPIPE",
      ErrorCode::ESRCH => "ESRCH",
      ErrorCode::EEXIST => "EEXIST",
      ErrorCode::ESANDBOX => "ESANDBOX",
      ErrorCode::ENOTSUP => "ENOTSUP",
    }
  }
}

impl AsRef<str> for ErrorCode {
  fn as_ref(&self) -> &str {
    self.as_str()
  }
}

impl fmt::Display for ErrorCode {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(self.as_str())
  }
}

/// An error of exec-native: a code and a human sentence (without the `exec:` prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecError {
  pub code: ErrorCode,
  pub what: String,
}

impl ExecError {
  pub fn new(code: ErrorCode, what: impl Into<String>) -> Self {
    ExecError {
      code,
      what: what.into(),
    }
  }

  pub fn invalid(what: impl Into<String>) -> Self {
    Self::new(ErrorCode::EINVAL, what)
  }

  /// The full message: `exec: <what> (<CODE>)`.
  pub fn message(&self) -> String {
    format!("exec: {} ({})", self.what, self.code)
  }

  /// `exec: <what> is not supported on Windows yet (ENOTSUP)`: a feature
  /// the Windows build leaves out (issue 25).
  pub fn not_on_windows(what: &str) -> Self {
    Self::new(
      ErrorCode::ENOTSUP,
      format!("{what} is not supported on Windows yet"),
    )
  }

  /// Map an OS error from spawning `program` to a clear error.
  pub fn from_spawn(program: &str, err: &std::io::Error) -> Self {
    match err.kind() {
      std::io::ErrorKind::NotFound => {
        Self::new(ErrorCode::ENOENT, format!("{program} not found in PATH"))
      }
      std::io::ErrorKind::PermissionDenied => {
        Self::new(ErrorCode::EACCES, format!("{program} is not executable"))
      }
      _ => Self::new(
        ErrorCode::ESPAWN,
        format!("failed to spawn {program}: {err}"),
      ),
    }
  }
}

impl fmt::Display for ExecError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&self.message())
  }
}

impl std::error::Error for ExecError {}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn message_has_the_seed_form() {
    let e = ExecError::new(
      ErrorCode::ENOENT,
      "Working directory does not exist '/tmp/ghost'",
    );
    assert_eq!(
      e.to_string(),
      "exec: Working directory does not exist '/tmp/ghost' (ENOENT)"
    );
  }
}
