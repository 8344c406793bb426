//! Windows: a run's tree is a Job Object, its graceful stop a console control
//! event, every Win32 call wrapped once here (`windows-sys`).
//!
//! - Each child is created suspended with `CREATE_NEW_PROCESS_GROUP`, put in
//!   a new job (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: when the host dies its
//!   handles close and the system ends the whole tree), then resumed, so
//!   that not even its first grandchild starts outside the job.
//! - A stop is `CTRL_BREAK_EVENT` to the child's process group (the
//!   graceful one, as SIGTERM), then `TerminateJobObject` after the grace
//!   (as SIGKILL of the group and every escapee).
//! - `limits`: `memoryBytes` is the job's memory limit (committed memory of
//!   all its processes), `maxProcesses` its active-process limit,
//!   `cpuSeconds` its user-time limit (the system ends the job at it); the
//!   job's completion port says which one was hit.

use std::ffi::c_void;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE, WAIT_TIMEOUT};
use windows_sys::Win32::System::Console::{GenerateConsoleCtrlEvent, CTRL_BREAK_EVENT};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
  CreateToolhelp32Snapshot, Process32FirstW, Process32NextW, Thread32First, Thread32Next,
  PROCESSENTRY32W, TH32CS_SNAPPROCESS, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::JobObjects::{
  AssignProcessToJobObject, CreateJobObjectW, JobObjectAssociateCompletionPortInformation,
  JobObjectBasicAccountingInformation, JobObjectBasicProcessIdList,
  JobObjectExtendedLimitInformation, QueryInformationJobObject, SetInformationJobObject,
  TerminateJobObject, JOBOBJECT_ASSOCIATE_COMPLETION_PORT, JOBOBJECT_BASIC_ACCOUNTING_INFORMATION,
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
  JOB_OBJECT_LIMIT_JOB_MEMORY, JOB_OBJECT_LIMIT_JOB_TIME, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
};
use windows_sys::Win32::System::SystemServices::{
  JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT, JOB_OBJECT_MSG_END_OF_JOB_TIME,
  JOB_OBJECT_MSG_JOB_MEMORY_LIMIT, JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT,
};
use windows_sys::Win32::System::Threading::{
  OpenProcess, OpenThread, ResumeThread, TerminateProcess, WaitForSingleObject,
  PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, PROCESS_TERMINATE, THREAD_SUSPEND_RESUME,
};
use windows_sys::Win32::System::IO::{CreateIoCompletionPort, GetQueuedCompletionStatus};

pub use windows_sys::Win32::System::Threading::{CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED};

/// What the system offers an OS sandbox: nothing on Windows yet.
pub fn sandbox_support() -> super::SandboxSupport {
  super::SandboxSupport::default()
}

/// The file of the DLL (the `.node`) this code was loaded from.
pub fn this_library() -> Option<std::path::PathBuf> {
  use std::os::windows::ffi::OsStringExt;
  use windows_sys::Win32::System::LibraryLoader::{
    GetModuleFileNameW, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
    GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
  };
  let mut module = std::ptr::null_mut();
  let flags = GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT;
  // SAFETY: an address of ours names the module; no reference is taken
  if unsafe { GetModuleHandleExW(flags, this_library as *const () as *const u16, &mut module) } == 0
  {
    return None;
  }
  let mut buf = vec![0u16; 32768];
  // SAFETY: the buffer's length is passed; the module is loaded (it is us)
  let n = unsafe { GetModuleFileNameW(module, buf.as_mut_ptr(), buf.len() as u32) } as usize;
  (n > 0 && n < buf.len())
    .then(|| std::path::PathBuf::from(std::ffi::OsString::from_wide(&buf[..n])))
}

/// An owned kernel handle, closed on drop.
struct Handle(HANDLE);

// SAFETY: a kernel handle may be used and closed from any thread
unsafe impl Send for Handle {}
// SAFETY: the calls made on it (query, terminate) are thread-safe in the kernel
unsafe impl Sync for Handle {}

impl Drop for Handle {
  fn drop(&mut self) {
    // SAFETY: the handle is ours and closed once
    unsafe { CloseHandle(self.0) };
  }
}

