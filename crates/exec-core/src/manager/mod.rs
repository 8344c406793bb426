//! Long-lived processes driven step by step: start, write, resize, read (long
//! poll), wait, terminate. Each process keeps a bounded copy of its output
//! (head+tail per stream and an interleaved log for `read`) and reports events
//! with a per-process `seq` to an optional bounded channel.
//!
//! Pipe processes reuse [`Execution`] (posix_spawn, own process group); PTY
//! processes get a terminal opened by `portable-pty` (session leader with it as
//! controlling terminal; limits applied before exec, as for pipes).

#[cfg(unix)]
mod pty;
mod state;
mod tree;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
#[cfg(unix)]
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

#[cfg(unix)]
use crate::process::child::StdinPipe;
#[cfg(unix)]
use portable_pty::MasterPty;
#[cfg(unix)]
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, ExecError};
use crate::process::spec::{check_cwd, resolve_program, EnvSpec};
#[cfg(unix)]
use crate::process::supervise::pump;
use crate::process::supervise::{Execution, OutputSink, ProcessSpec, RunPolicy, StdinMode};
use tree::Tree;

/// The stdin pipe of a pipe child.
#[cfg(windows)]
type StdinPipe = tokio::process::ChildStdin;

pub use state::{EventKind, EventSender, ExitInfo, LogChunk, ProcessEvent, ReadResult, Stream};

/// Server-side limits: they hold for every process, whatever the requests say.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
  /// Bytes retained per stream buffer and for the read log of each process.
  pub retained_output_bytes: usize,
  /// Processes that may run (not yet closed) at once.
  pub max_processes: usize,
  /// How long an exited process stays readable.
  pub exited_retention: Duration,
  /// Between SIGTERM and SIGKILL when the manager closes.
  pub close_grace: Duration,
  /// How long output is still read after the exit (a grandchild holding the
  /// pipe or terminal open must not keep the process from closing).
  pub drain: Duration,
  /// The host environment that owns the processes (see [`group::kill_all`]).
  pub owner: u64,
}

pub const DEFAULT_RETAINED_OUTPUT_BYTES: usize = 1024 * 1024;
/// `terminate`'s wait between the graceful step and the kill, when the call
/// gives none (the server's protocol and `ProcessManager` alike).
pub const DEFAULT_TERMINATE_TIMEOUT_MS: u64 = 2000;
/// `read`'s byte budget when the call gives none.
pub const DEFAULT_READ_MAX_BYTES: usize = 1024 * 1024;
pub const DEFAULT_MAX_PROCESSES: usize = 64;
pub const DEFAULT_EXITED_RETENTION: Duration = Duration::from_secs(30);

impl ManagerConfig {
  /// The options' names of the settings a host may give.
  pub const NAMES: [&'static str; 3] = ["retainedOutputBytes", "maxProcesses", "exitedRetentionMs"];

  /// Set the setting the options call `name` to `n` (a JavaScript number):
  /// bytes and milliseconds are non-negative and finite, `maxProcesses` at
  /// least 1. The message says what is wrong; the caller names the option.
  /// `ProcessManager` and `serve` both check with it.
  pub fn set(&mut self, name: &str, n: f64) -> Result<(), String> {
    let n = crate::process::limits::finite_non_negative(n)?;
    match name {
      "retainedOutputBytes" => self.retained_output_bytes = n as usize,
      "maxProcesses" if n < 1.0 => return Err(format!("must be at least 1, got {n}")),
      "maxProcesses" => self.max_processes = n as usize,
      "exitedRetentionMs" => self.exited_retention = Duration::from_micros((n * 1000.0) as u64),
      _ => {
        return Err(format!(
          "is not a setting, expected one of {}",
          Self::NAMES.join(", ")
        ))
      }
    }
    Ok(())
  }
}

impl Default for ManagerConfig {
  fn default() -> Self {
    ManagerConfig {
      retained_output_bytes: DEFAULT_RETAINED_OUTPUT_BYTES,
      max_processes: DEFAULT_MAX_PROCESSES,
      exited_retention: DEFAULT_EXITED_RETENTION,
      close_grace: Duration::from_millis(500),
      drain: Duration::from_millis(100),
      owner: 0,
    }
  }
}

/// How the process is connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessIo {
  /// stdout and stderr are pipes; stdin is a pipe when `stdin_open`, else /dev/null.
  Pipe { stdin_open: bool },
  /// One pseudo-terminal for all three.
  Pty { rows: u16, cols: u16 },
}

