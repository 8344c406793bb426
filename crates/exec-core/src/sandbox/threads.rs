//! Spawning threads that restricted themselves once, kept for the next
//! spawn with the same sandbox.
//!
//! A Landlock domain, a seccomp filter and a dropped capability set belong
//! to a thread and cannot be undone, so a thread restricted for one policy
//! can spawn every later child of that policy: the restriction (a ruleset
//! with an `O_PATH` open per root, the filter, the capability calls) and the
//! thread's creation are paid once, not per spawn. A thread is kept per
//! (network, writable roots as they are on disk); one left idle for
//! [`IDLE`] ends, and at most [`MAX_THREADS`] are kept. A root is known by
//! its device and inode too, so a directory removed and made again at the
//! same path gets a new thread (a rule holds the old inode).
//!
//! Not for a child with a parent-death signal: that signal follows the
//! thread that spawned, which must then live exactly as long as the child
//! (see `spawn_anchored`).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::{ErrorCode, ExecError};

/// How long an unused restricted thread waits for its next spawn.
pub const IDLE: Duration = Duration::from_secs(30);
/// Most restricted threads kept at once.
pub const MAX_THREADS: usize = 8;

type Job = Box<dyn FnOnce() + Send>;

/// What a thread is restricted to: the network setting and each writable
/// root with its device and inode (0, 0 for a path that is not there).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Key {
  network: bool,
  roots: Vec<(PathBuf, u64, u64)>,
}

impl Key {
  pub fn new(network: bool, writable: &[PathBuf]) -> Key {
    let roots = writable
      .iter()
      .map(|p| {
        let (dev, ino) = std::fs::metadata(p)
          .map(|m| (m.dev(), m.ino()))
          .unwrap_or((0, 0));
        (p.clone(), dev, ino)
      })
      .collect();
    Key { network, roots }
  }
}

/// The kept threads: each one's id and the sender of its jobs. Dropping the
/// sender (an eviction) ends the thread once it has run what was sent.
type Kept = HashMap<Key, (u64, Sender<Job>)>;
static KEPT: Mutex<Option<Kept>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn with_kept<R>(f: impl FnOnce(&mut Kept) -> R) -> R {
  let mut g = KEPT.lock().unwrap_or_else(|e| e.into_inner());
  f(g.get_or_insert_with(HashMap::new))
}

/// How many restricted threads are kept now.
pub fn kept() -> usize {
  with_kept(|k| k.len())
}

/// Run `job` on a thread restricted for `key`: a kept one (the restriction
/// is in force: `job` gets `Ok`), or a new one that first calls `restrict`
/// and hands its outcome to `job`, which decides what to do without it; the
/// new thread is kept if the restriction held. A job that panics is
/// reported as an error; the thread goes on.
pub fn run<R: Send + 'static>(
  key: Key,
  restrict: impl FnOnce() -> Result<(), ExecError> + Send + 'static,
  job: impl FnOnce(Result<(), ExecError>) -> R + Send + 'static,
) -> Result<R, ExecError> {
  let (rtx, rrx) = sync_channel::<R>(1);
  let mut job = Some(job);
  // a kept thread cannot end while the lock is held: a thread leaves the
  // table (under the lock) before it runs what was sent and ends
  with_kept(|kept| {
    if let Some((_, tx)) = kept.get(&key) {
      let j = job.take().expect("not taken yet");
      let rtx = rtx.clone();
      let sent = tx.send(Box::new(move || {
        let _ = rtx.send(j(Ok(())));
      }));
      if sent.is_err() {
        // cannot happen (see above); the job is lost with the box
        kept.remove(&key);
      }
    }
  });
  if let Some(job) = job {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    std::thread::Builder::new()
      .name("exec-native-sandbox".into())
      .spawn(move || serve(key, id, restrict, job, rtx))
      .map_err(|e| {
        ExecError::new(
          ErrorCode::ESPAWN,
          format!("cannot start the sandbox thread: {e}"),
        )
      })?;
  } else {
    drop(rtx);
  }
  rrx
    .recv()
    .map_err(|_| ExecError::new(ErrorCode::ESANDBOX, "sandbox: the spawning thread panicked"))
}

