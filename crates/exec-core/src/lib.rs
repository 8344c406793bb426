//! exec-core: the process execution core of exec-native. It knows nothing of
//! Node: the napi binding, the CLI and the JSON-RPC server all call it.

pub mod buffer;
pub mod cgroup;
pub mod command;
pub mod error;
pub mod hostguard;
pub mod language;
pub mod limits;
pub mod manager;
pub mod mcp;
pub(crate) mod platform;
pub mod process;
pub mod sandbox;
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
pub use tokio_util::sync::CancellationToken;
pub use ts_strip::TsPath;