/// A process to start.
#[derive(Debug, Clone)]
pub struct StartSpec {
  /// The protocol handle; generated when `None`.
  pub process_id: Option<String>,
  /// Program (looked up in the child's PATH) and arguments.
  pub argv: Vec<String>,
  pub cwd: Option<PathBuf>,
  pub env: EnvSpec,
  /// `argv[0]` as the program sees it (pipes only).
  pub arg0: Option<String>,
  pub io: ProcessIo,
  /// Opt-in resource limits of the process tree (see [`crate::process::limits`]).
  pub limits: crate::process::limits::Limits,
  /// Pipes: PR_SET_PDEATHSIG (SIGKILL when the host dies). A PTY child is a
  /// session leader and gets SIGHUP from the kernel when the host's master
  /// side closes, so it is ignored there.
  pub die_with_parent: bool,
  /// Opt-in OS sandbox of the process tree (see [`crate::process::sandbox`]).
  pub sandbox: Option<crate::process::sandbox::SandboxPolicy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateMode {
  /// SIGTERM the group, SIGKILL it after `timeout` if it is still running.
  Graceful { timeout: Duration },
  /// SIGKILL the group.
  Force,
}

/// The state of a process as `wait`/`terminate` report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitResult {
  pub running: bool,
  pub exit: Option<ExitInfo>,
}

/// Retained output and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
  pub stdout: Vec<u8>,
  pub stderr: Vec<u8>,
  pub terminal: Vec<u8>,
  pub truncated: bool,
  pub omitted_bytes: u64,
  pub exit: Option<ExitInfo>,
  pub running: bool,
  pub next_seq: u64,
}

/// A row of `list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
  pub process_id: String,
  pub pid: u32,
  pub argv: Vec<String>,
  pub pty: bool,
  pub running: bool,
  pub exit: Option<ExitInfo>,
}

/// The answer to `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
  pub process_id: String,
  pub pid: u32,
}

enum Input {
  Closed,
  Pipe(StdinPipe),
  #[cfg(unix)]
  Pty(Arc<AsyncFd<OwnedFd>>),
}

struct Proc {
  id: Arc<str>,
  pid: AtomicU32,
  pty: bool,
  argv: Vec<String>,
  state: Mutex<state::State>,
  changed: watch::Sender<u64>,
  input: tokio::sync::Mutex<Input>,
  /// The terminal's master while the process runs (dropped at its end, so a
  /// finished PTY holds no `/dev/ptmx` descriptor while it is retained).
  #[cfg(unix)]
  master: Mutex<Option<Box<dyn MasterPty + Send>>>,
  exited: AtomicBool,
  /// Its tree (set once it is spawned).
  tree: std::sync::OnceLock<Tree>,
}

