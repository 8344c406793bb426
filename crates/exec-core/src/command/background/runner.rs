//! The [`CommandRunner`]: its settings ([`RunnerConfig`]) and shared state,
//! a command's steps from its spec to its result or its hand-over to the
//! background (`run`), the stateful shell, the interactive commands it passes
//! on, and `close`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::jobs::{kill_proc, BgProc};
use super::logs::sweep_logs;
use crate::command::offload::Capture;
use crate::command::stateful::{ShellState, StatefulRun};
use crate::command::{command_env, CommandReport, CommandSpec, DEFAULT_RETENTION};
use crate::error::{ErrorCode, ExecError};
use crate::process::spec::check_cwd;
use crate::process::supervise::{ProcessSpec, StdinMode};
use crate::process::RunOptions;

/// Settings of a runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
  /// Id of the host environment (see [`crate::process::kill_all`]).
  pub owner: u64,
  /// Where logs go unless a command says otherwise.
  pub output_dir: PathBuf,
  /// Logs older than this are swept (`None`: never). (A kill's grace is
  /// each command's, `CommandSpec.run.kill_grace`: the runner's defaults
  /// give it, `CommandDefaults.run`.)
  pub retention: Option<Duration>,
  /// The commands share one shell state: `cd`, `export`, variables,
  /// functions, aliases and options carry over (see [`super::stateful`]).
  pub stateful: bool,
  /// The shell that runs the commands (bash unless the host chose PowerShell).
  pub shell: super::Shell,
}

impl Default for RunnerConfig {
  fn default() -> Self {
    RunnerConfig {
      owner: 0,
      output_dir: std::env::temp_dir(),
      retention: Some(DEFAULT_RETENTION),
      stateful: false,
      shell: super::Shell::Bash,
    }
  }
}

pub(super) struct Inner {
  pub(super) config: RunnerConfig,
  pub(super) closed: AtomicBool,
  pub(super) procs: Mutex<BTreeMap<u32, Arc<BgProc>>>,
  /// Commands running in the foreground: pid -> cancel.
  pub(super) foreground: Mutex<HashMap<u32, CancellationToken>>,
  /// Directories logs were written to (swept on close).
  dirs: Mutex<BTreeSet<PathBuf>>,
  /// Interactive sessions (`start` / `write`).
  interactive: super::interactive::Interactive,
  /// Stateful mode: the shared shell state, made at the first command.
  state: Mutex<Option<Arc<ShellState>>>,
}

pub(super) fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
  m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Drop for Inner {
  fn drop(&mut self) {
    // nobody can reach these processes any more
    for p in guard(&self.procs).values() {
      p.cancel.cancel();
    }
    for c in guard(&self.foreground).values() {
      c.cancel();
    }
    if let Some(s) = guard(&self.state).take() {
      s.remove();
    }
  }
}

/// A session of the command tool. Cheap to clone (shared state).
#[derive(Clone)]
pub struct CommandRunner {
  pub(super) inner: Arc<Inner>,
}

/// `bash -c <command>` (or PowerShell's `-Command <command>`) with the
/// options' cwd, environment (over the non-interactive defaults), limits and
/// sandbox; stdin at EOF (unless the caller sets an input in its `run`).
fn bash_spec(
  command: &str,
  opts: &CommandSpec,
  shell: super::Shell,
) -> Result<(ProcessSpec, Option<tempfile::TempPath>), ExecError> {
  if command.trim().is_empty() {
    return Err(ExecError::invalid("command is empty"));
  }
  check_cwd(opts.process.cwd())?;
  let env = command_env(opts.process.env.clone());
  env.validate()?;
  let (program, args, script) = shell.launch(command, &env, opts.process.cwd())?;
  let mut spec = ProcessSpec::new(program);
  spec.args = args;
  spec.process.cwd = Some(opts.process.cwd().to_path_buf());
  spec.process.env = env;
  spec.stdin = StdinMode::Null;
  spec.process.limits = opts.process.limits.clone();
  spec.process.die_with_parent = opts.process.die_with_parent;
  spec.process.sandbox = opts.process.sandbox.clone();
  Ok((spec, script))
}

