#!/usr/bin/env bash
# Does Wine's ConPTY deliver a child's output? (README, Windows: why the
# terminal suite runs node.exe on a pty under Wine.) Builds
# scripts/probes/conpty.c with mingw and runs it in the Wine prefix of
# scripts/wine-setup.sh: it prints CreatePseudoConsole's result, the child's
# exit code and how many bytes the pseudo console's output pipe holds. Wine
# 8.0 (and 10.0) with this script's stdout a file or a pipe: hr=0, exit 0,
# avail 0. Run on a terminal (`script -qc 'bash scripts/probes/conpty.sh'
# /dev/null`) the output arrives: Wine gives the child the pseudo console
# only in place of console handles it would inherit.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v x86_64-w64-mingw32-gcc >/dev/null || apt-get install -y -qq gcc-mingw-w64-x86-64
out=target/probes; mkdir -p "$out"
x86_64-w64-mingw32-gcc -O1 scripts/probes/conpty.c -o "$out/conpty.exe"
WINEPREFIX="$PWD/target/wine/prefix" WINEDEBUG=-all wine "$out/conpty.exe"