impl Proc {
  fn lock(&self) -> MutexGuard<'_, state::State> {
    self.state.lock().unwrap_or_else(|e| e.into_inner())
  }

  fn pid(&self) -> u32 {
    self.pid.load(Ordering::Acquire)
  }

  fn bump(&self) {
    self.changed.send_modify(|v| *v = v.wrapping_add(1));
  }

  fn record_output(&self, stream: Stream, data: &[u8]) {
    self.lock().record_output(stream, data);
    self.bump();
  }

  /// Wait until the consumer took every pending event (backpressure).
  async fn deliver(&self) {
    loop {
      let Some(tx) = self.lock().pending_sender() else {
        return;
      };
      match tx.reserve_owned().await {
        Ok(permit) => self.lock().send_with(permit),
        Err(_) => {
          self.lock().consumer_gone();
          return;
        }
      }
    }
  }

  async fn finish(&self, mut exit: ExitInfo) {
    if let Some(r) = &mut exit.sandbox {
      let [err, out] = self.lock().retained_text();
      r.judge(exit.exit_code, exit.signal.as_deref(), &[&err, &out]);
    }
    self.exited.store(true, Ordering::Release);
    *self.input.lock().await = Input::Closed;
    self.lock().record_exit(exit);
    self.bump();
    self.deliver().await;
  }

  fn is_closed(&self) -> bool {
    self.lock().closed
  }

  fn wait_result(&self) -> WaitResult {
    let st = self.lock();
    WaitResult {
      running: st.exit.is_none(),
      exit: st.exit.clone(),
    }
  }

  /// Ask the tree to end (SIGTERM; `CTRL_BREAK_EVENT` on Windows) unless
  /// the leader already exited.
  fn ask_to_end(&self) {
    if let Some(t) = self.running_tree() {
      t.ask();
    }
  }

  /// Kill the tree (SIGKILL; `TerminateJobObject` on Windows) unless the
  /// leader already exited.
  fn kill(&self) {
    if let Some(t) = self.running_tree() {
      t.kill();
    }
  }

  fn running_tree(&self) -> Option<&Tree> {
    if self.exited.load(Ordering::Acquire) {
      return None;
    }
    self.tree.get()
  }

  async fn wait_exit(&self, timeout: Option<Duration>) -> WaitResult {
    let mut rx = self.changed.subscribe();
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
      let r = self.wait_result();
      if !r.running {
        return r;
      }
      let changed = rx.changed();
      match deadline {
        Some(d) => {
          if tokio::time::timeout_at(d, changed).await.is_err() {
            return self.wait_result();
          }
        }
        None => {
          let _ = changed.await;
        }
      }
    }
  }
}

/// Appends a pipe's output to the process state; `ready` waits for the event
/// consumer so that a slow consumer slows the child instead of growing memory.
struct ProcSink {
  proc: Arc<Proc>,
  stream: Stream,
}

impl OutputSink for ProcSink {
  fn write(&mut self, data: &[u8]) {
    self.proc.record_output(self.stream, data);
  }

  async fn ready(&mut self) {
    self.proc.deliver().await;
  }

  async fn finish(&mut self) {
    self.proc.deliver().await;
  }
}

struct Table {
  procs: HashMap<String, Arc<Proc>>,
  starting: HashSet<String>,
  next_id: u64,
}

struct Inner {
  config: ManagerConfig,
  table: Mutex<Table>,
  closed: AtomicBool,
}

impl Inner {
  fn table(&self) -> MutexGuard<'_, Table> {
    self.table.lock().unwrap_or_else(|e| e.into_inner())
  }
}

impl Drop for Inner {
  fn drop(&mut self) {
    // nobody can reach these processes any more
    let procs: Vec<Arc<Proc>> = self.table().procs.values().cloned().collect();
    for p in procs {
      // the leader too while it runs; what it left behind in any case
      p.kill();
      if let Some(t) = p.tree.get() {
        t.kill_leftovers();
      }
    }
  }
}

/// A table of long-lived processes. Cheap to clone (shared).
#[derive(Clone)]
pub struct ProcessManager {
  inner: Arc<Inner>,
}

fn unknown(id: &str) -> ExecError {
  ExecError::new(
    ErrorCode::ESRCH,
    format!("no process '{id}' (never started, or expired after it exited)"),
  )
}

impl ProcessManager {
  pub fn new(config: ManagerConfig) -> Self {
    ProcessManager {
      inner: Arc::new(Inner {
        config,
        table: Mutex::new(Table {
          procs: HashMap::new(),
          starting: HashSet::new(),
          next_id: 1,
        }),
        closed: AtomicBool::new(false),
      }),
    }
  }

  pub fn config(&self) -> &ManagerConfig {
    &self.inner.config
  }

  fn get(&self, id: &str) -> Result<Arc<Proc>, ExecError> {
    self
      .inner
      .table()
      .procs
      .get(id)
      .cloned()
      .ok_or_else(|| unknown(id))
  }

