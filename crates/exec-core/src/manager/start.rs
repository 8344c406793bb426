//! A start: a handle reserved, the spec checked, the program resolved, then
//! a pipe child ([`Execution`]) or a child on a new terminal, each with the
//! task that waits for its end, records it and lets it expire.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::proc::{Input, Proc, ProcSink};
#[cfg(unix)]
use super::pty;
use super::state;
use super::table::expire_later;
use super::tree::Tree;
use super::{
  EventKind, EventSender, ExitInfo, ProcessEvent, ProcessIo, ProcessManager, StartSpec, Started,
  Stream,
};
use crate::error::{ErrorCode, ExecError};
use crate::process::spec::{check_cwd, resolve_program};
use crate::process::supervise::{Discard, Execution, ProcessSpec, RunPolicy, StdinMode};

impl ProcessManager {
  /// Start a process. Must be called within a tokio runtime. On a spawn
  /// failure a `failed` event is sent (when `events` is given) and the error
  /// returned; nothing is kept.
  pub fn start(&self, spec: StartSpec, events: Option<EventSender>) -> Result<Started, ExecError> {
    let id = self.reserve(spec.process_id.as_deref())?;
    let r = self.start_reserved(&id, spec, events.clone());
    let mut t = self.inner.table();
    t.starting.remove(&id);
    match r {
      Ok(p) => {
        let pid = p.pid();
        t.procs.insert(id.clone(), p);
        Ok(Started {
          process_id: id,
          pid,
        })
      }
      Err(e) => {
        drop(t);
        if let Some(tx) = events {
          let ev = ProcessEvent {
            process_id: id.into(),
            seq: 1,
            kind: EventKind::Failed { error: e.clone() },
          };
          if let Err(tokio::sync::mpsc::error::TrySendError::Full(ev)) = tx.try_send(ev) {
            tokio::spawn(async move {
              let _ = tx.send(ev).await;
            });
          }
        }
        Err(e)
      }
    }
  }

  fn start_reserved(
    &self,
    id: &str,
    spec: StartSpec,
    events: Option<EventSender>,
  ) -> Result<Arc<Proc>, ExecError> {
    let program = spec
      .argv
      .first()
      .ok_or_else(|| ExecError::invalid("argv must not be empty"))?;
    for a in &spec.argv {
      if a.contains('\0') {
        return Err(ExecError::invalid("argv contains a NUL byte"));
      }
    }
    spec.process.env.validate()?;
    let cwd = match spec.process.cwd.clone() {
      Some(c) => c,
      None => std::env::current_dir().map_err(|e| {
        ExecError::new(
          ErrorCode::ENOENT,
          format!("the host's working directory is gone: {e}"),
        )
      })?,
    };
    check_cwd(&cwd)?;
    let resolved = resolve_program(program, spec.process.env.path_var().as_ref(), &cwd)?;
    let pty = matches!(spec.io, ProcessIo::Pty { .. });
    if pty && spec.arg0.is_some() {
      return Err(ExecError::invalid(
        "arg0 is only supported with io.type 'pipe'",
      ));
    }
    // an input is fed to a stdin nobody else writes: not a terminal's, not
    // an open one
    match spec.io {
      ProcessIo::Pty { .. } => spec
        .run
        .refuse_input("a PTY process (write to its terminal instead)")?,
      ProcessIo::Pipe { stdin_open: true } => spec
        .run
        .refuse_input("a process with an open stdin (write to it instead)")?,
      ProcessIo::Pipe { stdin_open: false } => {}
    }
    // what it retains: its own cap, within the manager's
    let retained = self
      .inner
      .config
      .retained_output_bytes
      .min(spec.run.max_output_bytes);
    let id: Arc<str> = id.into();
    let p = Arc::new(Proc {
      id: id.clone(),
      pid: AtomicU32::new(0),
      pty,
      argv: spec.argv.clone(),
      state: Mutex::new(state::State::new(id, pty, retained, events)),
      changed: watch::channel(0).0,
      input: tokio::sync::Mutex::new(Input::Closed),
      #[cfg(unix)]
      master: Mutex::new(None),
      exited: AtomicBool::new(false),
      tree: std::sync::OnceLock::new(),
    });
    match spec.io {
      ProcessIo::Pipe { stdin_open } => self.start_pipe(p, spec, resolved, cwd, stdin_open),
      ProcessIo::Pty { rows, cols } => {
        if rows == 0 || cols == 0 {
          return Err(ExecError::invalid("io.rows and io.cols must be at least 1"));
        }
        self.start_pty(p, spec, resolved, cwd, rows, cols)
      }
    }
  }

  /// Start a pipe child ([`Execution`]) for `p`.
  fn start_pipe(
    &self,
    p: Arc<Proc>,
    spec: StartSpec,
    resolved: PathBuf,
    cwd: PathBuf,
    stdin_open: bool,
  ) -> Result<Arc<Proc>, ExecError> {
    let owner = self.inner.config.owner;
    let program = &spec.argv[0];
    if crate::platform::WINDOWS && spec.arg0.is_some() {
      return Err(ExecError::invalid(
        "arg0 is not supported on Windows (a program's command line starts with its own name there)",
      ));
    }
    let arg0 = OsString::from(spec.arg0.as_deref().unwrap_or(program));
    let mut ps = process_spec(spec, resolved, cwd);
    ps.arg0 = Some(arg0);
    ps.stdin = if stdin_open {
      StdinMode::Piped
    } else {
      StdinMode::Null
    };
    let out = ProcSink {
      proc: p.clone(),
      stream: Stream::Stdout,
    };
    let err = ProcSink {
      proc: p.clone(),
      stream: Stream::Stderr,
    };
    let mut exec = Execution::spawn(&ps, owner, out, err)?;
    if let Some(stdin) = exec.take_stdin() {
      *p.input.try_lock().expect("new process") = Input::Pipe(stdin);
    }
    Ok(self.follow(p, exec))
  }

