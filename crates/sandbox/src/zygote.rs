//! The helper kept running (`exec-native-sandbox --zygote`), and how the
//! host talks to it.
//!
//! A sandboxed spawn through the helper used to pay for an `execve` of it
//! (a static binary: about 0.45 ms on the 2-core test machine, a third of
//! the full boundary's cost). The host now starts the helper once, with a
//! Unix stream socket as its stdin, and sends it each run: the command
//! line the helper would have been started with, the environment, the
//! working directory, and the run's stdio descriptors. The helper forks a
//! copy of itself (a small process: no exec, little to copy) as a *sibling*
//! of itself, `clone(CLONE_PARENT)`, so the run is the host's child as a
//! spawned helper was (the host waits for it, signals its group, and gets
//! its status the same way), and replies with its pid and pidfd. The copy
//! then does what a spawned helper does with that command line.
//!
//! The kept helper is outside every run: it never restricts itself, never
//! joins a namespace (a run opens the host's kept namespaces through
//! `/proc/<host>/fd`, out of reach from inside a user namespace), and a
//! run's domain and PID namespace keep it out of the run's reach. It ends
//! when the host's end of the socket closes (the host exited).
//!
//! A request: a [`Header`] sent with the three stdio descriptors
//! (`SCM_RIGHTS`), then `len` bytes: the working directory, the `argc`
//! arguments and the `envc` `NAME=value` strings, each NUL-terminated. The
//! reply: a [`Reply`] (the run's pid, or the negative errno of what
//! failed) sent with the run's pidfd when it started.
//!
//! **Runs made ahead.** A namespaced run spends most of its set-up on what
//! is the same for every run of the host: the fork, joining the host's kept
//! user, network and template mount namespaces, making its own mount, IPC
//! and PID namespaces, and mounting its `/proc` and `/dev/shm`. After it
//! answers a namespaced request, the kept helper makes the next such run
//! ahead of time (a *warm* run: the host's child, like every run, waiting
//! for its request), and sends the host a [`Reply`] of kind
//! [`Reply::WARM`] with its pid and pidfd, so that the host knows of it and
//! reaps it if it is never used. The next request with the same
//! namespaces (see [`WarmKey`]) is handed to it, and the reply names it. A
//! warm run made for other namespaces than a request's (the host's template
//! was made again) is killed, and the host reaps it.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Starts every header: a stray writer on the socket is not a request.
pub const MAGIC: u32 = 0x6578_7a67; // "exzg"

/// The first bytes of a request.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
  pub magic: u32,
  pub argc: u32,
  pub envc: u32,
  pub len: u32,
}

/// The reply to a request, or the news of a warm run.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reply {
  /// [`Reply::RUN`] or [`Reply::WARM`].
  pub kind: u32,
  /// The run's pid (its pidfd comes with the reply), or `-errno`.
  pub pid: i32,
}

impl Reply {
  /// The answer to a request.
  pub const RUN: u32 = 0;
  /// Not an answer: a warm run was made (its pid; its pidfd comes with it).
  pub const WARM: u32 = 1;
}

/// What a warm run joined: the identity (device and inode) of the host's
/// kept user namespace, network namespace (none with network on) and
/// template mount namespace. A request whose namespaces have the same
/// identity may be handed to it; a path alone could name another
/// namespace by then (a descriptor's number is reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarmKey {
  pub user: (u64, u64),
  pub net: Option<(u64, u64)>,
  pub template: (u64, u64),
}

/// A request, decoded.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
  pub cwd: Vec<u8>,
  pub argv: Vec<Vec<u8>>,
  pub env: Vec<Vec<u8>>,
}