  /// Reserve a handle: checks the limit and duplicates.
  fn reserve(&self, wanted: Option<&str>) -> Result<String, ExecError> {
    if self.inner.closed.load(Ordering::Acquire) {
      return Err(ExecError::new(
        ErrorCode::EINVAL,
        "the process manager is closed",
      ));
    }
    let mut t = self.inner.table();
    let running = t.procs.values().filter(|p| !p.is_closed()).count() + t.starting.len();
    let max = self.inner.config.max_processes;
    if running >= max {
      return Err(ExecError::new(
        ErrorCode::EBUSY,
        format!("too many processes: maxProcesses is {max} and {running} are running"),
      ));
    }
    let id = match wanted {
      Some(id) => {
        if id.is_empty() {
          return Err(ExecError::invalid("processId must not be empty"));
        }
        if t.procs.contains_key(id) || t.starting.contains(id) {
          return Err(ExecError::new(
            ErrorCode::EEXIST,
            format!("a process with processId '{id}' already exists"),
          ));
        }
        id.to_owned()
      }
      None => loop {
        let id = format!("proc-{}", t.next_id);
        t.next_id += 1;
        if !t.procs.contains_key(&id) && !t.starting.contains(&id) {
          break id;
        }
      },
    };
    t.starting.insert(id.clone());
    Ok(id)
  }

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
    spec.env.validate()?;
    let cwd = match spec.cwd.clone() {
      Some(c) => c,
      None => std::env::current_dir().map_err(|e| {
        ExecError::new(
          ErrorCode::ENOENT,
          format!("the host's working directory is gone: {e}"),
        )
      })?,
    };
    check_cwd(&cwd)?;
    let resolved = resolve_program(program, spec.env.path_var().as_ref(), &cwd)?;
    let pty = matches!(spec.io, ProcessIo::Pty { .. });
    if pty && spec.arg0.is_some() {
      return Err(ExecError::invalid(
        "arg0 is only supported with io.type 'pipe'",
      ));
    }
    let id: Arc<str> = id.into();
    let p = Arc::new(Proc {
      id: id.clone(),
      pid: AtomicU32::new(0),
      pty,
      argv: spec.argv.clone(),
      state: Mutex::new(state::State::new(
        id,
        pty,
        self.inner.config.retained_output_bytes,
        events,
      )),
      changed: watch::channel(0).0,
      input: tokio::sync::Mutex::new(Input::Closed),
      #[cfg(unix)]
      master: Mutex::new(None),
      exited: AtomicBool::new(false),
      tree: std::sync::OnceLock::new(),
    });
    match spec.io {
      ProcessIo::Pipe { stdin_open } => self.start_pipe(p, spec, resolved, cwd, stdin_open),
      #[cfg(unix)]
      ProcessIo::Pty { rows, cols } => self.start_pty(p, spec, resolved, cwd, rows, cols),
      // portable-pty speaks ConPTY, but the terminal's reader and the child
      // in a Job Object are not written yet (issue 25)
      #[cfg(windows)]
      ProcessIo::Pty { .. } => Err(ExecError::not_on_windows("a PTY (io.type 'pty', ConPTY)")),
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
    let cfg = &self.inner.config;
    let weak = Arc::downgrade(&self.inner);
    let program = &spec.argv[0];
    if crate::platform::WINDOWS && spec.arg0.is_some() {
      return Err(ExecError::invalid(
        "arg0 is not supported on Windows (a program's command line starts with its own name there)",
      ));
    }
    let mut ps = ProcessSpec::new(resolved);
    ps.args = spec.argv[1..].iter().map(OsString::from).collect();
    ps.arg0 = Some(OsString::from(spec.arg0.as_deref().unwrap_or(program)));
    ps.cwd = Some(cwd);
    ps.env = spec.env;
    ps.stdin = if stdin_open {
      StdinMode::Piped
    } else {
      StdinMode::Null
    };
    ps.limits = spec.limits;
    ps.die_with_parent = spec.die_with_parent;
    ps.sandbox = spec.sandbox.clone();
    let out = ProcSink {
      proc: p.clone(),
      stream: Stream::Stdout,
    };
    let err = ProcSink {
      proc: p.clone(),
      stream: Stream::Stderr,
    };
    let mut exec = Execution::spawn(&ps, cfg.owner, out, err)?;
    p.pid.store(exec.pid(), Ordering::Release);
    #[cfg(unix)]
    let _ = p.tree.set(Tree::new(exec.pid(), exec.mark().to_owned()));
    #[cfg(windows)]
    let _ = p.tree.set(Tree::new(exec.pid(), exec.job()));
    if let Some(stdin) = exec.take_stdin() {
      *p.input.try_lock().expect("new process") = Input::Pipe(stdin);
    }
    p.lock().release_started(exec.pid());
    p.bump();
    let policy = RunPolicy {
      timeout: None,
      timeout_label: None,
      kill_grace: cfg.close_grace,
      drain: cfg.drain,
      cleanup_group_on_exit: true,
      owner: cfg.owner,
    };
    let proc = p.clone();
    let retention = cfg.exited_retention;
    tokio::spawn(async move {
      let f = exec.wait(&policy, &CancellationToken::new()).await;
      proc
        .finish(ExitInfo {
          exit_code: f.outcome.exit_code,
          signal: f.outcome.signal,
          // no timeout and no cancel here: only a limit gives an error
          error: f.outcome.error.filter(|e| e.code == ErrorCode::ELIMIT),
          sandbox: f.outcome.sandbox,
        })
        .await;
      expire_later(weak, proc, retention);
    });
    Ok(p)
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
    let cfg = &self.inner.config;
    let weak = Arc::downgrade(&self.inner);
    if rows == 0 || cols == 0 {
      return Err(ExecError::invalid("io.rows and io.cols must be at least 1"));
    }
    let env = pty_env(&spec.env);
    let setup = crate::process::ChildSetup {
      owner: cfg.owner,
      limits: &spec.limits,
      // the limits are set in the child before exec, as for pipes (a PTY
      // child is forked anyway); dieWithParent does not apply (see StartSpec)
      die_with_parent: false,
      sandbox: spec.sandbox.as_ref(),
      cwd: &cwd,
    };
    let prepared = setup.prepare()?;
    let spawned = pty::spawn(
      &resolved,
      &spec.argv,
      env,
      pty::size(rows, cols),
      &setup,
      prepared,
    )?;
    let pid = spawned.pid as u32;
    let sandbox = spawned.sandbox;
    let (mark, mut guard) = (spawned.mark, spawned.guard);
    let spawned = spawned.child;
    *p.master.lock().unwrap_or_else(|e| e.into_inner()) = Some(spawned.master);
    p.pid.store(pid, Ordering::Release);
    let _ = p.tree.set(Tree::new(pid, mark.clone()));
    let io = Arc::new(spawned.io);
    *p.input.try_lock().expect("new process") = Input::Pty(io.clone());
    p.lock().release_started(pid);
    p.bump();
    let stop = CancellationToken::new();
    // the terminal is pumped as a pipe is (EIO is its end of stream)
    let sink = ProcSink {
      proc: p.clone(),
      stream: Stream::Pty,
    };
    let reader = tokio::spawn(pump(io, sink, stop.clone(), Default::default()));
    let proc = p.clone();
    let owner = cfg.owner;
    let grace = cfg.close_grace;
    let drain = cfg.drain;
    let retention = cfg.exited_retention;
    let mut child = spawned.child;
    tokio::spawn(async move {
      // reaped as a pipe child is (tokio's child wait), its status decoded the same way
      let mut limit_hit = None;
      let status = tokio::select! {
        st = child.wait() => st,
        e = guard.watch() => {
          limit_hit = Some(e);
          guard.kill_tree(pid as i32);
          child.wait().await
        }
      };
      let (exit_code, signal) = match status {
        Ok(st) => crate::process::supervise::decode_status(st),
        Err(_) => (-1, None),
      };
      let mut exit = ExitInfo {
        exit_code,
        signal,
        error: None,
        sandbox: None,
      };
      exit.sandbox = sandbox;
      exit.error = limit_hit.or_else(|| guard.explain(exit.signal.as_deref(), exit.exit_code));
      guard.release();
      // the output is read to EIO, but no longer than `drain` after the exit
      let stopper = tokio::spawn(async move {
        tokio::time::sleep(drain).await;
        stop.cancel();
      });
      let _ = reader.await;
      stopper.abort();
      // the terminal is done: its master goes now, not after the retention
      drop(proc.master.lock().unwrap_or_else(|e| e.into_inner()).take());
      // what is left of the tree (the group, and marked escapees)
      crate::process::ProcessTree::new(pid as i32, &mark).terminate_later(owner, grace);
      proc.finish(exit).await;
      expire_later(weak, proc, retention);
    });
    Ok(p)
  }

