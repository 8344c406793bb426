//! What a command left running (its marked processes still running after
//! `bash` exited; on Windows, the processes still in its Job Object),
//! adopted as background jobs of the runner: named by their command line
//! (on Windows, their image's name), watched through `/proc` (they are not
//! our children; on Windows, a handle to each), and ended by their own
//! subtree.

#[cfg(unix)]
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::jobs::BgProc;
use super::runner::{guard, Inner};
use crate::command::format::Vocabulary;
use crate::command::offload::SharedCapture;
use crate::command::truncate::OutputLimits;
use crate::command::CommandSpec;
#[cfg(unix)]
use crate::process::marks;
use crate::process::supervise::{LeftRunning, RunOutcome};
#[cfg(unix)]
use crate::process::ProcessTree;
#[cfg(unix)]
use nix::sys::signal::Signal;

#[cfg(unix)]
/// `/proc/<pid>/cmdline` as a shell would show it: one line (what follows
/// a newline is cut, `…` says so), at most 200 characters.
fn command_line(pid: i32) -> String {
  let words = cmdline_words(pid);
  let mut line = one_line(&words.join(" "), 200);
  if line.is_empty() {
    line = marks::stat(pid).map_or_else(String::new, |_| format!("[pid {pid}]"));
  }
  line
}

#[cfg(unix)]
fn cmdline_words(pid: i32) -> Vec<String> {
  crate::platform::cmdline(pid)
    .split(|&b| b == 0)
    .filter(|w| !w.is_empty())
    .map(|w| String::from_utf8_lossy(w).into_owned())
    .collect()
}

#[cfg(unix)]
/// The first line of `text`, at most `max` characters; `…` marks a cut.
fn one_line(text: &str, max: usize) -> String {
  let first = text.lines().next().unwrap_or("");
  let cut = first.len() < text.trim_end().len();
  let mut line: String = first.chars().take(max - 1).collect();
  if cut || first.chars().count() > max - 1 {
    line.push('…');
  }
  line
}

#[cfg(unix)]
/// Whether `words` (a process's command line) is still the run's shell as
/// forked (`bash -c <command>`): a `cmd &` before its exec, or a subshell
/// `( … ) &` that never execs.
fn is_shell_fork(words: &[String], command: &str) -> bool {
  words.len() >= 3 && words[1] == "-c" && words[2] == command
}