/// The header and body of a request (`cwd`, `argv`, `env`: none may hold a
/// NUL byte; the caller checked).
pub fn encode(cwd: &[u8], argv: &[&[u8]], env: &[&[u8]]) -> (Header, Vec<u8>) {
  let mut body =
    Vec::with_capacity(cwd.len() + 1 + argv.iter().chain(env).map(|s| s.len() + 1).sum::<usize>());
  for s in std::iter::once(&cwd).chain(argv).chain(env) {
    body.extend_from_slice(s);
    body.push(0);
  }
  let header = Header {
    magic: MAGIC,
    argc: argv.len() as u32,
    envc: env.len() as u32,
    len: body.len() as u32,
  };
  (header, body)
}

/// The request in `body` as `header` describes it; `Err` says what is wrong.
pub fn decode(header: &Header, body: &[u8]) -> Result<Request, String> {
  if header.magic != MAGIC {
    return Err(format!("bad magic {:#x}", header.magic));
  }
  if body.len() != header.len as usize {
    return Err(format!(
      "{} bytes, the header says {}",
      body.len(),
      header.len
    ));
  }
  let want = 1 + header.argc as usize + header.envc as usize;
  let mut parts: Vec<Vec<u8>> = body.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
  // the body ends with a NUL: the split leaves an empty last part
  if parts.pop().is_none_or(|p| !p.is_empty()) || parts.len() != want {
    return Err(format!("{} strings, the header says {want}", parts.len()));
  }
  let env = parts.split_off(1 + header.argc as usize);
  let argv = parts.split_off(1);
  let cwd = parts.pop().unwrap_or_default();
  Ok(Request { cwd, argv, env })
}

/// The bytes of a plain `repr(C)` value.
fn bytes_of<T: Copy>(v: &T) -> &[u8] {
  // SAFETY: `T` is one of this module's repr(C) structs of u32/i32 fields (no padding, every
  // byte initialised); the slice borrows `v` for its lifetime.
  unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// Send `data` on `sock` with `fds` attached (`SCM_RIGHTS`), all of it.
pub fn send_with_fds(sock: RawFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
  let space = cmsg_space(fds.len());
  let mut control = vec![0u8; space];
  let mut iov = libc::iovec {
    iov_base: data.as_ptr() as *mut libc::c_void,
    iov_len: data.len(),
  };
  // SAFETY: an all-zero msghdr is a valid value; its pointers are set below.
  let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
  msg.msg_iov = &mut iov;
  msg.msg_iovlen = 1;
  if !fds.is_empty() {
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at `control`, `space` bytes, room for one header and `fds`; the macros
    // only compute addresses inside it.
    unsafe {
      let cmsg = libc::CMSG_FIRSTHDR(&msg);
      (*cmsg).cmsg_level = libc::SOL_SOCKET;
      (*cmsg).cmsg_type = libc::SCM_RIGHTS;
      (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
      std::ptr::copy_nonoverlapping(
        fds.as_ptr(),
        libc::CMSG_DATA(cmsg).cast::<RawFd>(),
        fds.len(),
      );
    }
  }
  let n = loop {
    // SAFETY: `msg` and what it points at (`iov` over `data`, `control`) are live for the call.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
      break n;
    }
  };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  // the descriptors went with the first byte; the rest is plain data
  write_all(sock, &data[n as usize..])
}

fn cmsg_space(fds: usize) -> usize {
  // SAFETY: CMSG_SPACE is arithmetic on its argument.
  unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// Write all of `data` to `fd`.
pub fn write_all(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
  while !data.is_empty() {
    // SAFETY: `data` is a live slice; send(2) reads only its bytes.
    let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
      let e = io::Error::last_os_error();
      if e.kind() == io::ErrorKind::Interrupted {
        continue;
      }
      return Err(e);
    }
    data = &data[n as usize..];
  }
  Ok(())
}

/// Fill `buf` from `fd`, collecting up to `max_fds` descriptors sent with
/// it (close-on-exec). `Ok(None)`: the other end closed before a byte came.
pub fn recv_with_fds(
  fd: RawFd,
  buf: &mut [u8],
  max_fds: usize,
) -> io::Result<Option<Vec<OwnedFd>>> {
  recv_with_fds_flags(fd, buf, max_fds, 0)
}

/// [`recv_with_fds`] with `recvmsg` flags (`MSG_DONTWAIT`: an error of
/// kind `WouldBlock` when nothing is there).
fn recv_with_fds_flags(
  fd: RawFd,
  buf: &mut [u8],
  max_fds: usize,
  flags: libc::c_int,
) -> io::Result<Option<Vec<OwnedFd>>> {
  let space = cmsg_space(max_fds);
  let mut control = vec![0u8; space];
  let mut got = 0;
  let mut fds = Vec::new();
  while got < buf.len() {
    let mut iov = libc::iovec {
      iov_base: buf[got..].as_mut_ptr().cast(),
      iov_len: buf.len() - got,
    };
    // SAFETY: an all-zero msghdr is a valid value; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` and what it points at (`iov` into `buf`, `control`) are live for the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC | flags) };
    if n < 0 {
      let e = io::Error::last_os_error();
      if e.kind() == io::ErrorKind::Interrupted {
        continue;
      }
      return Err(e);
    }
    // SAFETY: the kernel filled `control` up to msg_controllen; the macros walk only that.
    unsafe {
      let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
      while !cmsg.is_null() {
        if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
          let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
          let count =
            ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
          for i in 0..count {
            fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
          }
        }
        cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
      }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
      return Err(io::Error::other("more descriptors than expected"));
    }
    if n == 0 {
      if got == 0 && fds.is_empty() {
        return Ok(None);
      }
      return Err(io::ErrorKind::UnexpectedEof.into());
    }
    got += n as usize;
  }
  Ok(Some(fds))
}

