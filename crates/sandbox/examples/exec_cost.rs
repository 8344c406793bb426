//! What a restricted child costs once it execs: fork, the steps of the
//! restriction, `execve("/bin/true")` and the wait, timed in the parent
//! (minimum and median of N interleaved rounds, in microseconds).
//!   cargo run --release -p exec-native-sandbox --example exec_cost [N]
#[cfg(target_os = "linux")]
fn main() {
  use exec_native_sandbox::{filter, restrict::Prepared};
  use std::time::Instant;
  let n: usize = std::env::args()
    .nth(1)
    .and_then(|s| s.parse().ok())
    .unwrap_or(300);
  let writable = vec!["/tmp".into(), "/dev/null".into()];
  let p = Prepared::new(false, &writable).unwrap();
  let prog = filter::program(false);
  let path = c"/bin/true";
  let argv = [path.as_ptr(), std::ptr::null()];
  let envp = [c"PATH=/usr/bin:/bin".as_ptr(), std::ptr::null()];
  // time fork + `f` + exec + wait
  let run = |f: &dyn Fn()| -> f64 {
    let t = Instant::now();
    // SAFETY: the example is single-threaded, so the forked child may run Rust code before its exec.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
      f();
      // SAFETY: argv and envp are NULL-terminated arrays of live C strings.
      unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
      // SAFETY: _exit ends the child without unwinding.
      unsafe { libc::_exit(127) };
    }
    let mut status = 0;
    // SAFETY: `pid` is the child forked above; `status` is a live i32.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(status, 0, "the child failed");
    t.elapsed().as_secs_f64() * 1e6
  };
  let nnp = || {
    // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes plain integers; it runs in the forked child only.
    unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
  };
  type Row<'a> = (&'static str, Box<dyn Fn() + 'a>);
  let rows: Vec<Row> = vec![
    ("plain", Box::new(|| {})),
    ("no_new_privs", Box::new(nnp)),
    (
      "no_new_privs + seccomp",
      Box::new(move || {
        nnp();
        filter::install(&prog).unwrap()
      }),
    ),
    ("the whole restriction", Box::new(|| p.apply().unwrap())),
  ];
  let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
  for _ in 0..20 {
    for (_, f) in &rows {
      run(f.as_ref());
    }
  }
  for i in 0..n {
    for k in 0..rows.len() {
      let k = if i % 2 == 0 { k } else { rows.len() - 1 - k };
      times[k].push(run(rows[k].1.as_ref()));
    }
  }
  for ((name, _), v) in rows.iter().zip(times.iter_mut()) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
      "{name:<24} min {:>5.0} us  p25 {:>5.0}  median {:>5.0}",
      v[0],
      v[v.len() / 4],
      v[v.len() / 2]
    );
  }
}
#[cfg(not(target_os = "linux"))]
fn main() {}
