//! [`CommandRunner`]: a session of the command tool. It runs commands, and
//! keeps the ones that outlived their timeout (or were started in the
//! background) in a registry keyed by pid, where the model can check on them
//! (new output since the last check) or kill them. Closing the runner kills
//! what it still runs; log files older than the retention age are swept.
//!
//! One file per part of the runner:
//! - `runner`: the [`CommandRunner`] and its settings ([`RunnerConfig`]): a
//!   command's steps (`run`), the stateful shell, the interactive commands
//!   it passes on, `close`;
//! - `foreground`: a command started and supervised on its own task, waited
//!   for until its timeout, its result;
//! - `jobs`: the background jobs: the hand-over of a command still running,
//!   `check`, `kill`, `list` ([`CheckResult`], [`BackgroundInfo`]);
//! - `adopt`: what a command left running, adopted as jobs and watched
//!   through `/proc`;
//! - `logs`: the output a check or a result shows (taken from the capture
//!   since the last take), the log closed once the pumps are done, old logs
//!   swept ([`sweep_logs`]);
//! - `tests`.

mod adopt;
mod foreground;
mod jobs;
mod logs;
mod runner;

pub use jobs::{BackgroundInfo, CheckResult};
pub use logs::sweep_logs;
pub use runner::{CommandRunner, RunnerConfig};

// `command`'s items the runner names as `super::...`
use super::{interactive, stateful, Shell};

#[cfg(test)]
mod tests;
