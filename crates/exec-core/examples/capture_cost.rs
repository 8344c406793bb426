//! The capture path alone (no Node): `head -c BYTES /dev/zero` captured with
//! the default 1 MiB head+tail cap, RUNS times; prints the speed of each run.
//! For `perf record` / `perf stat` of the host's side of a big capture:
//!
//!   cargo build --release -p exec-core --example capture_cost
//!   perf record -g target/release/examples/capture_cost 1073741824 5
//!   perf report --no-children | head -60
use exec_core::buffer::HeadTailBuffer;
use exec_core::process::supervise::{run, ProcessSpec, RunPolicy};
use exec_core::CancellationToken;

fn main() {
  let mut args = std::env::args().skip(1);
  let bytes: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 30);
  let runs: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
  let rt = tokio::runtime::Builder::new_multi_thread()
    .worker_threads(2)
    .enable_all()
    .build()
    .expect("runtime");
  let spec = ProcessSpec::new("/bin/sh")
    .arg("-c")
    .arg(format!("exec head -c {bytes} /dev/zero"));
  let policy = RunPolicy::default();
  rt.block_on(async {
    for _ in 0..runs {
      let t0 = std::time::Instant::now();
      let f = run(
        &spec,
        &policy,
        HeadTailBuffer::new(1 << 20),
        HeadTailBuffer::new(1 << 20),
        &CancellationToken::new(),
      )
      .await
      .expect("run");
      let s = t0.elapsed().as_secs_f64();
      assert_eq!(f.outcome.stdout_bytes, bytes);
      println!(
        "{bytes} bytes: {s:.3} s, {:.2} GB/s",
        bytes as f64 / s / 1e9
      );
    }
  });
}
