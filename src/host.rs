//! The host environment: an id per Node environment (main thread or worker) so
//! that its processes can be killed when it goes away, and where the
//! interpreters shipped with the package are.

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use exec_core::{CancellationToken, Toolchain};
use napi::bindgen_prelude::*;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

thread_local! {
  static OWNER: Cell<u64> = const { Cell::new(0) };
  /// Cancelled when this thread's environment is torn down.
  static TEARDOWN: CancellationToken = CancellationToken::new();
}

/// The id of the environment running on this thread.
pub fn owner() -> u64 {
  OWNER.with(|o| o.get())
}

/// Cancelled when the environment running on this thread is torn down (a
/// worker terminated, the main thread leaving). A task on the runtime that
/// waits for JavaScript (a callback to return, a turn of its event loop)
/// must also wait for this: the calls queued to a dying environment are
/// never made, and their completions never come, so a pump waiting for them
/// would hold its pipes forever. Called on the JS thread.
pub fn teardown() -> CancellationToken {
  TEARDOWN.with(|t| t.clone())
}

/// Called once per environment when the addon is loaded into it.
pub fn init_env(env: &Env) -> Result<()> {
  let id = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
  OWNER.with(|o| o.set(id));
  // environment teardown (process exit, worker termination): kill what it runs
  env.add_env_cleanup_hook(id, |id| {
    // the waits for this environment's JavaScript end first, so that the
    // pumps of the runs killed below read on to EOF and close their pipes
    TEARDOWN.with(|t| t.cancel());
    exec_core::process::shutdown(Some(id));
  })?;
  // process.exit() on the main thread does not run env cleanup hooks, but it
  // does run exit(3), and so atexit handlers
  #[cfg(unix)]
  {
    static ATEXIT: std::sync::Once = std::sync::Once::new();
    ATEXIT.call_once(|| {
      // SAFETY: `kill_everything_at_exit` is an extern "C" fn() with no arguments, the shape
      // atexit(3) takes; it lives as long as the library, which Node never unloads, and is
      // registered once (Once).
      unsafe { libc::atexit(kill_everything_at_exit) };
      // the cgroups left by hosts that died without cleaning up (SIGKILL, abort)
      exec_core::process::cgroup::sweep_stale();
    });
  }
  crate::stream::init_env(env)?;
  // SIGTERM/SIGINT/SIGHUP of the host: kill the children, then die as before
  #[cfg(unix)]
  exec_core::hostguard::install();
  // PID 1, or EXEC_NATIVE_SUBREAPER=1: reap the orphans of our runs
  #[cfg(unix)]
  exec_core::process::reaper::init();
  // Windows needs neither: every run's Job Object ends with the host's
  // handles, however the host dies
  Ok(())
}

#[cfg(unix)]
extern "C" fn kill_everything_at_exit() {
  exec_core::process::shutdown(None);
  // `serve`'s token files: the listener they open is gone
  exec_core::server::remove_token_files();
  // the cgroups of runs with limits (emptied, removed)
  exec_core::process::cgroup::remove_all_signal_safe();
}

/// tsx's CLI, found the way Node resolves packages: upwards from the addon.
fn find_bundled_tsx() -> Option<PathBuf> {
  let start = exec_core::loaded_from()?;
  start
    .ancestors()
    .skip(1)
    .map(|d| d.join("node_modules/tsx/dist/cli.mjs"))
    .find(|p| p.is_file())
}

pub fn toolchain() -> &'static Toolchain {
  static TC: OnceLock<Toolchain> = OnceLock::new();
  TC.get_or_init(|| Toolchain {
    fallback_node: std::env::current_exe().ok(),
    bundled_tsx: find_bundled_tsx(),
  })
}
