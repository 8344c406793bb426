//! When the host process is told to stop (SIGTERM, SIGINT, SIGHUP), kill what
//! it runs before it dies. The handler chains: it SIGKILLs every tracked group
//! and every marked descendant, puts back the disposition it found (Node's own
//! handler, which resets the terminal and dies, or the default action) and
//! raises the signal again, so the host ends exactly as it would have. If the host later installs a JavaScript
//! listener (`process.on('SIGTERM')`), libuv takes the signal over and the
//! host decides; its `process.exit()` then runs the `atexit` cleanup.

use std::sync::OnceLock;

use crate::platform;
use crate::process::marks::Needle;

const SIGNALS: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

struct Saved {
  needle: Needle,
  prev: [platform::SignalAction; 3],
}

static SAVED: OnceLock<Saved> = OnceLock::new();

extern "C" fn on_signal(sig: i32) {
  let Some(saved) = SAVED.get() else { return };
  crate::process::registry::kill_all_signal_safe(&saved.needle);
  crate::process::cgroup::remove_all_signal_safe();
  crate::server::remove_token_files();
  let Some(i) = SIGNALS.iter().position(|s| *s == sig) else {
    return;
  };
  // give the signal back to whoever had it (Node's handler, or the default
  // action) exactly as it was, and deliver it again once we return
  platform::restore_and_raise(sig, &saved.prev[i]);
}

/// Install the handler once per process. Idempotent.
pub fn install() {
  if SAVED.get().is_some() {
    return;
  }
  let Some(needle) = Needle::new(&crate::process::marks::owner_prefix(None), false) else {
    return;
  };
  let prev = SIGNALS.map(platform::signal_action);
  if SAVED.set(Saved { needle, prev }).is_err() {
    return;
  }
  for (i, &sig) in SIGNALS.iter().enumerate() {
    if prev[i].is_ignore() {
      continue; // nohup'd host: keep ignoring
    }
    platform::set_signal_handler(sig, on_signal);
  }
}
