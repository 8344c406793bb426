//! How long one /proc scan for a mark takes: `cargo run --release -p exec-core --example scan_cost`
fn main() {
  let n = 200;
  let procs = std::fs::read_dir("/proc")
    .map(|d| {
      d.filter(|e| {
        e.as_ref()
          .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
      })
      .count()
    })
    .unwrap_or(0);
  let t0 = std::time::Instant::now();
  for _ in 0..n {
    exec_core::process::marks::marked("1.2.3");
  }
  let per = t0.elapsed() / n;
  println!("{procs} processes: {per:?} per scan");
}
