#!/usr/bin/env bash
# Build and run scripts/probes/sandbox-steps.c (the kernel's part of a
# namespaced sandbox run, step by step; see its header). Root or a user
# allowed user namespaces. Usage: bash scripts/probes/sandbox-steps.sh [N=200]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/probes; mkdir -p "$out" /tmp/sb
gcc -O2 -w scripts/probes/sandbox-steps.c -o "$out/sandbox-steps"
"$out/sandbox-steps" "${1:-200}"