/// The limits a job enforces (`None`: no such limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLimits {
  pub memory_bytes: Option<u64>,
  pub max_processes: Option<u64>,
  pub cpu_seconds: Option<u64>,
}

/// Which limit a job reported hitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobLimitHit {
  Memory,
  Processes,
  Cpu,
}

/// A Job Object holding one run's tree. Dropping it closes the handle, which
/// (`KILL_ON_JOB_CLOSE`) ends whatever still runs in it.
pub struct Job {
  job: Handle,
  /// The completion port the job reports limit violations to (only with limits).
  port: Option<Handle>,
}

fn last_error() -> std::io::Error {
  std::io::Error::last_os_error()
}

impl Job {
  /// A new job that ends its processes when its last handle closes, with `limits`.
  pub fn new(limits: JobLimits) -> std::io::Result<Job> {
    // SAFETY: no name, default security: a fresh anonymous job
    let h = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if h.is_null() {
      return Err(last_error());
    }
    let job = Job {
      job: Handle(h),
      port: None,
    };
    let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    let basic = &mut info.BasicLimitInformation;
    basic.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if let Some(m) = limits.memory_bytes {
      basic.LimitFlags |= JOB_OBJECT_LIMIT_JOB_MEMORY;
      info.JobMemoryLimit = usize::try_from(m).unwrap_or(usize::MAX);
    }
    let basic = &mut info.BasicLimitInformation;
    if let Some(p) = limits.max_processes {
      basic.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
      basic.ActiveProcessLimit = u32::try_from(p).unwrap_or(u32::MAX);
    }
    if let Some(s) = limits.cpu_seconds {
      basic.LimitFlags |= JOB_OBJECT_LIMIT_JOB_TIME;
      // 100 ns units
      basic.PerJobUserTimeLimit = i64::try_from(s.saturating_mul(10_000_000)).unwrap_or(i64::MAX);
    }
    // SAFETY: the struct is the size the class names, and lives for the call
    let ok = unsafe {
      SetInformationJobObject(
        job.job.0,
        JobObjectExtendedLimitInformation,
        &info as *const _ as *const c_void,
        std::mem::size_of_val(&info) as u32,
      )
    };
    if ok == 0 {
      return Err(last_error());
    }
    if limits == JobLimits::default() {
      return Ok(job);
    }
    // SAFETY: a new port, no file: the job posts its messages to it
    let port = unsafe { CreateIoCompletionPort(INVALID_HANDLE_VALUE, std::ptr::null_mut(), 0, 1) };
    if port.is_null() {
      return Err(last_error());
    }
    let port = Handle(port);
    let assoc = JOBOBJECT_ASSOCIATE_COMPLETION_PORT {
      CompletionKey: std::ptr::null_mut(),
      CompletionPort: port.0,
    };
    // SAFETY: as above; the port outlives the job (both are ours)
    let ok = unsafe {
      SetInformationJobObject(
        job.job.0,
        JobObjectAssociateCompletionPortInformation,
        &assoc as *const _ as *const c_void,
        std::mem::size_of_val(&assoc) as u32,
      )
    };
    if ok == 0 {
      return Err(last_error());
    }
    Ok(Job {
      port: Some(port),
      ..job
    })
  }

  /// Put the (suspended) process `process` in the job.
  pub fn assign(&self, process: *mut c_void) -> std::io::Result<()> {
    // SAFETY: `process` is the live handle of a child we just created
    if unsafe { AssignProcessToJobObject(self.job.0, process as HANDLE) } == 0 {
      return Err(last_error());
    }
    Ok(())
  }

  /// End every process of the job with `code`. False if it could not.
  pub fn terminate(&self, code: u32) -> bool {
    // SAFETY: our job handle
    unsafe { TerminateJobObject(self.job.0, code) != 0 }
  }