  /// Write to the process's stdin (or terminal).
  pub async fn write(&self, id: &str, data: &[u8]) -> Result<(), ExecError> {
    let p = self.get(id)?;
    let mut input = p.input.lock().await;
    let closed = || {
      ExecError::new(
        ErrorCode::EPIPE,
        format!("stdin of process '{id}' is closed"),
      )
    };
    match &mut *input {
      Input::Closed => Err(closed()),
      Input::Pipe(w) => {
        let r = async {
          w.write_all(data).await?;
          w.flush().await
        }
        .await;
        match r {
          Ok(()) => Ok(()),
          Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            *input = Input::Closed;
            Err(closed())
          }
          Err(e) => Err(ExecError::new(
            ErrorCode::EIO,
            format!("cannot write to process '{id}': {e}"),
          )),
        }
      }
      #[cfg(unix)]
      Input::Pty(fd) => {
        let fd = fd.clone();
        match pty::write_all(&fd, data).await {
          Ok(()) => Ok(()),
          Err(e) if e.raw_os_error() == Some(libc::EIO) => {
            *input = Input::Closed;
            Err(closed())
          }
          Err(e) => Err(ExecError::new(
            ErrorCode::EIO,
            format!("cannot write to the terminal of process '{id}': {e}"),
          )),
        }
      }
    }
  }

  /// Close the stdin pipe: the program reads EOF.
  pub async fn close_stdin(&self, id: &str) -> Result<(), ExecError> {
    let p = self.get(id)?;
    if p.pty {
      return Err(ExecError::invalid(format!(
        "process '{id}' has a terminal, not a stdin pipe: write the EOF character (\"\\u0004\") instead"
      )));
    }
    let mut input = p.input.lock().await;
    if let Input::Pipe(mut w) = std::mem::replace(&mut *input, Input::Closed) {
      let _ = w.shutdown().await;
    }
    Ok(())
  }

  /// Resize the terminal (the child gets SIGWINCH).
  pub fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<(), ExecError> {
    let p = self.get(id)?;
    if !p.pty {
      return Err(ExecError::invalid(format!(
        "process '{id}' uses pipes, not a terminal: only io.type 'pty' can be resized"
      )));
    }
    if rows == 0 || cols == 0 {
      return Err(ExecError::invalid("rows and cols must be at least 1"));
    }
    self.resize_pty(&p, id, rows, cols)
  }

  #[cfg(windows)]
  fn resize_pty(&self, _: &Proc, _: &str, _: u16, _: u16) -> Result<(), ExecError> {
    unreachable!("no PTY process starts on Windows")
  }

  #[cfg(unix)]
  fn resize_pty(&self, p: &Proc, id: &str, rows: u16, cols: u16) -> Result<(), ExecError> {
    let master = p.master.lock().unwrap_or_else(|e| e.into_inner());
    let Some(master) = master.as_ref() else {
      return Err(ExecError::invalid(format!(
        "process '{id}' has ended: its terminal is closed"
      )));
    };
    let r = master
      .resize(pty::size(rows, cols))
      .map_err(|e| ExecError::new(ErrorCode::EIO, format!("cannot resize: {e}")));
    r
  }

  /// Terminate the process group and wait for the exit.
  pub async fn terminate(&self, id: &str, mode: TerminateMode) -> Result<WaitResult, ExecError> {
    let p = self.get(id)?;
    Ok(terminate_proc(&p, mode).await)
  }

  /// Wait for the exit, at most `timeout` (`running: true` when it ran out).
  pub async fn wait(&self, id: &str, timeout: Option<Duration>) -> Result<WaitResult, ExecError> {
    let p = self.get(id)?;
    Ok(p.wait_exit(timeout).await)
  }

  /// Output chunks after `after_seq`. With `wait`, waits until there is some,
  /// the process exited, or `wait` passed.
  pub async fn read(
    &self,
    id: &str,
    after_seq: u64,
    max_bytes: usize,
    wait: Duration,
  ) -> Result<ReadResult, ExecError> {
    let p = self.get(id)?;
    let mut rx = p.changed.subscribe();
    let deadline = Instant::now() + wait;
    loop {
      {
        let st = p.lock();
        if st.has_news(after_seq) {
          return Ok(st.read(after_seq, max_bytes));
        }
      }
      if tokio::time::timeout_at(deadline, rx.changed())
        .await
        .is_err()
      {
        return Ok(p.lock().read(after_seq, max_bytes));
      }
    }
  }

  pub fn snapshot(&self, id: &str) -> Result<Snapshot, ExecError> {
    let p = self.get(id)?;
    let st = p.lock();
    let (o, e, t) = (st.stdout.render(), st.stderr.render(), st.terminal.render());
    Ok(Snapshot {
      truncated: o.truncated || e.truncated || t.truncated,
      omitted_bytes: o.omitted + e.omitted + t.omitted,
      stdout: o.bytes,
      stderr: e.bytes,
      terminal: t.bytes,
      running: st.exit.is_none(),
      exit: st.exit.clone(),
      next_seq: st.next_seq,
    })
  }

  pub fn list(&self) -> Vec<ProcessInfo> {
    let procs: Vec<Arc<Proc>> = self.inner.table().procs.values().cloned().collect();
    let mut out: Vec<ProcessInfo> = procs
      .iter()
      .map(|p| {
        let w = p.wait_result();
        ProcessInfo {
          process_id: p.id.to_string(),
          pid: p.pid(),
          argv: p.argv.clone(),
          pty: p.pty,
          running: w.running,
          exit: w.exit,
        }
      })
      .collect();
    out.sort_by(|a, b| a.process_id.cmp(&b.process_id));
    out
  }

  /// Refuse new processes, terminate every running one (SIGTERM, SIGKILL
  /// after `close_grace`) and wait for them.
  pub async fn close(&self) {
    self.inner.closed.store(true, Ordering::Release);
    // starts already past `reserve` finish first (they are in `starting`
    // until their process is in `procs`, or failed): none is missed
    while !self.inner.table().starting.is_empty() {
      tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let procs: Vec<Arc<Proc>> = self.inner.table().procs.values().cloned().collect();
    let grace = self.inner.config.close_grace;
    let waits = procs.iter().map(|p| async move {
      if p.wait_result().running {
        terminate_proc(p, TerminateMode::Graceful { timeout: grace }).await;
      }
    });
    futures_util::future::join_all(waits).await;
  }
}

async fn terminate_proc(p: &Proc, mode: TerminateMode) -> WaitResult {
  let r = p.wait_result();
  if !r.running {
    return r;
  }
  match mode {
    TerminateMode::Force => p.kill(),
    TerminateMode::Graceful { timeout } => {
      p.ask_to_end();
      let r = p.wait_exit(Some(timeout)).await;
      if !r.running {
        return r;
      }
      p.kill();
    }
  }
  // SIGKILL cannot be ignored; the bound only guards against a stuck kernel
  p.wait_exit(Some(Duration::from_secs(10))).await
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
fn expire_later(weak: Weak<Inner>, proc: Arc<Proc>, retention: Duration) {
  let id = proc.id.to_string();
  drop(proc);
  tokio::spawn(async move {
    tokio::time::sleep(retention).await;
    if let Some(inner) = weak.upgrade() {
      inner.table().procs.remove(&id);
    }
  });
}

#[cfg(test)]
mod tests;
