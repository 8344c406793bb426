#!/usr/bin/env bash
# Proof that the package installs and works without Rust (issue 11 §4): pack
# the root and the linux-x64-gnu platform package, install both tarballs into
# a fresh project with cargo off the PATH, and there use the addon (CJS, ESM),
# the host (`exec-native/exec` from ESM and CJS), the types (tsc, nodenext and
# bundler), the CLI and one vitest test.
# Needs a built addon (npm run build) and dist/ (npm run build:host).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/exec-native-consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
plat=linux-x64-gnu

# the platform package gets the built .node, as `napi artifacts` does in release
mkdir -p "$work/pkg"
cp -r "npm/$plat" "$work/pkg/$plat"
cp "exec-native.$plat.node" "$work/pkg/$plat/"
# and the sandbox helper beside it (scripts/build-helper.mjs)
cp exec-native-sandbox "$work/pkg/$plat/"
npm pack --silent --pack-destination "$work" "$work/pkg/$plat" >/dev/null
npm pack --silent --pack-destination "$work" . >/dev/null
ver=$(node -p "require('./package.json').version")
# the root tarball must not carry a binary of its own
if tar -tzf "$work/exec-native-$ver.tgz" | grep -q '\.node$'; then
  echo "the root package ships a .node" >&2; exit 1
fi

# the consumer: pinned TypeScript and vitest, as a user would add them
v() { node -p "require('./node_modules/$1/package.json').version"; }
ts=$(v typescript) types=$(v @types/node) vitest=$(v vitest)
mkdir "$work/app" && cd "$work/app"
cat > package.json <<JSON
{ "name": "consumer", "private": true, "type": "module",
  "devDependencies": { "typescript": "$ts", "@types/node": "$types", "vitest": "$vitest" } }
JSON
npm install --silent --no-audit --no-fund "$work/exec-native-$plat-$ver.tgz" "$work/exec-native-$ver.tgz"

# from here on there is no Rust: cargo, rustc and rustup are off the PATH
nocargo=$(mktemp -d)
for d in ${PATH//:/ }; do
  for f in "$d"/*; do
    case "$(basename "$f")" in cargo|rustc|rustup|cargo-*) ;; *) [ -e "$nocargo/$(basename "$f")" ] || ln -s "$f" "$nocargo/" 2>/dev/null || true ;; esac
  done
done
export PATH="$nocargo"
if command -v cargo >/dev/null; then echo "cargo is still on the PATH" >&2; exit 1; fi

cat > cjs.cjs <<'JS'
const assert = require('node:assert')
const { executeAndCapture } = require('exec-native')
;(async () => {
  const r = await executeAndCapture('print(6*7)', 'python', { timeout: 10000 })
  assert.strictEqual(r.stdout, '42\n')
  const host = await import('exec-native/exec')
  const c = await host.executeAndCapture({ cwd: process.cwd(), entry: 'cell.mjs', language: 'javascript' })
  assert.strictEqual(c.stdout, '2\n')
  // Node 20.19+ also loads the ESM host with require()
  const [maj, min] = process.versions.node.split('.').map(Number)
  if (maj > 20 || (maj === 20 && min >= 19)) assert.strictEqual(typeof require('exec-native/exec').node, 'function')
  console.log('cjs ok')
})().catch((e) => { console.error(e); process.exit(1) })
JS
echo 'console.log(1+1)' > cell.mjs
echo 'const n: number = 6 * 7; console.log(n)' > cell.ts
node cjs.cjs

cat > esm.mjs <<'JS'
import assert from 'node:assert'
import { executeAndCapture } from 'exec-native'
import { node, executeAndCapture as cell } from 'exec-native/exec'
import { PythonSession } from 'exec-native/session'
import { runCommand } from 'exec-native/command'
const r = await executeAndCapture('echo hi', 'bash')
assert.strictEqual(r.stdout, 'hi\n')
const c = await cell({ cwd: process.cwd(), entry: 'cell.ts', language: 'typescript' })
assert.strictEqual(c.stdout, '42\n')
const exit = await new Promise((resolve) => {
  const h = node({ cwd: process.cwd(), env: process.env, entry: 'esm-child.mjs', stdout() {}, stderr() {}, onExit: (code) => resolve(code) })
  assert.strictEqual(typeof h.pid, 'number')
})
assert.strictEqual(exit, 0)
assert.strictEqual(typeof PythonSession, 'function')
assert.strictEqual(typeof runCommand, 'function')
// the sandbox helper ships in the platform package, and is found there
const { sandboxStatus } = await import('exec-native')
assert.match(sandboxStatus().helper ?? '', /exec-native-linux-x64-gnu\/exec-native-sandbox$/)
const s = await executeAndCapture('echo x > /etc/exn-consumer || echo denied', 'bash', { sandbox: true })
assert.strictEqual(s.stdout, 'denied\n')
assert.ok(s.sandbox.applied && s.sandbox.mechanism.includes('landlock'))
console.log('esm ok')
JS
echo 'process.exit(0)' > esm-child.mjs
node esm.mjs

# types, as two kinds of consumers compile them
cat > use.mts <<'TS'
import { executeAndCapture, type CapturedExecutionResult } from 'exec-native'
import { node, tsx, spawnCall, executeCellPromise, executeAndCapture as cell } from 'exec-native/exec'
import { PythonSession } from 'exec-native/session'
import { runCommand } from 'exec-native/command'
const r: Promise<CapturedExecutionResult> = executeAndCapture('1', 'python')
const h = node({ cwd: '.', env: process.env, entry: 'a.mjs', stdout: (b: Buffer) => b.length, stderr: () => {}, onExit: (code: number | null) => code })
const pid: number | undefined = h.pid
h.kill('SIGTERM')
void [r, pid, tsx, spawnCall, executeCellPromise, cell, PythonSession, runCommand]
TS
for res in nodenext bundler; do
  mod=$([ $res = bundler ] && echo esnext || echo nodenext)
  npx tsc --noEmit --strict --target es2022 --module $mod --moduleResolution $res use.mts
  echo "tsc ok ($res)"
done

npx exec-native -l python -e 'print(6*7)' | grep -qx 42 && echo "cli ok"

cat > consumer.test.mts <<'TS'
import { expect, it } from 'vitest'
import { executeAndCapture } from 'exec-native/exec'
it('runs a cell from an installed package', async () => {
  const r = await executeAndCapture({ cwd: process.cwd(), entry: 'cell.ts', language: 'typescript' })
  expect(r).toMatchObject({ success: true, stdout: '42\n', exitCode: 0 })
})
TS
npx vitest run consumer.test.mts
echo "consumer check: ok"