impl CommandRunner {
  /// A new session. Sweeps old logs from `config.output_dir` in the background.
  pub fn new(config: RunnerConfig) -> Self {
    if let Some(age) = config.retention {
      let dir = config.output_dir.clone();
      std::thread::spawn(move || sweep_logs(&dir, age, &HashSet::new()));
    }
    let dirs = BTreeSet::from([config.output_dir.clone()]);
    let (config_owner, shell) = (config.owner, config.shell);
    CommandRunner {
      inner: Arc::new(Inner {
        config,
        closed: AtomicBool::new(false),
        procs: Mutex::new(BTreeMap::new()),
        foreground: Mutex::new(HashMap::new()),
        dirs: Mutex::new(dirs),
        interactive: super::interactive::Interactive::new(config_owner, shell),
        state: Mutex::new(None),
      }),
    }
  }

  pub fn config(&self) -> &RunnerConfig {
    &self.inner.config
  }

  pub fn is_closed(&self) -> bool {
    self.inner.closed.load(Ordering::SeqCst)
  }

  /// Run `bash -c <command>`. Never fails: a command that cannot start gives
  /// a result with `error` and `is_error`. Must be called within a tokio runtime.
  ///
  /// The steps: the spec ([`bash_spec`]), the supervised start
  /// ([`Self::spawn_supervised`]), the wait in the foreground until the timeout
  /// ([`Self::wait_foreground`]), and, if it is still running then (or was
  /// asked to run in the background), the hand-over to a background job
  /// ([`Self::to_background`]).
  pub async fn run(&self, command: &str, opts: CommandSpec) -> CommandReport {
    if self.is_closed() {
      return CommandReport::failed(ExecError::new(
        ErrorCode::ECANCELED,
        "the command runner is closed",
      ));
    }
    let stateful = match self.stateful_run(command, &opts) {
      Ok(s) => s,
      Err(e) => return CommandReport::failed(e),
    };
    let script_text = stateful
      .as_ref()
      .map_or(command, |(_, r)| r.script.as_str());
    let (mut spec, script) = match bash_spec(script_text, &opts, self.inner.config.shell) {
      Ok(s) => s,
      Err(e) => return CommandReport::failed(e),
    };
    // the command's timeout moves it to the background (`wait_foreground`),
    // it does not kill it; a kill has the command's grace, its input (if
    // any) is fed to bash's stdin
    spec.run = RunOptions {
      timeout: None,
      ..opts.run.clone()
    };
    let dir = opts
      .output_dir
      .clone()
      .unwrap_or_else(|| self.inner.config.output_dir.clone());
    guard(&self.inner.dirs).insert(dir.clone());
    let capture = Capture::shared(opts.limits(), dir);
    let mut run = match self.spawn_supervised(&spec, &capture, !opts.cleanup, script) {
      Ok(r) => r,
      Err(e) => return CommandReport::failed(e),
    };
    if !opts.background {
      if let Some(done) = self
        .wait_foreground(&mut run, command, &capture, &opts)
        .await
      {
        if let Some((state, r)) = &stateful {
          // a cancelled command's state is not the shell's
          match opts.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            true => state.discard(r),
            false => state.commit(r),
          }
        }
        return done;
      }
    }
    // it runs on in its own process: the shared state stays as it was
    if let Some((state, r)) = &stateful {
      state.discard(r);
    }
    self.to_background(run, command, capture, &opts)
  }

  /// In a stateful runner, `command` wrapped in the shared shell state
  /// (made at the first command, in the runner's output directory).
  fn stateful_run(
    &self,
    command: &str,
    opts: &CommandSpec,
  ) -> Result<Option<(Arc<ShellState>, StatefulRun)>, ExecError> {
    if !self.inner.config.stateful {
      return Ok(None);
    }
    if crate::platform::WINDOWS {
      return Err(ExecError::new(
        crate::ErrorCode::ENOTSUP,
        "a stateful runner is not supported on Windows yet: each command runs in a fresh shell there",
      ));
    }
    if command.trim().is_empty() {
      return Err(ExecError::invalid("command is empty"));
    }
    let state = {
      let mut slot = guard(&self.inner.state);
      match slot.as_ref() {
        Some(s) => s.clone(),
        None => {
          let dir = &self.inner.config.output_dir;
          super::stateful::check_writable(dir, opts.process.sandbox.as_ref(), opts.process.cwd())?;
          let s = Arc::new(ShellState::create(dir)?);
          *slot = Some(s.clone());
          s
        }
      }
    };
    let run = state.wrap(command, opts.cwd_given.then_some(opts.process.cwd()));
    Ok(Some((state, run)))
  }

  /// Start an interactive command (see [`super::interactive`]).
  pub async fn start(
    &self,
    command: &str,
    opts: super::interactive::StartOptions,
  ) -> super::interactive::InteractiveResult {
    if self.is_closed() {
      return super::interactive::InteractiveResult::failed(ExecError::new(
        ErrorCode::ECANCELED,
        "the command runner is closed",
      ));
    }
    // a stateful runner's interactive command starts from the shared state
    let state = guard(&self.inner.state).clone();
    if let (Some(state), false) = (state, command.trim().is_empty()) {
      let cd = opts.cwd_given.then_some(opts.process.cwd());
      let script = state.wrap_read_only(command, cd);
      return self.inner.interactive.start(&script, opts).await;
    }
    self.inner.interactive.start(command, opts).await
  }

  /// Send keystrokes to an interactive command and read what came back
  /// (`close_stdin`: then end its stdin, see [`super::interactive::Interactive::write`]).
  pub async fn write(
    &self,
    session: u32,
    chars: &[u8],
    yield_time: Duration,
    close_stdin: bool,
  ) -> super::interactive::InteractiveResult {
    self
      .inner
      .interactive
      .write(session, chars, yield_time, close_stdin, None)
      .await
  }

  /// [`Self::write`] that `cancel` stops: the session's tree is killed.
  pub async fn write_cancellable(
    &self,
    session: u32,
    chars: &[u8],
    yield_time: Duration,
    close_stdin: bool,
    cancel: Option<&CancellationToken>,
  ) -> super::interactive::InteractiveResult {
    self
      .inner
      .interactive
      .write(session, chars, yield_time, close_stdin, cancel)
      .await
  }

  /// Terminate an interactive command's tree and read its last output.
  pub async fn kill_session(&self, session: u32) -> super::interactive::InteractiveResult {
    self.inner.interactive.kill(session).await
  }

  /// The interactive sessions still running.
  pub fn sessions(&self) -> Vec<u32> {
    self.inner.interactive.ids()
  }

  /// Kill everything this runner still runs (background and foreground),
  /// wait for it to end, and sweep old logs. Later runs fail with ECANCELED.
  /// Returns how many processes were still running.
  pub async fn close(&self) -> usize {
    self.inner.closed.store(true, Ordering::SeqCst);
    let procs: Vec<Arc<BgProc>> = guard(&self.inner.procs).values().cloned().collect();
    let running: Vec<Arc<BgProc>> = procs
      .into_iter()
      .filter(|p| p.outcome().is_none())
      .collect();
    let fg: Vec<CancellationToken> = guard(&self.inner.foreground).values().cloned().collect();
    for c in &fg {
      c.cancel();
    }
    let count = running.len() + fg.len() + self.inner.interactive.ids().len();
    futures_join(running.iter().map(|p| kill_proc(p))).await;
    self.inner.interactive.close().await;
    if let Some(s) = guard(&self.inner.state).take() {
      s.remove();
    }
    if let Some(age) = self.inner.config.retention {
      let dirs: Vec<PathBuf> = guard(&self.inner.dirs).iter().cloned().collect();
      let _ = tokio::task::spawn_blocking(move || {
        for d in dirs {
          sweep_logs(&d, age, &HashSet::new());
        }
      })
      .await;
    }
    count
  }
}

async fn futures_join<F: std::future::Future<Output = ()>>(futs: impl Iterator<Item = F>) {
  for f in futs.collect::<Vec<_>>() {
    f.await;
  }
}