  /// Start a child on a new terminal of `rows` x `cols` for `p`.
  #[cfg(unix)]
  fn start_pty(
    &self,
    p: Arc<Proc>,
    spec: StartSpec,
    resolved: PathBuf,
    cwd: PathBuf,
    rows: u16,
    cols: u16,
  ) -> Result<Arc<Proc>, ExecError> {
    let env = pty_env(&spec.process.env);
    let setup = crate::process::ChildSetup {
      owner: self.inner.config.owner,
      limits: &spec.process.limits,
      // the limits are set in the child before exec, as for pipes (a PTY
      // child is forked anyway); dieWithParent does not apply (see StartSpec)
      die_with_parent: false,
      sandbox: spec.process.sandbox.as_ref(),
      cwd: &cwd,
    };
    let spawned = pty::spawn(&resolved, &spec.argv, env, pty::size(rows, cols), &setup)?;
    let pty::PtyParts { child, master, io } = spawned.child;
    let spawned = crate::process::Spawned {
      child,
      pid: spawned.pid,
      mark: spawned.mark,
      guard: spawned.guard,
      sandbox: spawned.sandbox,
    };
    let io = Arc::new(io);
    // the terminal is pumped as a pipe is (EIO is its end of stream), the
    // run followed to its end as a pipe child's is
    let sink = ProcSink {
      proc: p.clone(),
      stream: Stream::Pty,
    };
    let exec = Execution::on_terminal(spawned, io.clone(), sink, Discard, &spec.run);
    *p.master.lock().unwrap_or_else(|e| e.into_inner()) = Some(master);
    *p.input.try_lock().expect("new process") = Input::Pty(io);
    Ok(self.follow(p, exec))
  }

  /// Start a child on a new pseudo console of `rows` x `cols` (ConPTY) for
  /// `p`: in its job as a pipe child is, what the console shows read as the
  /// terminal's output until the console is closed after the exit.
  #[cfg(windows)]
  fn start_pty(
    &self,
    p: Arc<Proc>,
    spec: StartSpec,
    resolved: PathBuf,
    cwd: PathBuf,
    rows: u16,
    cols: u16,
  ) -> Result<Arc<Proc>, ExecError> {
    let ps = process_spec(spec, resolved, cwd);
    let sink = ProcSink {
      proc: p.clone(),
      stream: Stream::Pty,
    };
    let owner = self.inner.config.owner;
    let (exec, input) = Execution::on_console(&ps, owner, (rows, cols), sink, Discard)?;
    // its console is its tree's (`follow`): the graceful stop and resize
    *p.input.try_lock().expect("new process") = Input::Console(input);
    Ok(self.follow(p, exec))
  }

  /// Record `exec`'s pid and its tree in `p`, and follow it to its end on a
  /// task: the exit (or a limit), the tree's sweep, the bounded drain; then
  /// its terminal (if any) goes, its end is recorded and expires later.
  fn follow<O: crate::process::supervise::OutputSink>(
    &self,
    p: Arc<Proc>,
    exec: Execution<O, impl crate::process::supervise::OutputSink>,
  ) -> Arc<Proc> {
    let cfg = &self.inner.config;
    let pid = exec.pid();
    p.pid.store(pid, Ordering::Release);
    #[cfg(unix)]
    let _ = p.tree.set(Tree::new(pid, exec.mark().to_owned()));
    #[cfg(windows)]
    let _ = p.tree.set(Tree::new(pid, exec.job(), exec.console()));
    p.lock().release_started(pid);
    p.bump();
    let policy = RunPolicy {
      drain: cfg.drain,
      cleanup_group_on_exit: true,
      owner: cfg.owner,
    };
    let (weak, retention) = (Arc::downgrade(&self.inner), cfg.exited_retention);
    let proc = p.clone();
    tokio::spawn(async move {
      let f = exec.wait(&policy, &CancellationToken::new()).await;
      // the terminal is done: its master goes now, not after the retention
      #[cfg(unix)]
      drop(proc.master.lock().unwrap_or_else(|e| e.into_inner()).take());
      proc
        .finish(ExitInfo {
          exit_code: f.outcome.exit_code,
          signal: f.outcome.signal,
          // no cancel here: only a limit or a timeout gives an error
          error: f
            .outcome
            .error
            .filter(|e| matches!(e.code, ErrorCode::ELIMIT | ErrorCode::TIMEOUT)),
          sandbox: f.outcome.sandbox,
        })
        .await;
      expire_later(weak, proc, retention);
    });
    p
  }
}

/// The run of `spec`'s program (`resolved`) with its arguments in `cwd`:
/// its options, and by default no timeout (it runs until it exits or is
/// terminated), its input (if any) fed to its stdin.
fn process_spec(spec: StartSpec, resolved: PathBuf, cwd: PathBuf) -> ProcessSpec {
  let mut ps = ProcessSpec::new(resolved);
  ps.args = spec.argv[1..].iter().map(OsString::from).collect();
  ps.process = crate::process::ProcessOptions {
    cwd: Some(cwd),
    ..spec.process
  };
  ps.run = spec.run;
  ps
}

/// The environment of a PTY child: a terminal of ours, so TERM is
/// xterm-256color unless the caller set it (not whatever the host's own
/// terminal was).
#[cfg(unix)]
fn pty_env(spec: &crate::process::spec::EnvSpec) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
  let mut env = spec.build();
  if !spec.vars.iter().any(|(k, _)| k == "TERM") {
    env.retain(|(k, _)| k != "TERM");
  }
  env
}