/// Send a header (with `fds`) and then `body`.
pub fn send_request(sock: RawFd, header: &Header, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
  send_with_fds(sock, bytes_of(header), fds)?;
  write_all(sock, body)
}

/// Send a reply (with the pidfd, when there is one).
pub fn send_reply(sock: RawFd, reply: &Reply, pidfd: Option<RawFd>) -> io::Result<()> {
  send_with_fds(sock, bytes_of(reply), pidfd.as_slice())
}

/// Read a header and the descriptors sent with it. `Ok(None)`: the socket
/// was closed.
pub fn recv_header(sock: RawFd) -> io::Result<Option<(Header, Vec<OwnedFd>)>> {
  let mut h = Header::default();
  // SAFETY: Header is repr(C) of u32s: any bytes are a valid value; the slice borrows `h`.
  let buf = unsafe {
    std::slice::from_raw_parts_mut(
      (&mut h as *mut Header).cast::<u8>(),
      std::mem::size_of::<Header>(),
    )
  };
  Ok(recv_with_fds(sock, buf, 3)?.map(|fds| (h, fds)))
}

/// Read a reply and the pidfd sent with it.
pub fn recv_reply(sock: RawFd) -> io::Result<(Reply, Option<OwnedFd>)> {
  recv_reply_flags(sock, 0)
}

/// [`recv_reply`] of what is already there: `WouldBlock` when nothing is.
pub fn try_recv_reply(sock: RawFd) -> io::Result<(Reply, Option<OwnedFd>)> {
  recv_reply_flags(sock, libc::MSG_DONTWAIT)
}