  /// How many processes of the job still run (0 when it cannot be asked).
  pub fn active_processes(&self) -> u32 {
    let mut info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION::default();
    // SAFETY: the struct is the class's, written by the call
    let ok = unsafe {
      QueryInformationJobObject(
        self.job.0,
        JobObjectBasicAccountingInformation,
        &mut info as *mut _ as *mut c_void,
        std::mem::size_of_val(&info) as u32,
        std::ptr::null_mut(),
      )
    };
    if ok == 0 {
      0
    } else {
      info.ActiveProcesses
    }
  }

  /// The ids of the processes of the job that still run (empty when it
  /// cannot be asked). The list's header is two `u32` counts, then one
  /// `usize` per process.
  pub fn pids(&self) -> Vec<u32> {
    // room for 1,024 processes: a command's tree, not a fork bomb's
    let mut buf = vec![0usize; 2 + 1024];
    // SAFETY: the buffer is as long as the size passed; the call writes the
    // header (assigned, listed) and `listed` ids after it
    let ok = unsafe {
      QueryInformationJobObject(
        self.job.0,
        JobObjectBasicProcessIdList,
        buf.as_mut_ptr() as *mut c_void,
        (buf.len() * std::mem::size_of::<usize>()) as u32,
        std::ptr::null_mut(),
      )
    };
    // a list too long for the buffer still fills it (ERROR_MORE_DATA)
    let listed = (buf[0] >> 32) as usize;
    if ok == 0 && listed == 0 {
      return Vec::new();
    }
    buf[1..1 + listed.min(buf.len() - 1)]
      .iter()
      .map(|&p| p as u32)
      .filter(|&p| p != 0)
      .collect()
  }

  /// The first limit the job reported hitting so far, from its port's queue.
  pub fn limit_hit(&self) -> Option<JobLimitHit> {
    let port = self.port.as_ref()?;
    let mut hit = None;
    loop {
      let mut msg = 0u32;
      let mut key = 0usize;
      let mut overlapped = std::ptr::null_mut();
      // SAFETY: polls (timeout 0) our port; the outputs are locals
      let ok = unsafe { GetQueuedCompletionStatus(port.0, &mut msg, &mut key, &mut overlapped, 0) };
      if ok == 0 {
        return hit;
      }
      let this = match msg {
        JOB_OBJECT_MSG_JOB_MEMORY_LIMIT | JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT => {
          Some(JobLimitHit::Memory)
        }
        JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT => Some(JobLimitHit::Processes),
        JOB_OBJECT_MSG_END_OF_JOB_TIME => Some(JobLimitHit::Cpu),
        _ => None,
      };
      hit = hit.or(this);
    }
  }
}

/// Resume every thread of process `pid` (created with `CREATE_SUSPENDED`:
/// its main thread). Returns how many were resumed.
pub fn resume_process(pid: u32) -> std::io::Result<usize> {
  // SAFETY: a snapshot of the system's threads, closed by `Handle`
  let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
  if snap == INVALID_HANDLE_VALUE {
    return Err(last_error());
  }
  let snap = Handle(snap);
  let mut entry = THREADENTRY32 {
    dwSize: std::mem::size_of::<THREADENTRY32>() as u32,
    ..Default::default()
  };
  let mut resumed = 0;
  // SAFETY: `entry` is sized as the API asks, filled by each call
  let mut more = unsafe { Thread32First(snap.0, &mut entry) } != 0;
  while more {
    if entry.th32OwnerProcessID == pid {
      // SAFETY: opens a thread of our suspended child, closed by `Handle`
      let t = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
      if !t.is_null() {
        let t = Handle(t);
        // SAFETY: a thread handle with the resume right
        if unsafe { ResumeThread(t.0) } != u32::MAX {
          resumed += 1;
        }
      }
    }
    // SAFETY: as for Thread32First
    more = unsafe { Thread32Next(snap.0, &mut entry) } != 0;
  }
  if resumed == 0 {
    return Err(std::io::Error::other(
      "no thread of the new process to resume",
    ));
  }
  Ok(resumed)
}

