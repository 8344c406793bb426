// Build the sandbox helper `exec-native-sandbox` (Linux) and put it beside
// the addon, where the addon looks for it (crates/exec-core/src/process/sandbox:
// `helper()`); the platform packages ship it the same way. Linked statically
// and not position-independent (no self-relocation at start-up): an exec of
// it costs ~0.4 ms less than of a dynamically linked one, and a static-pie
// costs ~0.1 ms more (docs/SANDBOX.md, "Cost").
//
//   node scripts/build-helper.mjs [--debug] [--target <triple>] [--out <dir>]
import { spawnSync } from 'node:child_process'
import { copyFileSync, chmodSync } from 'node:fs'
import { join } from 'node:path'

if (process.platform !== 'linux') {
  console.log('build-helper: the sandbox helper is Linux only; nothing to build')
  process.exit(0)
}
const argv = process.argv.slice(2)
const opt = (name) => {
  const i = argv.indexOf(name)
  return i >= 0 ? argv[i + 1] : undefined
}
const debug = argv.includes('--debug')
const target = opt('--target') ?? process.env.CARGO_BUILD_TARGET
const out = opt('--out') ?? '.'
const args = ['rustc', '-p', 'exec-native-sandbox', '--bin', 'exec-native-sandbox']
if (!debug) args.push('--release')
if (target) args.push('--target', target)
args.push('--', '-C', 'target-feature=+crt-static', '-C', 'relocation-model=static')
const r = spawnSync(process.env.CARGO ?? 'cargo', args, { stdio: 'inherit' })
if (r.status !== 0) process.exit(r.status ?? 1)
const dir = process.env.CARGO_TARGET_DIR ?? 'target'
const built = join(dir, ...(target ? [target] : []), debug ? 'debug' : 'release', 'exec-native-sandbox')
const dest = join(out, 'exec-native-sandbox')
copyFileSync(built, dest)
chmodSync(dest, 0o755)
console.log(`build-helper: ${dest}`)
