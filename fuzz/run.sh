#!/usr/bin/env bash
# Run the fuzz target for a bounded time: `fuzz/run.sh [seconds]` (default 30).
# Uses cargo-fuzz when it is installed; otherwise builds the same target with
# the coverage flags cargo-fuzz passes (no AddressSanitizer, which needs
# nightly: safe Rust does not need it to find panics and broken invariants).
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-30}"
corpus=corpus/output_pipeline
mkdir -p "$corpus"
if command -v cargo-fuzz >/dev/null 2>&1; then
  exec cargo fuzz run output_pipeline "$corpus" regressions -- -max_total_time="$secs"
fi
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
# an explicit --target keeps the flags off build scripts, as cargo-fuzz does
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --target "$host" --bin output_pipeline
"./target/$host/release/output_pipeline" "$corpus" regressions -max_total_time="$secs" -print_final_stats=1
