//! The layer every feature spawns through (issue 13's process pipeline, in
//! progress): [`spawn`] is the one spawn sequence of pipes, the session
//! worker and the PTY; [`tree`] the one kill order of a run's tree.

pub mod spawn;
pub mod tree;

pub use spawn::{ChildSetup, Prepared, Spawned};
pub use tree::ProcessTree;
