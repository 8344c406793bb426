//! The layer every feature spawns through (issue 13's process pipeline, in
//! progress): [`spawn`] is the one spawn sequence of pipes, the session
//! worker and the PTY.

pub mod spawn;

pub use spawn::{ChildSetup, Prepared, Spawned};
