//! Instructions the host spends per run of `/bin/true` (spawn, pump, wait,
//! settle), counted repeatably by callgrind in the host process only:
//!
//!   cargo build --release -p exec-core --example run_cost
//!   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/run_cost 200
//!   callgrind_annotate /tmp/cg.out | head -40
//!
//! Without valgrind it prints the wall time per run.
use exec_core::buffer::HeadTailBuffer;
use exec_core::process::supervise::{run, ProcessSpec, RunPolicy};
use exec_core::CancellationToken;

fn main() {
  let n: u32 = std::env::args()
    .nth(1)
    .and_then(|a| a.parse().ok())
    .unwrap_or(200);
  let rt = tokio::runtime::Builder::new_multi_thread()
    .worker_threads(2)
    .enable_all()
    .build()
    .expect("runtime");
  let spec = ProcessSpec::new("/bin/true");
  let policy = RunPolicy::default();
  let t0 = std::time::Instant::now();
  rt.block_on(async {
    for _ in 0..n {
      let f = run(
        &spec,
        &policy,
        HeadTailBuffer::new(1 << 20),
        HeadTailBuffer::new(1 << 20),
        &CancellationToken::new(),
      )
      .await
      .expect("run");
      assert_eq!(f.outcome.exit_code, 0);
    }
  });
  println!("{n} runs: {:?} per run", t0.elapsed() / n);
}
