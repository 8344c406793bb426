//! ConPTY: a pseudo console, the child created on it, its resize and close.
//! Every Win32 call of a Windows terminal is here.
//!
//! - The three ConPTY calls are looked up at run time (`kernel32.dll`): they
//!   came with Windows 10 1809, and a static import of them would stop the
//!   whole addon from loading on an older system, where a terminal is
//!   `ENOTSUP` instead.
//! - The console reads its input from one pipe and writes what its screen
//!   shows (text and VT sequences) to another. Its output pipe reaches its
//!   EOF only once the console is closed ([`PseudoConsole::close`]), not
//!   when the child exits: the owner closes it after the exit.
//! - How the child gets the console's handles ([`spawn_on_console`]): when
//!   the host's own standard handles are all console handles, the child is
//!   created without `STARTF_USESTDHANDLES` (Microsoft's sample), and
//!   inherits none of the host's. When the host's are redirected (a file, a
//!   pipe: a server's usual case), they would be inherited and the child
//!   would write there instead, so it is given `STARTF_USESTDHANDLES` with
//!   invalid handles, which Windows replaces with the console's (what
//!   wezterm's `portable-pty` does). Wine honours only the first form: its
//!   tests run the host on a terminal.

use std::ffi::{c_void, OsStr, OsString};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use windows_sys::Win32::Foundation::{HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0};
use windows_sys::Win32::System::Console::{
  GetConsoleMode, GetStdHandle, COORD, HPCON, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
use windows_sys::Win32::System::Pipes::CreatePipe;
use windows_sys::Win32::System::Threading::{
  CreateProcessW, DeleteProcThreadAttributeList, GetExitCodeProcess,
  InitializeProcThreadAttributeList, ResumeThread, UpdateProcThreadAttribute, WaitForSingleObject,
  CREATE_SUSPENDED, CREATE_UNICODE_ENVIRONMENT, EXTENDED_STARTUPINFO_PRESENT, INFINITE,
  PROCESS_INFORMATION, PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, STARTF_USESTDHANDLES, STARTUPINFOEXW,
};

type CreateFn = unsafe extern "system" fn(COORD, HANDLE, HANDLE, u32, *mut HPCON) -> i32;
type ResizeFn = unsafe extern "system" fn(HPCON, COORD) -> i32;
type CloseFn = unsafe extern "system" fn(HPCON);

struct Api {
  create: CreateFn,
  resize: ResizeFn,
  close: CloseFn,
}

/// The ConPTY calls, when this system has them.
fn api() -> Option<&'static Api> {
  static API: OnceLock<Option<Api>> = OnceLock::new();
  API
    .get_or_init(|| {
      let name: Vec<u16> = "kernel32.dll\0".encode_utf16().collect();
      // SAFETY: kernel32 is loaded in every process; the names are
      // NUL-terminated, and each symbol found has the documented signature
      unsafe {
        let k = GetModuleHandleW(name.as_ptr());
        if k.is_null() {
          return None;
        }
        let create = GetProcAddress(k, c"CreatePseudoConsole".as_ptr().cast())?;
        let resize = GetProcAddress(k, c"ResizePseudoConsole".as_ptr().cast())?;
        let close = GetProcAddress(k, c"ClosePseudoConsole".as_ptr().cast())?;
        Some(Api {
          create: std::mem::transmute::<unsafe extern "system" fn() -> isize, CreateFn>(create),
          resize: std::mem::transmute::<unsafe extern "system" fn() -> isize, ResizeFn>(resize),
          close: std::mem::transmute::<unsafe extern "system" fn() -> isize, CloseFn>(close),
        })
      }
    })
    .as_ref()
}

/// Whether this system has ConPTY (Windows 10 1809 or later).
pub fn conpty_available() -> bool {
  api().is_some()
}

fn coord(rows: u16, cols: u16) -> COORD {
  COORD {
    X: cols.min(i16::MAX as u16) as i16,
    Y: rows.min(i16::MAX as u16) as i16,
  }
}

/// `E_NOTIMPL`.
const E_NOTIMPL: i32 = 0x8000_4001_u32 as i32;

fn hresult_error(what: &str, hr: i32) -> std::io::Error {
  std::io::Error::other(format!("{what} failed (HRESULT 0x{:08x})", hr as u32))
}

/// A pseudo console. Closed once, by [`PseudoConsole::close`] or on drop.
pub struct PseudoConsole {
  /// The console (0 once closed).
  hpc: Mutex<HPCON>,
}

/// A new pseudo console and the host's ends of its two pipes.
pub struct ConsoleParts {
  pub console: PseudoConsole,
  /// What is written here is typed into the console.
  pub input: OwnedHandle,
  /// What the console shows is read from here (EOF once it is closed).
  pub output: OwnedHandle,
}