fn recv_reply_flags(sock: RawFd, flags: libc::c_int) -> io::Result<(Reply, Option<OwnedFd>)> {
  let mut r = Reply::default();
  // SAFETY: Reply is repr(C) of a u32 and an i32: any bytes are a valid value; the slice borrows
  // `r`.
  let buf = unsafe {
    std::slice::from_raw_parts_mut(
      (&mut r as *mut Reply).cast::<u8>(),
      std::mem::size_of::<Reply>(),
    )
  };
  let fds = recv_with_fds_flags(sock, buf, 1, flags)?.ok_or(io::ErrorKind::UnexpectedEof)?;
  Ok((r, fds.into_iter().next()))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_request_survives_encoding() {
    let (h, body) = encode(
      b"/tmp",
      &[b"--ns", b"--", b"/bin/true", b""],
      &[b"A=1", b"B="],
    );
    let r = decode(&h, &body).unwrap();
    assert_eq!(r.cwd, b"/tmp");
    assert_eq!(
      r.argv,
      vec![
        b"--ns".to_vec(),
        b"--".to_vec(),
        b"/bin/true".to_vec(),
        Vec::new()
      ]
    );
    assert_eq!(r.env, vec![b"A=1".to_vec(), b"B=".to_vec()]);
    let (h, body) = encode(b"/", &[], &[]);
    assert_eq!(decode(&h, &body).unwrap().argv.len(), 0);
  }

  #[test]
  fn a_bad_request_is_refused() {
    let (h, body) = encode(b"/tmp", &[b"a".as_slice()], &[]);
    assert!(decode(&Header { magic: 1, ..h }, &body)
      .unwrap_err()
      .contains("magic"));
    assert!(decode(&Header { argc: 2, ..h }, &body)
      .unwrap_err()
      .contains("strings"));
    assert!(decode(&h, &body[..body.len() - 1]).is_err());
  }

  #[test]
  fn news_of_a_warm_run_comes_before_the_reply_and_a_try_does_not_wait() {
    use std::os::fd::AsRawFd;
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    let err = try_recv_reply(b.as_raw_fd()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    let warm = Reply {
      kind: Reply::WARM,
      pid: 41,
    };
    let null = std::fs::File::open("/dev/null").unwrap();
    send_reply(a.as_raw_fd(), &warm, Some(null.as_raw_fd())).unwrap();
    let run = Reply {
      kind: Reply::RUN,
      pid: -libc::ENOENT,
    };
    send_reply(a.as_raw_fd(), &run, None).unwrap();
    let (got, fd) = try_recv_reply(b.as_raw_fd()).unwrap();
    assert_eq!((got, fd.is_some()), (warm, true));
    let (got, fd) = recv_reply(b.as_raw_fd()).unwrap();
    assert_eq!((got, fd.is_none()), (run, true));
    drop(a);
    assert!(recv_reply(b.as_raw_fd()).is_err());
  }

  #[test]
  fn descriptors_travel_with_the_header() {
    let mut sv = [0; 2];
    // SAFETY: `sv` is a live [i32; 2] for socketpair(2) to fill.
    let made = unsafe {
      libc::socketpair(
        libc::AF_UNIX,
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
        0,
        sv.as_mut_ptr(),
      )
    };
    assert_eq!(made, 0);
    // SAFETY: both descriptors were just made and are owned here.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    use std::os::fd::AsRawFd;
    let (h, body) = encode(b"/", &[b"x".as_slice(); 3], &[b"Y=2".as_slice()]);
    let big = vec![b'z'; 300_000];
    let body2 = [body.clone(), big].concat();
    let h2 = Header {
      len: body2.len() as u32,
      ..h
    };
    let writer = std::thread::spawn(move || {
      send_request(a.as_raw_fd(), &h2, &body2, &[0, 1, 2]).unwrap();
      a
    });
    let (got, fds) = recv_header(b.as_raw_fd()).unwrap().unwrap();
    assert_eq!(got, h2);
    assert_eq!(fds.len(), 3);
    let mut rest = vec![0u8; got.len as usize];
    assert_eq!(
      recv_with_fds(b.as_raw_fd(), &mut rest, 0)
        .unwrap()
        .unwrap()
        .len(),
      0
    );
    assert_eq!(&rest[..body.len()], &body[..]);
    let a = writer.join().unwrap();
    drop(a);
    assert!(recv_header(b.as_raw_fd()).unwrap().is_none());
  }
}