/// Read what the pipe `pipe` holds now, at most `buf.len()` bytes, without
/// waiting for more: `Ok(None)` when it is empty, `Ok(Some(0))` once every
/// writer closed it and it is empty (its EOF). `PeekNamedPipe` says how much
/// it holds; only that much is read, so the read does not wait for a writer
/// (the handle may be overlapped, as std makes its end of a child's pipe:
/// the read is then waited for on an event of its own, at once complete).
/// Anonymous pipes have no readiness on Windows: this is how a pump can
/// read "everything there is" (the catch-up barrier of a session's worker).
pub fn read_available(
  pipe: &impl std::os::windows::io::AsRawHandle,
  buf: &mut [u8],
) -> std::io::Result<Option<usize>> {
  use windows_sys::Win32::Foundation::{ERROR_BROKEN_PIPE, ERROR_IO_PENDING};
  use windows_sys::Win32::Storage::FileSystem::ReadFile;
  use windows_sys::Win32::System::Pipes::PeekNamedPipe;
  use windows_sys::Win32::System::Threading::CreateEventW;
  use windows_sys::Win32::System::IO::{GetOverlappedResult, OVERLAPPED};

  let h = pipe.as_raw_handle() as HANDLE;
  let is_eof = |e: &std::io::Error| e.raw_os_error() == Some(ERROR_BROKEN_PIPE as i32);
  let mut avail: u32 = 0;
  // SAFETY: no buffer (its size 0), only the count of available bytes is
  // written, into a local
  let ok = unsafe {
    PeekNamedPipe(
      h,
      std::ptr::null_mut(),
      0,
      std::ptr::null_mut(),
      &mut avail,
      std::ptr::null_mut(),
    )
  };
  if ok == 0 {
    let e = last_error();
    return if is_eof(&e) { Ok(Some(0)) } else { Err(e) };
  }
  if avail == 0 {
    return Ok(None);
  }
  let want = (avail as usize).min(buf.len()) as u32;
  // SAFETY: a new manual-reset event, unnamed, unsignalled
  let event = unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) };
  if event.is_null() {
    return Err(last_error());
  }
  let event = Handle(event);
  // SAFETY: OVERLAPPED is plain data; zeroed is its documented start state
  let mut ov: OVERLAPPED = unsafe { std::mem::zeroed() };
  ov.hEvent = event.0;
  let mut got: u32 = 0;
  // SAFETY: `buf` holds at least `want` bytes; `ov` and `buf` outlive the
  // read, which is waited for below before either is dropped
  let ok = unsafe { ReadFile(h, buf.as_mut_ptr(), want, &mut got, &mut ov) };
  if ok == 0 {
    let e = last_error();
    if e.raw_os_error() != Some(ERROR_IO_PENDING as i32) {
      return if is_eof(&e) { Ok(Some(0)) } else { Err(e) };
    }
    // SAFETY: the read started above on `h` with `ov`; waited for to its end
    if unsafe { GetOverlappedResult(h, &ov, &mut got, 1) } == 0 {
      let e = last_error();
      return if is_eof(&e) { Ok(Some(0)) } else { Err(e) };
    }
  }
  Ok(Some(got as usize))
}

/// Send `CTRL_BREAK_EVENT` to the process group `pid` leads (a child created
/// with `CREATE_NEW_PROCESS_GROUP`). False when the event could not be sent:
/// the host has no console, or not the child's.
pub fn ctrl_break(pid: u32) -> bool {
  // SAFETY: no memory is passed; a group id that is gone only fails
  unsafe { GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, pid) != 0 }
}

/// The exit code of a process the system ended at its job's CPU time limit
/// (`ERROR_NOT_ENOUGH_QUOTA`).
pub const CPU_LIMIT_EXIT: i32 = 1816;

/// Whether this directory can be a child's working directory (Windows has
/// no search permission apart from reading it).
pub fn can_enter(dir: &std::path::Path) -> bool {
  std::fs::read_dir(dir).is_ok()
}

/// Whether a file can be tried as a program: CreateProcess decides, by its
/// contents, not by a mode bit.
pub fn is_executable(_file: &std::path::Path) -> bool {
  true
}

/// Whether we may write `p` (not read-only; ACLs are not consulted).
pub fn is_writable(p: &std::path::Path) -> bool {
  std::fs::metadata(p).is_ok_and(|m| !m.permissions().readonly())
}

