#!/usr/bin/env bash
# The Windows suite under Wine (issue 25; .ci/run's "Windows under Wine"
# stage): cross-build the addon for x86_64-pc-windows-gnu (debug, no debug
# info, linted by clippy on the way: the build is most of the stage), then run __test__/windows/wine.test.mjs
# with the official Windows node.exe, and __test__/windows/conpty.test.mjs on
# a terminal. Prints each part's time.
#
#   scripts/wine-test.sh             set up (scripts/wine-setup.sh), build, test
#   scripts/wine-test.sh --no-build  test the .node built last time
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash scripts/wine-setup.sh
echo "== wine setup: $((SECONDS - t0)) s"

out=target/wine/out
if [ "${1:-}" != "--no-build" ]; then
  t1=$SECONDS
  # no debug info (a 170 MB DLL otherwise, and a slower link); the
  # workspace's crates compiled by clippy-driver with -D warnings, as `cargo
  # clippy` would check them: this build is the lint of the Windows code
  # (scripts/check-targets.sh leaves the windows-msvc targets to it)
  RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)" RUSTFLAGS="-D warnings" \
  CARGO_PROFILE_DEV_DEBUG=0 npx napi build --platform --target x86_64-pc-windows-gnu \
    --output-dir "$out" --no-js >"$out.log" 2>&1 || { tail -40 "$out.log"; exit 1; }
  echo "== cross build (x86_64-pc-windows-gnu): $((SECONDS - t1)) s"
fi
addon="$out/exec-native.win32-x64-gnu.node"
[ -f "$addon" ] || { echo "no $addon" >&2; exit 1; }

t2=$SECONDS
export WINEPREFIX="$PWD/target/wine/prefix" WINEDEBUG=-all
# Wine: node.exe's stdio must be files (a Linux pipe as its stdout is EBADF),
# and Node refuses Wine's Windows version without the platform check skipped
log=target/wine/test.log
rm -f "$log"
win() { winepath -w "$1" 2>/dev/null; }
set +e
NODE_SKIP_PLATFORM_CHECK=1 EXEC_NATIVE_WINE=1 NAPI_RS_NATIVE_LIBRARY_PATH="$(win "$PWD/$addon")" \
  EXEC_NATIVE_WIN_PYTHON="$(win "$PWD/target/wine/python/python.exe")" \
  timeout 600 wine target/wine/node/node.exe --test-reporter=spec __test__/windows/wine.test.mjs \
  >"$log" 2>&1 </dev/null
rc=$?
set -e
cat "$log"
echo "== Wine suite: $((SECONDS - t2)) s (exit $rc)"

# The terminal suite (ConPTY): Wine gives a pseudo console's child the
# console only when node.exe's own stdio is a console, so node.exe runs on a
# terminal here (script(1): a pty, which Wine makes its console); the
# report goes to a file, the terminal's screen to /dev/null
t3=$SECONDS
tlog=target/wine/conpty.log
rm -f "$tlog"
set +e
NO_COLOR=1 NODE_SKIP_PLATFORM_CHECK=1 EXEC_NATIVE_WINE=1 NAPI_RS_NATIVE_LIBRARY_PATH="$(win "$PWD/$addon")" \
  timeout 300 script -qefc "wine target/wine/node/node.exe --test-reporter=spec --test-reporter-destination=$tlog __test__/windows/conpty.test.mjs" /dev/null \
  </dev/null >/dev/null 2>&1
trc=$?
set -e
cat "$tlog" 2>/dev/null || echo "no report in $tlog"
wineserver -k 2>/dev/null || true
echo "== Wine terminal suite (ConPTY, on a pty): $((SECONDS - t3)) s (exit $trc); whole stage $((SECONDS - t0)) s"
[ $rc -eq 0 ] || exit $rc
exit $trc
