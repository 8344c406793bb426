//! The table of processes: handles reserved (the limit, duplicates), looked
//! up, listed, expired after the retention, and all terminated by `close`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use super::proc::{terminate_proc, Proc};
use super::{ManagerConfig, ProcessInfo, ProcessManager, TerminateMode};
use crate::error::{ErrorCode, ExecError};

pub(super) struct Table {
  pub(super) procs: HashMap<String, Arc<Proc>>,
  pub(super) starting: HashSet<String>,
  next_id: u64,
}

pub(super) struct Inner {
  pub(super) config: ManagerConfig,
  table: Mutex<Table>,
  closed: AtomicBool,
}

impl Inner {
  pub(super) fn table(&self) -> MutexGuard<'_, Table> {
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

  pub(super) fn get(&self, id: &str) -> Result<Arc<Proc>, ExecError> {
    self
      .inner
      .table()
      .procs
      .get(id)
      .cloned()
      .ok_or_else(|| unknown(id))
  }

  /// Reserve a handle: checks the limit and duplicates.
  pub(super) fn reserve(&self, wanted: Option<&str>) -> Result<String, ExecError> {
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

pub(super) fn expire_later(weak: Weak<Inner>, proc: Arc<Proc>, retention: Duration) {
  let id = proc.id.to_string();
  drop(proc);
  tokio::spawn(async move {
    tokio::time::sleep(retention).await;
    if let Some(inner) = weak.upgrade() {
      inner.table().procs.remove(&id);
    }
  });
}
