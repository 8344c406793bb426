//! What the child's restriction costs, timed in forked children (minimum
//! and median of N, in microseconds): preparing it in the host, applying it
//! in the child, and installing the seccomp program alone.
//!   cargo run --release -p exec-native-sandbox --example restrict_cost [N]
#[cfg(target_os = "linux")]
fn main() {
  use exec_native_sandbox::{filter, restrict::Prepared};
  use std::time::Instant;
  let n: usize = std::env::args()
    .nth(1)
    .and_then(|s| s.parse().ok())
    .unwrap_or(200);
  let writable = vec!["/tmp".into(), "/dev/null".into()];
  let prog = filter::program(false);
  // time `f` in a forked child
  let in_child = |f: &dyn Fn()| -> f64 {
    let mut pipe = [0i32; 2];
    // SAFETY: `pipe` is a live [i32; 2] for pipe(2) to write the two descriptors into.
    unsafe { libc::pipe(pipe.as_mut_ptr()) };
    // SAFETY: the example is single-threaded, so the forked child may run Rust code (it times `f`
    // and writes the result).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
      let t = Instant::now();
      f();
      let us = t.elapsed().as_secs_f64() * 1e6;
      // SAFETY: `us` is a live f64 on this stack: 8 readable bytes; `pipe[1]` is the write end this
      // process opened.
      unsafe { libc::write(pipe[1], (&us as *const f64).cast(), 8) };
      // SAFETY: _exit ends the child without unwinding or running the parent's atexit handlers.
      unsafe { libc::_exit(0) };
    }
    let mut us = 0f64;
    // SAFETY: `us` is a live f64: 8 writable bytes; `pipe[0]` is the read end this process opened.
    unsafe { libc::read(pipe[0], (&mut us as *mut f64).cast(), 8) };
    // SAFETY: `pid` is the child forked above (a null status pointer is allowed); the two
    // descriptors were opened by pipe() above, are owned here and closed once.
    unsafe {
      libc::waitpid(pid, std::ptr::null_mut(), 0);
      libc::close(pipe[0]);
      libc::close(pipe[1]);
    }
    us
  };
  let (mut prep, mut apply, mut seccomp) = (Vec::new(), Vec::new(), Vec::new());
  for _ in 0..n {
    let t = Instant::now();
    let p = Prepared::new(false, &writable).unwrap();
    prep.push(t.elapsed().as_secs_f64() * 1e6);
    apply.push(in_child(&|| p.apply().unwrap()));
    seccomp.push(in_child(&|| {
      // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes plain integers; it runs in the forked child only.
      unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
      filter::install(&prog).unwrap()
    }));
  }
  let stat = |v: &mut Vec<f64>| {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("min {:.0} us, median {:.0} us", v[0], v[v.len() / 2])
  };
  println!("prepare (host): {}", stat(&mut prep));
  println!("apply (child): {}", stat(&mut apply));
  println!(
    "the seccomp program alone ({} instructions): {}",
    prog.len(),
    stat(&mut seccomp)
  );
}
#[cfg(not(target_os = "linux"))]
fn main() {}