/// Whether environment variable names `a` and `b` are the same variable:
/// ignoring ASCII case (`Path` is `PATH`).
pub fn env_name_eq(a: &std::ffi::OsStr, b: &str) -> bool {
  a.to_string_lossy().eq_ignore_ascii_case(b)
}

/// A path given without its extension, as Windows finds it: `dir\npm` is
/// `dir\npm.cmd` when only that exists (`PATHEXT`'s order). When the path
/// exists as given, the path itself.
pub fn with_exe_suffix(p: std::path::PathBuf) -> std::path::PathBuf {
  if p.is_file() {
    return p;
  }
  let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
  exts
    .split(';')
    .filter(|e| !e.is_empty())
    .map(|e| {
      let mut s = p.clone().into_os_string();
      s.push(e.to_ascii_lowercase());
      std::path::PathBuf::from(s)
    })
    .find(|c| c.is_file())
    .unwrap_or(p)
}

/// The `accept` errors after which a listener goes on, Winsock's forms of
/// POSIX's: out of sockets (`WSAEMFILE`) or buffers (`WSAENOBUFS`), a peer
/// gone before its accept (`WSAECONNABORTED`, `WSAECONNRESET`), an
/// interruption (`WSAEINTR`).
pub const ACCEPT_RETRY: [i32; 5] = [10024, 10055, 10053, 10054, 10004];

/// One process of the system: its id, its parent's, its image's file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcEntry {
  pub pid: u32,
  pub ppid: u32,
  pub exe: String,
}

/// Every process of the system (a Toolhelp snapshot; empty when it fails).
pub fn process_table() -> Vec<ProcEntry> {
  // SAFETY: a snapshot of the system's processes, closed by `Handle`
  let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) };
  if snap == INVALID_HANDLE_VALUE {
    return Vec::new();
  }
  let snap = Handle(snap);
  // SAFETY: a plain struct of integers and an array, all zero is valid
  let mut entry: PROCESSENTRY32W = unsafe { std::mem::zeroed() };
  entry.dwSize = std::mem::size_of::<PROCESSENTRY32W>() as u32;
  let mut out = Vec::new();
  // SAFETY: `entry` is sized as the API asks, filled by each call
  let mut more = unsafe { Process32FirstW(snap.0, &mut entry) } != 0;
  while more {
    let name = &entry.szExeFile;
    let len = name.iter().position(|&c| c == 0).unwrap_or(name.len());
    out.push(ProcEntry {
      pid: entry.th32ProcessID,
      ppid: entry.th32ParentProcessID,
      exe: String::from_utf16_lossy(&name[..len]),
    });
    // SAFETY: as above
    more = unsafe { Process32NextW(snap.0, &mut entry) } != 0;
  }
  out
}

/// A handle to a process that is not our child (what a command left
/// running): while it is held, the process's id is not reused.
pub struct ProcHandle(Handle);

impl ProcHandle {
  /// Open `pid` to wait for it and end it (`None`: gone, or not ours to open).
  pub fn open(pid: u32) -> Option<ProcHandle> {
    let access = PROCESS_SYNCHRONIZE | PROCESS_TERMINATE | PROCESS_QUERY_LIMITED_INFORMATION;
    // SAFETY: opens a process by id; the handle is closed by `Handle`
    let h = unsafe { OpenProcess(access, 0, pid) };
    (!h.is_null()).then(|| ProcHandle(Handle(h)))
  }

  /// Whether it still runs.
  pub fn alive(&self) -> bool {
    // SAFETY: our handle; a zero timeout only polls
    unsafe { WaitForSingleObject(self.0 .0, 0) == WAIT_TIMEOUT }
  }

  /// End it with `code` (`TerminateProcess`). False if it could not.
  pub fn terminate(&self, code: u32) -> bool {
    // SAFETY: our handle, opened with PROCESS_TERMINATE
    unsafe { TerminateProcess(self.0 .0, code) != 0 }
  }
}

/// Windows has no way to tell that a process waits for its input: a prompt
/// is not detected (the answer then waits its whole yield time), as on macOS.
pub fn awaiting_input(_pid: i32) -> bool {
  false
}
