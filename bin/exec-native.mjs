#!/usr/bin/env node
// exec-native CLI: run code with the same core as the addon.
//   exec-native -l python -e 'print(6*7)'
//   exec-native -l bash script.sh --timeout 5000 --json
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)

const USAGE = `usage: exec-native [-l LANGUAGE] (-e CODE | FILE | -) [options]
       exec-native serve [--listen ws://127.0.0.1:PORT] [--allow-remote]
       exec-native mcp [-C DIR] [--shell bash|powershell|cmd] [--stateful] [--sandbox[=MODE]]
                       [--writable DIR] [--network]
                                  MCP server over stdio (tools bash, exec_command,
                                  write_stdin, execute_code); the sandbox flags hold
                                  for every call, which cannot widen them; with
                                  --stateful, cd/export/functions carry over between
                                  bash calls (default: a fresh bash -c per call);
                                  --shell powershell runs the commands with pwsh (else
                                  powershell) -NoProfile -NonInteractive -Command
                                  (default bash; it fails at start when neither exists);
                                  --shell cmd runs them with Windows' cmd.exe /d /s /c

Runs CODE (or the contents of FILE, or stdin with -) as a fresh process and
exits with its exit code (124 on timeout).

  -l, --language LANG   bash | javascript | typescript | python | powershell | cmd
                        (default: from the file extension, else bash)
  -e, --eval CODE       the code to run
  -C, --cwd DIR         working directory (default: the current one)
  -t, --timeout MS      timeout in milliseconds, 0 = none (default 30000)
  --max-output BYTES    bytes kept per stream, head + tail (default 1048576)
  --sandbox[=MODE]      run in the OS sandbox (Linux: Landlock + seccomp); MODE is
                        workspace-write (default: cwd, /tmp writable) or read-only
  --writable DIR        one more writable directory in the sandbox (repeatable)
  --network             let the sandboxed code use the network
  --json                print the structured result as JSON instead of the output
  -h, --help            this text`

const EXT = { '.py': 'python', '.js': 'javascript', '.cjs': 'javascript', '.mjs': 'javascript', '.ts': 'typescript', '.mts': 'typescript', '.sh': 'bash', '.bash': 'bash', '.ps1': 'powershell', '.cmd': 'cmd', '.bat': 'cmd' }

function fail(msg, code = 2) {
  process.stderr.write(`exec-native: ${msg}\n${USAGE}\n`)
  process.exit(code)
}

function parse(argv) {
  const o = { language: undefined, code: undefined, file: undefined, cwd: undefined, timeout: undefined, maxOutput: undefined, json: false, sandbox: undefined, writable: [], network: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => {
      if (i + 1 >= argv.length) fail(`${a} needs a value`)
      return argv[++i]
    }
    const num = (v) => {
      const n = Number(v)
      if (!Number.isFinite(n) || n < 0) fail(`${a} needs a non-negative number, got '${v}'`)
      return n
    }
    switch (a) {
      case '-l': case '--language': o.language = next(); break
      case '-e': case '--eval': o.code = next(); break
      case '-C': case '--cwd': o.cwd = next(); break
      case '-t': case '--timeout': o.timeout = num(next()); break
      case '--max-output': o.maxOutput = num(next()); break
      case '--json': o.json = true; break
      case '--sandbox': o.sandbox = 'workspace-write'; break
      case '--sandbox=read-only': case '--sandbox=workspace-write': o.sandbox = a.slice('--sandbox='.length); break
      case '--writable': o.writable.push(next()); break
      case '--network': o.network = true; break
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0)
      default:
        if (a.startsWith('-') && a !== '-') fail(`unknown option ${a}`)
        if (o.file !== undefined || o.code !== undefined) fail(`unexpected argument '${a}'`)
        o.file = a
    }
  }
  return o
}

async function main() {
  const argv = process.argv.slice(2)
  if (argv[0] === 'serve') {
    const { serveCommand } = await import('./serve.mjs')
    await serveCommand(argv.slice(1))
    return
  }
  if (argv[0] === 'mcp') {
    const m = { cwd: undefined, sandbox: undefined, writable: [], network: false, stateful: false, shell: 'bash' }
    const rest = argv.slice(1)
    for (let i = 0; i < rest.length; i++) {
      const a = rest[i]
      const next = () => {
        if (i + 1 >= rest.length) fail(`${a} needs a value`)
        return rest[++i]
      }
      switch (a) {
        case '-C': case '--cwd': m.cwd = next(); break
        case '--sandbox': m.sandbox = 'workspace-write'; break
        case '--sandbox=read-only': case '--sandbox=workspace-write': m.sandbox = a.slice('--sandbox='.length); break
        case '--writable': m.writable.push(next()); break
        case '--network': m.network = true; break
        case '--stateful': m.stateful = true; break
        case '--shell': m.shell = next(); if (!['bash', 'powershell', 'cmd'].includes(m.shell)) fail(`--shell must be bash, powershell or cmd, got ${m.shell}`); break
        case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0)
        default: fail(`unknown option ${a} for mcp`)
      }
    }
    if (!m.sandbox && (m.writable.length || m.network)) fail('--writable and --network need --sandbox')
    const { serveMcp, killAllProcessGroups } = require(join(here, '..', 'index.js'))
    // however Node ends, nothing is left behind (a SIGKILL too: see guard.mjs)
    const { guardAgainstSigkill } = await import('./guard.mjs')
    guardAgainstSigkill()
    process.on('exit', () => killAllProcessGroups())
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => process.exit(0))
    try {
      await serveMcp({
        cwd: m.cwd,
        sandbox: m.sandbox ? { mode: m.sandbox, writableRoots: m.writable, network: m.network } : undefined,
        dieWithParent: true,
        stateful: m.stateful,
        shell: m.shell,
      })
      process.exit(0)
    } catch (e) {
      process.stderr.write(`exec-native mcp: ${e.message}\n`)
      process.exit(2)
    }
  }
  const o = parse(argv)
  if (o.code === undefined) {
    if (o.file === undefined) fail('nothing to run: give -e CODE, a FILE, or - for stdin')
    try {
      o.code = readFileSync(o.file === '-' ? 0 : o.file, 'utf8')
    } catch (e) {
      fail(`cannot read ${o.file}: ${e.message}`)
    }
    if (!o.language && o.file !== '-') {
      const ext = o.file.slice(o.file.lastIndexOf('.'))
      o.language = EXT[ext]
    }
  }
  const { executeAndCapture } = require(join(here, '..', 'index.js'))
  if (!o.sandbox && (o.writable.length || o.network)) fail('--writable and --network need --sandbox')
  const result = await executeAndCapture(o.code, o.language ?? 'bash', {
    cwd: o.cwd,
    timeout: o.timeout,
    maxOutputBytes: o.maxOutput,
    sandbox: o.sandbox ? { mode: o.sandbox, writableRoots: o.writable, network: o.network } : undefined,
  })
  if (o.json) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  } else {
    process.stdout.write(result.stdout)
    process.stderr.write(result.stderr)
    if (result.error) process.stderr.write(`${result.error}\n`)
  }
  const code = result.exitCode
  // Windows: the process's own code (no signals, no 8-bit status), -1 only if it never ran
  process.exitCode = process.platform === 'win32' && code !== -1 ? code : code < 0 ? 127 : code > 255 ? 255 : code
}

main()
