//! The process layer every feature (command, session, manager, server) spawns
//! and kills through. Dependencies point one way, downwards, in this order
//! (`scripts/check-layers.mjs` checks it):
//!
//! - [`supervise`]: a run of a pipe child (the `Execution`): pumps, the exit
//!   phase, timeout and cancel, the drain, the catch-up barrier;
//! - [`child`]: a spawned pipe child (the addon's own clone+exec on Linux)
//!   and how it is waited for and killed;
//! - [`setup`]: the one spawn sequence of pipes, the session worker and the
//!   PTY (`ChildSetup`), one small module per concern (mark, limits and
//!   parent death, sandbox, group or terminal) and the one child routine
//!   they compose, then ticket and registration;
//! - what a spawn applies: [`limits`] (resource limits, the limit guard and
//!   its watchdog), [`cgroup`] (the cgroups the guard makes), [`sandbox`]
//!   (the policy, the helper's command line or the child's restriction);
//! - [`options`]: `ProcessOptions`, what every process takes (cwd, env,
//!   limits, parent death, sandbox), and `RunOptions`, how a run ends
//!   (timeout, kill grace, input, output cap), both embedded in every spec
//!   (each API's defaults and what its timeout does there);
//! - [`tree`]: a run's tree (`ProcessTree`) and the one order it is signalled in;
//! - [`reaper`]: orphans of our runs reaped when the host is PID 1 or a
//!   subreaper (its decisions a pure part, `reaper::pass`);
//! - [`registry`]: live groups, spawn tickets, the host's kill-all (it tells
//!   the reaper of groups through the `Watcher` the reaper sets at its init);
//! - [`marks`]: the run mark in the environment and the scans that find it;
//! - [`spec`]: what to run (environment, program resolution, cwd checks,
//!   the exec image of the fork path).
//!
//! Below them, [`crate::platform`] wraps every OS-specific call.

#[cfg(unix)]
pub mod cgroup;
#[cfg(unix)]
pub mod child;
pub mod limits;
#[cfg(unix)]
pub mod marks;
pub mod options;
#[cfg(unix)]
pub mod reaper;
#[cfg(unix)]
pub mod registry;
pub mod sandbox;
// Windows: the live Job Objects, the host's kill-all and the signal names
#[cfg(windows)]
#[path = "registry_windows.rs"]
pub mod registry;
#[cfg(unix)]
mod setup;
pub mod spec;
pub mod supervise;
#[cfg(unix)]
pub(crate) mod sweeps;
#[cfg(unix)]
mod tree;

pub use options::{ProcessFields, ProcessOptions, RunFields, RunOptions};
#[cfg(windows)]
pub use registry::{kill_all, shutdown};
#[cfg(unix)]
pub use setup::{ChildCommand, ChildEnv, ChildSetup, Leader, Spawned};
#[cfg(unix)]
pub use tree::{kill_all, shutdown, ProcessTree};
