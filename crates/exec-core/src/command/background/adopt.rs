//! What a command left running (its marked processes still running after
//! `bash` exited), adopted as background jobs of the runner: named by their
//! command line, watched through `/proc` (they are not our children), and
//! signalled by their own subtree.

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
use crate::process::marks;
use crate::process::supervise::RunOutcome;
use crate::process::ProcessTree;
use nix::sys::signal::Signal;

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

fn cmdline_words(pid: i32) -> Vec<String> {
  crate::platform::cmdline(pid)
    .split(|&b| b == 0)
    .filter(|w| !w.is_empty())
    .map(|w| String::from_utf8_lossy(w).into_owned())
    .collect()
}

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

/// Whether `words` (a process's command line) is still the run's shell as
/// forked (`bash -c <command>`): a `cmd &` before its exec, or a subshell
/// `( … ) &` that never execs.
fn is_shell_fork(words: &[String], command: &str) -> bool {
  words.len() >= 3 && words[1] == "-c" && words[2] == command
}

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

/// Adopt what a command left running (`left`: its marked processes still
/// running after `bash` exited) as background jobs of the runner: one per
/// process whose parent is not among them (the server, not its workers).
/// Each job's output is the command's (shared). Returns (pid, command line).
pub(super) async fn adopt_left(
  inner: &Arc<Inner>,
  left: Vec<i32>,
  mark: &str,
  command: &str,
  capture: &SharedCapture,
  from: Inherited,
) -> Vec<(u32, String)> {
  let alive: Vec<(i32, marks::Stat)> = left
    .into_iter()
    .filter_map(|p| marks::stat(p).filter(marks::alive).map(|st| (p, st)))
    .collect();
  let pids: HashSet<i32> = alive.iter().map(|(p, _)| *p).collect();
  let mut adopted = Vec::new();
  for (pid, st) in alive.iter().filter(|(_, st)| !pids.contains(&st.ppid)) {
    let command = settled_command_line(*pid, command).await;
    let cancel = CancellationToken::new();
    let (tx, rx) = watch::channel(None);
    let proc = Arc::new(BgProc {
      pid: *pid as u32,
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
    guard(&inner.procs).insert(*pid as u32, proc);
    if inner.closed.load(Ordering::SeqCst) {
      cancel.cancel();
    }
    tokio::spawn(watch_adopted(
      *pid,
      st.start,
      mark.to_owned(),
      cancel,
      tx,
      from.kill_grace,
    ));
    adopted.push((*pid as u32, command));
  }
  adopted
}

/// Whether `pid` is still the process that was adopted (not a reuse of its pid).
pub(super) fn still_alive(pid: i32, start: u64) -> bool {
  marks::stat(pid).is_some_and(|st| st.start == start && marks::alive(&st))
}

/// Signal an adopted process, its marked descendants and, if it leads one,
/// its process group: its subtree as a [`ProcessTree`] (the jobs adopted
/// from one command share its mark, and only this job's subtree is
/// signalled), in the tree's one order.
pub(super) fn signal_adopted(pid: i32, mark: &str, sig: Signal) {
  ProcessTree::subtree(pid, mark).signal(sig, true);
}

/// Watch an adopted process until it ends (polling /proc: it is not our
/// child), or kill it when `cancel` fires (SIGTERM, SIGKILL after `grace`).
async fn watch_adopted(
  pid: i32,
  start: u64,
  mark: String,
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
        if !still_alive(pid, start) {
          let _ = tx.send(Some((outcome(false, None), Instant::now())));
          return;
        }
      }
    }
  }
  let mut signal = "SIGTERM";
  if still_alive(pid, start) {
    // the tree's one graceful sequence; the process is not our child, so
    // its end is seen in /proc (bounded: 5 s after the SIGKILL)
    let gone = async {
      while still_alive(pid, start) {
        tokio::time::sleep(Duration::from_millis(10)).await;
      }
    };
    let tree = ProcessTree::subtree(pid, &mark);
    let stop = tree.stop(grace, true, gone);
    if let Ok(((), true)) | Err(_) =
      tokio::time::timeout(grace + Duration::from_secs(5), stop).await
    {
      signal = "SIGKILL";
    }
  }
  let _ = tx.send(Some((outcome(true, Some(signal)), Instant::now())));
}
