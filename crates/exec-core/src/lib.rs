//! exec-core: the process execution core of exec-native. It knows nothing of
//! Node: the napi binding, the CLI and the JSON-RPC server all call it.

pub mod buffer;
pub mod command;
pub mod error;
#[cfg(unix)]
pub mod hostguard;
pub mod language;
pub mod manager;
pub mod mcp;
pub(crate) mod platform;
pub mod process;
pub mod server;
pub mod session;
pub mod trace;
mod ts_strip;
pub mod utf8;

pub use buffer::HeadTailBuffer;
pub use error::{ErrorCode, ExecError};
pub use language::{Language, Toolchain};
pub use process::spec::EnvSpec;
pub use process::supervise::{
  run, Execution, OutputSink, ProcessSpec, RunOutcome, RunPolicy, StdinMode,
};
pub use process::{ProcessFields, ProcessOptions, RunFields, RunOptions};
pub use tokio_util::sync::CancellationToken;
pub use ts_strip::TsPath;

/// The file of the shared object (the `.node`, a DLL on Windows) this code
/// was loaded from.
pub fn loaded_from() -> Option<std::path::PathBuf> {
  platform::this_library()
}
