//! The WebSocket listener's token when none is given: 32 random bytes from
//! the system, written to a file only the user can read, removed when the
//! server ends.
//!
//! - POSIX: `$XDG_RUNTIME_DIR/exec-native/serve-<port>.token`, else
//!   `<tmpdir>/exec-native-<uid>/serve-<port>.token`; the directory is 0700,
//!   the file 0600. The host's exit paths remove it (`atexit` and the signal
//!   handler of `hostguard`, where only `unlink` may be called).
//! - Windows: `%TEMP%\exec-native\serve-<port>.token`. There are no mode
//!   bits: what keeps other users out is the access list the file inherits
//!   from the user's temporary directory (`%LOCALAPPDATA%\Temp`, in the
//!   user's profile: the user, SYSTEM and the Administrators). The binding
//!   removes it at `process.on('exit')`; a `TerminateProcess` of the server
//!   leaves it (its listener is gone with the server, and the next server on
//!   that port replaces it).

use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, ExecError};

/// A random token of 32 bytes from the system's random source, hex-encoded.
pub fn random_token() -> Result<String, ExecError> {
  let mut bytes = [0u8; 32];
  getrandom::fill(&mut bytes).map_err(|e| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot read the system's random source: {e}"),
    )
  })?;
  Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the token files go (see the module's documentation).
fn token_dir() -> PathBuf {
  #[cfg(unix)]
  {
    match std::env::var_os("XDG_RUNTIME_DIR") {
      Some(d) if !d.is_empty() => PathBuf::from(d).join("exec-native"),
      _ => std::env::temp_dir().join(format!("exec-native-{}", crate::platform::uid())),
    }
  }
  // the user's own temporary directory already: no user in the name
  #[cfg(windows)]
  std::env::temp_dir().join("exec-native")
}

/// Write `token` to a file only the user can read,
/// `<token_dir>/serve-<port>.token`, and remember it for the exit paths.
pub fn write_token_file(token: &str, port: u16) -> Result<PathBuf, ExecError> {
  let dir = token_dir();
  let io = |e: std::io::Error| {
    ExecError::new(
      ErrorCode::EIO,
      format!("cannot write the token file in {}: {e}", dir.display()),
    )
  };
  let path = dir.join(format!("serve-{port}.token"));
  let _ = std::fs::remove_file(&path);
  let mut f = create_private(&dir, &path).map_err(io)?;
  std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes()).map_err(io)?;
  remember_token_file(&path);
  Ok(path)
}

/// The directory (0700) and a new file in it (0600).
#[cfg(unix)]
fn create_private(dir: &Path, path: &Path) -> std::io::Result<std::fs::File> {
  use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
  std::fs::DirBuilder::new()
    .recursive(true)
    .mode(0o700)
    .create(dir)?;
  std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
  std::fs::OpenOptions::new()
    .write(true)
    .create_new(true)
    .mode(0o600)
    .open(path)
}

/// The directory and a new file in it, both with the access list they
/// inherit from the user's temporary directory.
#[cfg(windows)]
fn create_private(dir: &Path, path: &Path) -> std::io::Result<std::fs::File> {
  std::fs::create_dir_all(dir)?;
  std::fs::OpenOptions::new()
    .write(true)
    .create_new(true)
    .open(path)
}

/// The token files this process wrote, as C strings made once (leaked), so
/// that the exit paths remove them with `unlink` alone: `atexit` and the
/// host's signal handler (`hostguard`), where nothing may allocate or lock.
#[cfg(unix)]
static TOKEN_FILES: [std::sync::atomic::AtomicPtr<libc::c_char>; 8] =
  [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; 8];

#[cfg(unix)]
fn remember_token_file(path: &Path) {
  use std::os::unix::ffi::OsStrExt;
  use std::sync::atomic::Ordering;
  let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
    return;
  };
  let raw = c.into_raw();
  for slot in &TOKEN_FILES {
    if slot
      .compare_exchange(
        std::ptr::null_mut(),
        raw,
        Ordering::AcqRel,
        Ordering::Acquire,
      )
      .is_ok()
    {
      return;
    }
  }
  // more than 8 listeners in one process: this one's file stays
  // SAFETY: `raw` came from `into_raw` above and was stored nowhere
  drop(unsafe { std::ffi::CString::from_raw(raw) });
}

/// Remove the token files this process wrote (at its exit: `serve`'s token
/// is the key to its listener, which is gone). Async-signal-safe.
#[cfg(unix)]
pub fn remove_token_files() {
  use std::sync::atomic::Ordering;
  for slot in &TOKEN_FILES {
    let p = slot.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
      // SAFETY: `p` came from `CString::into_raw` and is never freed (the
      // slot was emptied, so this is its only user)
      crate::platform::unlink_signal_safe(unsafe { std::ffi::CStr::from_ptr(p) });
    }
  }
}

/// The token files this process wrote (Windows has no signal handler to
/// remove them from: a lock is fine).
#[cfg(windows)]
static TOKEN_FILES: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

#[cfg(windows)]
fn remember_token_file(path: &Path) {
  let mut files = TOKEN_FILES.lock().unwrap_or_else(|e| e.into_inner());
  files.push(path.to_owned());
}

/// Remove the token files this process wrote (at its exit: `serve`'s token
/// is the key to its listener, which is gone).
#[cfg(windows)]
pub fn remove_token_files() {
  let files = std::mem::take(&mut *TOKEN_FILES.lock().unwrap_or_else(|e| e.into_inner()));
  for f in files {
    let _ = std::fs::remove_file(f);
  }
}
