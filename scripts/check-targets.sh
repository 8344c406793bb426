#!/usr/bin/env bash
# Every target in package.json's napi.targets compiles (npm run lint runs this).
#   scripts/check-targets.sh           clippy (-D warnings) for each target, and
#                                      a real musl link with `napi build -x`
#   scripts/check-targets.sh --quick   clippy only
# rustup adds the targets' standard libraries; zig and cargo-zigbuild (the
# musl linker napi-rs uses) install from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false; [ "${1:-}" = "--quick" ] && quick=true
targets=$(node -p "require('./package.json').napi.targets.join(' ')")
# Windows (full run): the same cfg(windows) code is built for real and linted
# by clippy with -D warnings as x86_64-pc-windows-gnu by scripts/wine-test.sh
# (.ci/run's Wine stage); checking it twice more would cost CI minutes, not
# coverage. --quick still checks the msvc targets.
$quick || targets=$(tr ' ' '\n' <<<"$targets" | grep -v -- '-pc-windows-msvc' | tr '\n' ' ')
# Two more are left to --quick and to the release workflow (which builds all
# eight for real): every cfg in the workspace that tells targets apart is
# target_os, target_arch (Linux only: the syscall numbers) or target_env = gnu
# (Linux only), so x86_64-apple-darwin compiles exactly the code that
# aarch64-apple-darwin does, and aarch64-unknown-linux-musl the union of
# aarch64-unknown-linux-gnu (the arch) and x86_64-unknown-linux-musl (the env,
# linked for real below). Each was a full check of every dependency for no
# line of ours left unchecked.
$quick || targets=$(tr ' ' '\n' <<<"$targets" | grep -vx -e x86_64-apple-darwin -e aarch64-unknown-linux-musl | tr '\n' ' ')
host=$(rustc -vV | sed -n 's/^host: //p')
missing=$(comm -23 <(tr ' ' '\n' <<<"$targets" | sort) <(rustup target list --installed | sort))
[ -z "$missing" ] || rustup target add $missing
linked=x86_64-unknown-linux-musl # built for real below (a build checks it)
# one cargo for every target: the build scripts and proc macros are compiled
# once, and the targets' crates interleave on the cores (separate runs left a
# core idle at each run's serial end)
flags=()
for t in $targets; do
  [ "$t" = "$host" ] && continue # the host is linted by `cargo clippy` itself
  [ "$t" = "$linked" ] && ! $quick && continue
  flags+=(--target "$t")
done
if [ ${#flags[@]} -gt 0 ]; then
  echo "== cargo clippy ${flags[*]}"
  cargo clippy --quiet --workspace "${flags[@]}" -- -D warnings
fi
$quick && exit 0

# musl for real: a shared object linked by zig against musl
if ! command -v cargo-zigbuild >/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check ziglang cargo-zigbuild
fi
out=target/musl-link
echo "== napi build -x --target $linked"
# no debug info: this build proves the link, nothing reads its symbols
CARGO_PROFILE_DEV_DEBUG=0 npx napi build --platform -x --target "$linked" --output-dir "$out" >/dev/null
file="$out/exec-native.linux-x64-musl.node"
readelf -d "$file" | grep -q 'NEEDED.*libc.so' || { echo "$file is not linked against musl" >&2; exit 1; }
echo "linked: $file ($(du -h "$file" | cut -f1))"