fn pipe() -> std::io::Result<(OwnedHandle, OwnedHandle)> {
  let (mut r, mut w): (HANDLE, HANDLE) = (std::ptr::null_mut(), std::ptr::null_mut());
  // SAFETY: two out-pointers; the handles are owned at once
  if unsafe { CreatePipe(&mut r, &mut w, std::ptr::null(), 0) } == 0 {
    return Err(std::io::Error::last_os_error());
  }
  // SAFETY: fresh handles, owned by nothing else
  Ok(unsafe {
    (
      OwnedHandle::from_raw_handle(r),
      OwnedHandle::from_raw_handle(w),
    )
  })
}

impl PseudoConsole {
  /// A console of `rows` x `cols` on two new pipes.
  pub fn open(rows: u16, cols: u16) -> std::io::Result<ConsoleParts> {
    let api = api().ok_or_else(|| {
      std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "this Windows has no ConPTY (it came with Windows 10 1809)",
      )
    })?;
    let (in_read, in_write) = pipe()?;
    let (out_read, out_write) = pipe()?;
    let mut hpc: HPCON = 0;
    // SAFETY: the console duplicates the pipe ends it is given (ours are
    // closed when this returns); `hpc` is an out-pointer
    let hr = unsafe {
      (api.create)(
        coord(rows, cols),
        in_read.as_raw_handle(),
        out_write.as_raw_handle(),
        0,
        &mut hpc,
      )
    };
    if hr < 0 {
      return Err(hresult_error("CreatePseudoConsole", hr));
    }
    Ok(ConsoleParts {
      console: PseudoConsole {
        hpc: Mutex::new(hpc),
      },
      input: in_write,
      output: out_read,
    })
  }

  /// Give the console a new size (its processes see the new window size).
  pub fn resize(&self, rows: u16, cols: u16) -> std::io::Result<()> {
    // held across the call: a close waits for it (the console is freed by
    // its close)
    let hpc = self.hpc.lock().unwrap_or_else(|e| e.into_inner());
    if *hpc == 0 {
      return Err(std::io::Error::other("the console is closed"));
    }
    let api = api().expect("a console was opened");
    // SAFETY: a console of ours, open while the lock is held
    let hr = unsafe { (api.resize)(*hpc, coord(rows, cols)) };
    if hr == E_NOTIMPL {
      // Wine's (a stub to this day)
      return Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "this system's ConPTY cannot resize a console (E_NOTIMPL: Wine's)",
      ));
    }
    if hr < 0 {
      return Err(hresult_error("ResizePseudoConsole", hr));
    }
    Ok(())
  }

  /// Whether it was closed.
  pub fn is_closed(&self) -> bool {
    *self.hpc.lock().unwrap_or_else(|e| e.into_inner()) == 0
  }

  /// Close the console: the processes still on it get `CTRL_CLOSE_EVENT`,
  /// and its output pipe reaches its EOF after what it still holds. May
  /// wait for that output to be read (older Windows): call it off the
  /// runtime's threads, with the output being read.
  pub fn close(&self) {
    let hpc = std::mem::take(&mut *self.hpc.lock().unwrap_or_else(|e| e.into_inner()));
    if hpc != 0 {
      let api = api().expect("a console was opened");
      // SAFETY: ours, closed once (taken out of the lock above)
      unsafe { (api.close)(hpc) };
    }
  }
}

/// Close `console` on a thread of its own ([`PseudoConsole::close`] may wait
/// for its output to be read; nothing of the caller's waits).
pub fn close_console_later(console: std::sync::Arc<PseudoConsole>) {
  if !console.is_closed() {
    std::thread::spawn(move || console.close());
  }
}

impl Drop for PseudoConsole {
  fn drop(&mut self) {
    self.close();
  }
}

/// Whether the host's standard handles are all console handles.
fn host_on_console() -> bool {
  [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE]
    .into_iter()
    .all(|which| {
      let mut mode = 0u32;
      // SAFETY: a query of the process's own standard handle
      unsafe {
        let h = GetStdHandle(which);
        !h.is_null() && h != INVALID_HANDLE_VALUE && GetConsoleMode(h, &mut mode) != 0
      }
    })
}

/// A process created suspended on a pseudo console.
pub struct ConsoleProcess {
  pub process: OwnedHandle,
  pub thread: OwnedHandle,
  pub pid: u32,
}

fn wide(s: &OsStr) -> Vec<u16> {
  s.encode_wide().chain(std::iter::once(0)).collect()
}

/// A Unicode environment block (`K=V\0...\0\0`), sorted by name as Windows
/// keeps it.
fn env_block(env: &[(OsString, OsString)]) -> Vec<u16> {
  let mut vars: Vec<&(OsString, OsString)> = env.iter().collect();
  vars.sort_by_cached_key(|(k, _)| k.to_string_lossy().to_uppercase());
  let mut block = Vec::new();
  for (k, v) in vars {
    block.extend(k.encode_wide());
    block.push(u16::from(b'='));
    block.extend(v.encode_wide());
    block.push(0);
  }
  if block.is_empty() {
    block.push(0);
  }
  block.push(0);
  block
}