/// A new restricted thread: restrict, run the first job, then (if the
/// restriction held) offer itself for the next spawns of `key` until it is
/// idle for [`IDLE`] or evicted.
fn serve<R: Send + 'static>(
  key: Key,
  id: u64,
  restrict: impl FnOnce() -> Result<(), ExecError>,
  job: impl FnOnce(Result<(), ExecError>) -> R,
  rtx: std::sync::mpsc::SyncSender<R>,
) {
  let restricted = restrict();
  let keep = restricted.is_ok();
  if let Ok(r) = catch_unwind(AssertUnwindSafe(|| job(restricted))) {
    let _ = rtx.send(r);
  }
  drop(rtx);
  if !keep {
    return; // not restricted: never reused
  }
  let (tx, rx) = channel::<Job>();
  with_kept(|kept| {
    if kept.len() >= MAX_THREADS && !kept.contains_key(&key) {
      // the table is full: one goes (its sender dropped, it ends)
      if let Some(k) = kept.keys().next().cloned() {
        kept.remove(&k);
      }
    }
    kept.insert(key.clone(), (id, tx));
  });
  loop {
    match rx.recv_timeout(IDLE) {
      Ok(j) => {
        let _ = catch_unwind(AssertUnwindSafe(j));
      }
      Err(RecvTimeoutError::Timeout) => {
        with_kept(|kept| {
          if kept.get(&key).is_some_and(|(i, _)| *i == id) {
            kept.remove(&key);
          }
        });
        // what was sent before it left the table
        while let Ok(j) = rx.try_recv() {
          let _ = catch_unwind(AssertUnwindSafe(j));
        }
        return;
      }
      Err(RecvTimeoutError::Disconnected) => return,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_thread_is_restricted_once_and_kept_per_key() {
    use std::sync::atomic::AtomicUsize;
    static RESTRICTS: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("exec-native-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = Key::new(false, std::slice::from_ref(&dir));
    // as a Landlock rule does, the restriction holds its roots open (so a
    // root removed and made again is another inode)
    let restrict = |root: PathBuf| {
      move || {
        RESTRICTS.fetch_add(1, Ordering::SeqCst);
        std::mem::forget(std::fs::File::open(&root));
        Ok(())
      }
    };
    let me = |r: Result<(), ExecError>| (r.is_ok(), std::thread::current().id());
    let (ok1, t1) = run(key.clone(), restrict(dir.clone()), me).unwrap();
    // the thread offers itself after its first job: wait for it
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while with_kept(|k| !k.contains_key(&key)) && std::time::Instant::now() < deadline {
      std::thread::sleep(Duration::from_millis(1));
    }
    let (ok2, t2) = run(key.clone(), restrict(dir.clone()), me).unwrap();
    assert!(ok1 && ok2);
    assert_eq!(t1, t2, "the same thread spawned both");
    assert_eq!(RESTRICTS.load(Ordering::SeqCst), 1, "restricted once");
    // the same path made again is another directory: another thread
    std::fs::remove_dir(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    let (_, t3) = run(
      Key::new(false, std::slice::from_ref(&dir)),
      restrict(dir.clone()),
      me,
    )
    .unwrap();
    assert_ne!(t3, t1);
    std::fs::remove_dir(&dir).unwrap();
  }

  #[test]
  fn a_failed_restriction_is_handed_to_the_job_and_not_kept() {
    let key = Key::new(true, &[PathBuf::from("/nonexistent-exec-native-root")]);
    let before = with_kept(|k| k.contains_key(&key));
    let r = run(
      key.clone(),
      || Err(ExecError::new(ErrorCode::ESANDBOX, "no")),
      |r| r.is_err(),
    )
    .unwrap();
    assert!(r);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(with_kept(|k| k.contains_key(&key)), before);
  }

  #[test]
  fn a_panicking_job_is_an_error_and_the_thread_goes_on() {
    let key = Key::new(true, &[PathBuf::from("/")]);
    let r = run(key.clone(), || Ok(()), |_| -> () { panic!("job") });
    assert_eq!(r.unwrap_err().code, ErrorCode::ESANDBOX);
    assert!(run(key, || Ok(()), |r| r.is_ok()).unwrap());
  }
}
