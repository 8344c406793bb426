//! When the host process is told to stop (SIGTERM, SIGINT, SIGHUP), kill what
//! it runs before it dies. The handler chains: it SIGKILLs every tracked group
//! and every marked descendant, puts back the disposition it found (Node's own
//! handler, which resets the terminal and dies, or the default action) and
//! raises the signal again, so the host ends exactly as it would have. If the host later installs a JavaScript
//! listener (`process.on('SIGTERM')`), libuv takes the signal over and the
//! host decides; its `process.exit()` then runs the `atexit` cleanup.

use std::sync::OnceLock;

use crate::process::marks::Needle;

const SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

struct Saved {
  needle: Needle,
  prev: [libc::sigaction; 3],
}

static SAVED: OnceLock<Saved> = OnceLock::new();

extern "C" fn on_signal(sig: i32, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
  let Some(saved) = SAVED.get() else { return };
  crate::process::registry::kill_all_signal_safe(&saved.needle);
  crate::cgroup::remove_all_signal_safe();
  let Some(i) = SIGNALS.iter().position(|s| *s == sig) else {
    return;
  };
  // give the signal back to whoever had it (Node's handler, or the default
  // action) exactly as it was, and deliver it again once we return
  unsafe {
    libc::sigaction(sig, &saved.prev[i], std::ptr::null_mut());
    libc::raise(sig);
  }
}

/// Install the handler once per process. Idempotent.
pub fn install() {
  if SAVED.get().is_some() {
    return;
  }
  let Some(needle) = Needle::new(&crate::process::marks::owner_prefix(None), false) else {
    return;
  };
  let mut prev: [libc::sigaction; 3] = unsafe { std::mem::zeroed() };
  for (i, &sig) in SIGNALS.iter().enumerate() {
    unsafe { libc::sigaction(sig, std::ptr::null(), &mut prev[i]) };
  }
  if SAVED.set(Saved { needle, prev }).is_err() {
    return;
  }
  for (i, &sig) in SIGNALS.iter().enumerate() {
    let old = &SAVED.get().unwrap().prev[i];
    if old.sa_sigaction == libc::SIG_IGN {
      continue; // nohup'd host: keep ignoring
    }
    unsafe {
      let mut act: libc::sigaction = std::mem::zeroed();
      act.sa_sigaction = on_signal as *const () as usize;
      act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
      libc::sigemptyset(&mut act.sa_mask);
      libc::sigaction(sig, &act, std::ptr::null_mut());
    }
  }
}