/// Create `app` with `command_line` on `console`, suspended (the caller puts
/// it in its job, then [`resume`]s it), with `env`, in `cwd` (`None`: the
/// host's).
pub fn spawn_on_console(
  app: &Path,
  command_line: &OsStr,
  env: &[(OsString, OsString)],
  cwd: Option<&Path>,
  console: &PseudoConsole,
) -> std::io::Result<ConsoleProcess> {
  // held until the child is created: a close waits for it
  let guard = console.hpc.lock().unwrap_or_else(|e| e.into_inner());
  let hpc = *guard;
  if hpc == 0 {
    return Err(std::io::Error::other("the console is closed"));
  }
  let mut size = 0usize;
  // SAFETY: the first call only asks the size of a one-attribute list
  unsafe { InitializeProcThreadAttributeList(std::ptr::null_mut(), 1, 0, &mut size) };
  // u64 words: the list is pointer-aligned
  let mut list = vec![0u64; size.div_ceil(8)];
  let attrs = list.as_mut_ptr().cast::<c_void>();
  // SAFETY: `attrs` has the size asked for; deleted below
  if unsafe { InitializeProcThreadAttributeList(attrs, 1, 0, &mut size) } == 0 {
    return Err(std::io::Error::last_os_error());
  }
  struct List(*mut c_void);
  impl Drop for List {
    fn drop(&mut self) {
      // SAFETY: initialized above, deleted once
      unsafe { DeleteProcThreadAttributeList(self.0) };
    }
  }
  let _list = List(attrs);
  // SAFETY: the attribute's value is the console itself (an HPCON), as
  // documented, valid until CreateProcessW returns
  if unsafe {
    UpdateProcThreadAttribute(
      attrs,
      0,
      PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE as usize,
      hpc as *const c_void,
      std::mem::size_of::<HPCON>(),
      std::ptr::null_mut(),
      std::ptr::null(),
    )
  } == 0
  {
    return Err(std::io::Error::last_os_error());
  }
  // SAFETY: a plain-data struct, zero is its empty value
  let mut si: STARTUPINFOEXW = unsafe { std::mem::zeroed() };
  si.StartupInfo.cb = std::mem::size_of::<STARTUPINFOEXW>() as u32;
  si.lpAttributeList = attrs;
  if !host_on_console() {
    si.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
    si.StartupInfo.hStdInput = INVALID_HANDLE_VALUE;
    si.StartupInfo.hStdOutput = INVALID_HANDLE_VALUE;
    si.StartupInfo.hStdError = INVALID_HANDLE_VALUE;
  }
  let app = wide(app.as_os_str());
  let mut line = wide(command_line);
  let env = env_block(env);
  let cwd = cwd.map(|c| wide(c.as_os_str()));
  // SAFETY: a plain-data struct, filled by the call
  let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
  // SAFETY: every string is NUL-terminated and outlives the call (the
  // command line is writable, as the call requires); no handle is inherited
  let ok = unsafe {
    CreateProcessW(
      app.as_ptr(),
      line.as_mut_ptr(),
      std::ptr::null(),
      std::ptr::null(),
      0,
      EXTENDED_STARTUPINFO_PRESENT | CREATE_UNICODE_ENVIRONMENT | CREATE_SUSPENDED,
      env.as_ptr().cast(),
      cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
      &si.StartupInfo,
      &mut pi,
    )
  };
  let failed = (ok == 0).then(std::io::Error::last_os_error);
  drop(guard);
  if let Some(e) = failed {
    return Err(e);
  }
  // SAFETY: the new process's and thread's handles, ours to close
  Ok(unsafe {
    ConsoleProcess {
      process: OwnedHandle::from_raw_handle(pi.hProcess),
      thread: OwnedHandle::from_raw_handle(pi.hThread),
      pid: pi.dwProcessId,
    }
  })
}

/// Let a process created suspended run (its main thread).
pub fn resume(thread: &OwnedHandle) -> std::io::Result<()> {
  // SAFETY: a thread handle of ours with every right
  if unsafe { ResumeThread(thread.as_raw_handle()) } == u32::MAX {
    return Err(std::io::Error::last_os_error());
  }
  Ok(())
}

/// Wait for `process` to end and return its exit code. Blocks: call it on
/// a thread of its own.
pub fn wait_exit(process: &OwnedHandle) -> std::io::Result<u32> {
  // SAFETY: a process handle of ours with the synchronize right
  if unsafe { WaitForSingleObject(process.as_raw_handle(), INFINITE) } != WAIT_OBJECT_0 {
    return Err(std::io::Error::last_os_error());
  }
  let mut code = 0u32;
  // SAFETY: as above, with the query right; `code` is an out-pointer
  if unsafe { GetExitCodeProcess(process.as_raw_handle(), &mut code) } == 0 {
    return Err(std::io::Error::last_os_error());
  }
  Ok(code)
}

/// End `process` with `code` (a child that never ran outside its job).
pub fn terminate_process(process: &OwnedHandle, code: u32) {
  // SAFETY: a process handle of ours with every right
  unsafe { windows_sys::Win32::System::Threading::TerminateProcess(process.as_raw_handle(), code) };
}