#[cfg(unix)]
/// The command line of an adopted process once it ran its `exec`: a `cmd &`
/// caught between the fork and the exec shows the shell's command line, and
/// one caught inside its `execve` shows none (the kernel gives no
/// `cmdline` until the new image's arguments are in place), so look again
/// (up to 300 ms). A subshell that never execs (`( … ) &`,
/// `while …; done &`) is named so, with what it runs.
async fn settled_command_line(pid: i32, command: &str) -> String {
  let deadline = Instant::now() + Duration::from_millis(300);
  loop {
    let words = cmdline_words(pid);
    let forked = is_shell_fork(&words, command);
    let in_exec = words.is_empty() && marks::stat(pid).is_some_and(|st| marks::alive(&st));
    if !forked && !in_exec {
      return command_line(pid);
    }
    if Instant::now() >= deadline {
      if in_exec {
        return command_line(pid);
      }
      let running = crate::platform::children_of(Some(pid))
        .into_iter()
        .map(command_line)
        .find(|c| !c.is_empty());
      return match running {
        Some(c) => format!("bash (a subshell, running: {})", one_line(&c, 120)),
        None => "bash (a subshell)".to_owned(),
      };
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
}

/// What the jobs adopted from a command take of its options: how their
/// output is shown, whose words their texts use, the grace of their kill.
#[derive(Debug, Clone, Copy)]
pub(super) struct Inherited {
  pub(super) limits: OutputLimits,
  pub(super) vocabulary: Vocabulary,
  pub(super) kill_grace: Duration,
}

impl Inherited {
  pub(super) fn of(opts: &CommandSpec) -> Self {
    Inherited {
      limits: opts.limits(),
      vocabulary: opts.vocabulary,
      kill_grace: opts.run.kill_grace,
    }
  }
}

/// Adopt what a command left running (`left.left`: its marked processes
/// still running after `bash` exited) as background jobs of the runner: one
/// per process whose parent is not among them (the server, not its workers).
/// Each job's output is the command's (shared). Returns (pid, command line).
pub(super) async fn adopt_left(
  inner: &Arc<Inner>,
  left: &mut LeftRunning,
  command: &str,
  capture: &SharedCapture,
  from: Inherited,
) -> Vec<(u32, String)> {
  let mut adopted = Vec::new();
  for (pid, command, watch) in roots(left, command).await {
    let cancel = CancellationToken::new();
    let (tx, rx) = watch::channel(None);
    let proc = Arc::new(BgProc {
      pid: pid as u32,
      command: command.clone(),
      started: SystemTime::now(),
      started_at: Instant::now(),
      capture: capture.clone(),
      limits: from.limits,
      cancel: cancel.clone(),
      done: rx,
      adopted: true,
      left: Mutex::new(Vec::new()),
      vocabulary: from.vocabulary,
    });
    guard(&inner.procs).insert(pid as u32, proc);
    if inner.closed.load(Ordering::SeqCst) {
      cancel.cancel();
    }
    tokio::spawn(watch_adopted(pid, watch, cancel, tx, from.kill_grace));
    adopted.push((pid as u32, command));
  }
  adopted
}

/// Watch an adopted process until it ends (it is not our child), or end it
/// and its subtree when `cancel` fires ([`stop`]).
async fn watch_adopted(
  pid: i32,
  watch: Watch,
  cancel: CancellationToken,
  tx: watch::Sender<Option<(RunOutcome, Instant)>>,
  grace: Duration,
) {
  let outcome = |canceled: bool, signal: Option<&str>| RunOutcome {
    pid: pid as u32,
    exit_code: -1,
    signal: signal.map(str::to_owned),
    timed_out: false,
    canceled,
    duration: Duration::ZERO,
    stdout_bytes: 0,
    stderr_bytes: 0,
    error: None,
    sandbox: None,
  };
  loop {
    tokio::select! {
      _ = cancel.cancelled() => break,
      _ = tokio::time::sleep(Duration::from_millis(100)) => {
        if !watch.alive(pid) {
          let _ = tx.send(Some((outcome(false, None), Instant::now())));
          return;
        }
      }
    }
  }
  let signal = stop(pid, &watch, grace).await;
  let _ = tx.send(Some((outcome(true, signal), Instant::now())));
}

/// How an adopted process is watched: its start time and the run's mark.
#[cfg(unix)]
struct Watch {
  start: u64,
  mark: String,
}

#[cfg(unix)]
impl Watch {
  fn alive(&self, pid: i32) -> bool {
    still_alive(pid, self.start)
  }
}

/// The processes to adopt of what was left: those whose parent is not
/// among them, with their command lines once settled.
#[cfg(unix)]
async fn roots(left: &mut LeftRunning, command: &str) -> Vec<(i32, String, Watch)> {
  let alive: Vec<(i32, marks::Stat)> = std::mem::take(&mut left.left)
    .into_iter()
    .filter_map(|p| marks::stat(p).filter(marks::alive).map(|st| (p, st)))
    .collect();
  let pids: HashSet<i32> = alive.iter().map(|(p, _)| *p).collect();
  let mut roots = Vec::new();
  for (pid, st) in alive.iter().filter(|(_, st)| !pids.contains(&st.ppid)) {
    let name = settled_command_line(*pid, command).await;
    let watch = Watch {
      start: st.start,
      mark: left.mark.clone(),
    };
    roots.push((*pid, name, watch));
  }
  roots
}

/// Whether `pid` is still the process that was adopted (not a reuse of its pid).
#[cfg(unix)]
pub(super) fn still_alive(pid: i32, start: u64) -> bool {
  marks::stat(pid).is_some_and(|st| st.start == start && marks::alive(&st))
}

/// Kill what a command left running, now (its caller gave up on it).
#[cfg(unix)]
pub(super) fn kill_left_now(left: &mut LeftRunning) {
  for p in left.left.drain(..) {
    ProcessTree::subtree(p, &left.mark).signal(Signal::SIGKILL, true);
  }
}

/// End an adopted process's subtree (its marked descendants and, if it
/// leads one, its process group: the jobs adopted from one command share
/// its mark, and only this job's subtree is signalled): the tree's one
/// graceful sequence, SIGTERM then SIGKILL after `grace`. The process is not
/// our child, so its end is seen in /proc (bounded: 5 s after the SIGKILL).
/// Returns the last signal sent.
#[cfg(unix)]
async fn stop(pid: i32, watch: &Watch, grace: Duration) -> Option<&'static str> {
  if !watch.alive(pid) {
    return Some("SIGTERM");
  }
  let gone = async {
    while watch.alive(pid) {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  };
  let tree = ProcessTree::subtree(pid, &watch.mark);
  let stop = tree.stop(grace, true, gone);
  match tokio::time::timeout(grace + Duration::from_secs(5), stop).await {
    Ok(((), true)) | Err(_) => Some("SIGKILL"),
    Ok(((), false)) => Some("SIGTERM"),
  }
}

/// How an adopted process is watched on Windows: a handle to it (its id is
/// not reused while held) and the command's job, which ends whatever still
/// runs in it when its last handle closes (so it is held while a job of
/// the runner runs there).
#[cfg(windows)]
struct Watch {
  process: crate::platform::ProcHandle,
  job: Arc<crate::platform::Job>,
}

#[cfg(windows)]
impl Watch {
  fn alive(&self, _pid: i32) -> bool {
    self.process.alive()
  }
}

/// Windows: the processes of the command's job whose parent is not among
/// them, named by their image (`ping.exe`): a command line of another
/// process is not readable there without reading its memory.
#[cfg(windows)]
async fn roots(left: &mut LeftRunning, _command: &str) -> Vec<(i32, String, Watch)> {
  let Some(job) = left.job.take() else {
    return Vec::new();
  };
  let pids: std::collections::HashSet<u32> = left.left.drain(..).map(|p| p as u32).collect();
  crate::platform::process_table()
    .into_iter()
    .filter(|e| pids.contains(&e.pid) && !pids.contains(&e.ppid))
    .filter_map(|e| {
      let process = crate::platform::ProcHandle::open(e.pid).filter(|h| h.alive())?;
      let watch = Watch {
        process,
        job: job.clone(),
      };
      Some((e.pid as i32, e.exe, watch))
    })
    .collect()
}

/// Windows: `root` and its descendants among the processes of `job`, by
/// the parents the system lists.
#[cfg(windows)]
fn subtree(job: &crate::platform::Job, root: u32) -> Vec<u32> {
  let in_job: std::collections::HashSet<u32> = job.pids().into_iter().collect();
  let table = crate::platform::process_table();
  let mut tree = vec![root];
  let mut i = 0;
  while i < tree.len() {
    let parent = tree[i];
    for e in &table {
      if e.ppid == parent && in_job.contains(&e.pid) && !tree.contains(&e.pid) {
        tree.push(e.pid);
      }
    }
    i += 1;
  }
  tree
}

/// Windows: end `pid`'s subtree in its job (`TerminateProcess`, exit code
/// 1): `pid` through the handle held since its adoption, its descendants
/// opened now.
#[cfg(windows)]
fn terminate_subtree(job: &crate::platform::Job, pid: u32, root: &crate::platform::ProcHandle) {
  let code = crate::process::registry::TERMINATED_EXIT;
  root.terminate(code);
  for p in subtree(job, pid).into_iter().filter(|&p| p != pid) {
    if let Some(h) = crate::platform::ProcHandle::open(p) {
      h.terminate(code);
    }
  }
}

/// Windows: kill what a command left running, now: its whole job.
#[cfg(windows)]
pub(super) fn kill_left_now(left: &mut LeftRunning) {
  left.left.clear();
  if let Some(job) = left.job.take() {
    job.terminate(crate::process::registry::TERMINATED_EXIT);
  }
}

/// Windows: end an adopted process and its subtree at once. There is no
/// graceful step: a console control event goes to a whole process group,
/// and the processes a command left share its shell's group (the other
/// jobs adopted from it would get it too). No signal: `None`.
#[cfg(windows)]
async fn stop(pid: i32, watch: &Watch, _grace: Duration) -> Option<&'static str> {
  terminate_subtree(&watch.job, pid as u32, &watch.process);
  let deadline = Instant::now() + Duration::from_secs(5);
  while watch.alive(pid) && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  None
}
