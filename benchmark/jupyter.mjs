// The Jupyter peers of the session rows (`npm run bench`, case sessions): the
// Deno kernel (npm `deno`, a devDependency) and ipykernel, driven by
// jupyter_client (PyPI, benchmark/requirements.txt). The Python packages are
// installed into a venv under node_modules/.cache/exec-native-bench on the
// first run (again when requirements.txt changes); the kernels are driven by
// benchmark/jupyter_cells.py. When something is missing (no python3, PyPI
// unreachable, no deno binary for this platform) the peer is skipped with the
// reason, which the bench prints and records: never silently.

import { spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '..')
const require = createRequire(import.meta.url)
/** Where the venv lives (BENCH_CACHE overrides). */
export const CACHE = process.env.BENCH_CACHE ? path.resolve(process.env.BENCH_CACHE) : path.join(root, 'node_modules', '.cache', 'exec-native-bench')
const REQUIREMENTS = path.join(here, 'requirements.txt')

/** The deno binary of npm's `deno` package (its platform package), or why not. */
export function denoBinary() {
  const pkg = {
    'linux-x64': '@deno/linux-x64-glibc',
    'linux-arm64': '@deno/linux-arm64-glibc',
    'darwin-x64': '@deno/darwin-x64',
    'darwin-arm64': '@deno/darwin-arm64',
  }[`${process.platform}-${process.arch}`]
  if (!pkg) return { skip: `npm's deno has no binary for ${process.platform}-${process.arch}` }
  try {
    const bin = path.join(path.dirname(require.resolve(`${pkg}/package.json`)), 'deno')
    if (existsSync(bin)) return { bin }
    return { skip: `${pkg} is installed without its deno binary` }
  } catch {
    return { skip: `${pkg} is not installed (npm ci installs the devDependency deno with it)` }
  }
}

/** The last lines of a failed command's output, for the printed reason. */
const tail = (text, n = 3) => String(text ?? '').trim().split('\n').slice(-n).join(' | ')

/**
 * The venv's python with jupyter_client and ipykernel, installed now if
 * needed: `{ python }`, or `{ skip: reason }`.
 */
export function ensureVenv(log = console.log) {
  const venv = path.join(CACHE, 'venv')
  const python = path.join(venv, 'bin', 'python')
  const stampFile = path.join(CACHE, 'venv.stamp')
  const stamp = createHash('sha256').update(readFileSync(REQUIREMENTS)).digest('hex')
  if (existsSync(python) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return { python }
  const py3 = spawnSync('python3', ['--version'], { encoding: 'utf8' })
  if (py3.status !== 0) return { skip: 'python3 is not in PATH' }
  log(`sessions: installing ${path.relative(root, REQUIREMENTS)} into ${path.relative(root, venv)} (once)`)
  rmSync(venv, { recursive: true, force: true })
  mkdirSync(CACHE, { recursive: true })
  const mk = spawnSync('python3', ['-m', 'venv', venv], { encoding: 'utf8' })
  if (mk.status !== 0) return { skip: `python3 -m venv failed: ${tail(mk.stderr)}` }
  // a short timeout and one retry: an unreachable PyPI is reported in a minute, not in fifteen
  const pip = spawnSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--timeout', '20', '--retries', '1', '-r', REQUIREMENTS], {
    encoding: 'utf8',
    timeout: 600_000,
  })
  if (pip.status !== 0) {
    const why = pip.error ? pip.error.message : tail(pip.stderr || pip.stdout)
    return { skip: `pip could not install ${path.basename(REQUIREMENTS)} (PyPI unreachable?): ${why}` }
  }
  writeFileSync(stampFile, stamp)
  return { python }
}

/** A kernelspec dir with the Deno kernel (what `deno jupyter --install` writes). */
function kernelspecs(deno) {
  const dir = path.join(CACHE, 'jupyter')
  const spec = path.join(dir, 'kernels', 'deno')
  mkdirSync(spec, { recursive: true })
  const kernel = {
    argv: [deno, 'jupyter', '--kernel', '--conn', '{connection_file}'],
    display_name: 'Deno',
    language: 'typescript',
  }
  writeFileSync(path.join(spec, 'kernel.json'), JSON.stringify(kernel, null, 2) + '\n')
  return dir
}

/**
 * The driver of the Jupyter peers: `{ peer }` with `start(name, kernel)`,
 * `cells(name, code, n, expect)`, `rss(name)`, `stop(name)`, `close()`, and
 * `skipped`: the peers that cannot run here, with the reason; or `{ skip }`
 * when none can.
 */
export async function jupyterPeers(log = console.log) {
  const venv = ensureVenv(log)
  if (venv.skip) return { skip: venv.skip }
  const deno = denoBinary()
  const skipped = {}
  if (deno.skip) skipped.deno = deno.skip
  const env = { ...process.env, JUPYTER_PLATFORM_DIRS: '1', PYDEVD_DISABLE_FILE_VALIDATION: '1' }
  if (!deno.skip) {
    env.JUPYTER_PATH = kernelspecs(deno.bin)
    env.DENO_DIR = path.join(CACHE, 'deno')
    env.DENO_NO_UPDATE_CHECK = '1'
  }
  const child = spawn(venv.python, [path.join(here, 'jupyter_cells.py')], { env, stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]()
  let exited = null
  child.on('exit', (code, sig) => (exited = `jupyter_cells.py exited (${sig ?? code})`))
  async function ask(req) {
    if (exited) throw new Error(exited)
    child.stdin.write(JSON.stringify(req) + '\n')
    const { value, done } = await lines.next()
    if (done) throw new Error(exited ?? 'jupyter_cells.py ended')
    const r = JSON.parse(value)
    if (r.error) throw new Error(`${req.op} ${req.name}: ${r.error}`)
    return r
  }
  const peer = {
    skipped,
    start: (name, kernel) => ask({ op: 'start', name, kernel }),
    cells: (name, code, n, expect) => ask({ op: 'cells', name, code, n, expect }),
    rss: (name) => ask({ op: 'rss', name }).then((r) => r.kb),
    stop: (name) => ask({ op: 'stop', name }),
    async close() {
      child.stdin.end()
      await new Promise((r) => (exited ? r() : child.once('exit', r)))
    },
  }
  return { peer }
}
