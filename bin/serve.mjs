#!/usr/bin/env node
// `exec-native serve`: the exec-server (JSON-RPC 2.0, see docs/PROTOCOL.md)
// over stdio, or over WebSocket with --listen ws://127.0.0.1:PORT.
// Runs standalone (`node bin/serve.mjs ...`) or from bin/exec-native.mjs
// through `serveCommand(args)`.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(import.meta.url)

const USAGE = `Usage: exec-native serve [options]

Serve the exec-server protocol (JSON-RPC 2.0, one JSON message per line)
over stdin/stdout, or over WebSocket with --listen.

Options:
  --listen ws://HOST:PORT      serve WebSocket connections (loopback only unless --allow-remote)
  --allow-remote               accept a non-loopback --listen address (and any Host header)
  --token-file FILE            the token clients must send (else $EXEC_NATIVE_SERVE_TOKEN, else a
                               random one, printed to stderr and written to a file only you can
                               read: mode 0600, on Windows in your %TEMP%)
  --no-auth                    no token (loopback only): any local program can connect
  --allow-origin ORIGIN        let pages of ORIGIN connect (repeatable); other Origins get 403
  --max-connections N          WebSocket connections at once (default 64)
  --ping-interval-ms N         ping period; a peer silent for two periods is dropped (default 30000)
  --handshake-timeout-ms N     time to send the handshake request (default 3000)
  --retained-output-bytes N    output kept per process (default 1048576)
  --max-processes N            processes per connection (default 64)
  --exited-retention-ms N      how long an exited process stays readable (default 30000)
  -h, --help                   show this help
`

const NUMERIC = {
  '--max-connections': 'maxConnections',
  '--ping-interval-ms': 'pingIntervalMs',
  '--handshake-timeout-ms': 'handshakeTimeoutMs',
  '--retained-output-bytes': 'retainedOutputBytes',
  '--max-processes': 'maxProcesses',
  '--exited-retention-ms': 'exitedRetentionMs',
}

export function parseServeArgs(args) {
  const opts = {}
  for (let i = 0; i < args.length; i++) {
    let arg = args[i]
    let value
    const eq = arg.indexOf('=')
    if (arg.startsWith('--') && eq > 0) {
      value = arg.slice(eq + 1)
      arg = arg.slice(0, eq)
    }
    const next = () => {
      if (value !== undefined) return value
      if (i + 1 >= args.length) throw new Error(`exec: ${arg} needs a value (EINVAL)`)
      return args[++i]
    }
    if (arg === '-h' || arg === '--help') opts.help = true
    else if (arg === '--listen') opts.listen = next()
    else if (arg === '--allow-remote') opts.allowRemote = true
    else if (arg === '--no-auth') opts.noAuth = true
    else if (arg === '--token-file') opts.tokenFile = next()
    else if (arg === '--allow-origin') (opts.allowOrigin ??= []).push(next())
    else if (arg in NUMERIC) {
      const raw = next()
      const n = Number(raw)
      if (!Number.isFinite(n) || n < 0) throw new Error(`exec: ${arg} must be a non-negative number, got '${raw}' (EINVAL)`)
      opts[NUMERIC[arg]] = n
    } else throw new Error(`exec: unknown option '${arg}' for serve (EINVAL)`)
  }
  return opts
}

/** Run `exec-native serve` with the arguments after `serve`. Never returns. */
export async function serveCommand(args) {
  let opts
  try {
    opts = parseServeArgs(args)
  } catch (e) {
    process.stderr.write(`${e.message}\n\n${USAGE}`)
    process.exit(2)
  }
  if (opts.help) {
    process.stderr.write(USAGE)
    process.exit(0)
  }
  delete opts.help
  const { serve, killAllProcessGroups } = require('../index.js')
  // however Node ends (stdin closed, a signal, an error, a SIGKILL: see
  // guard.mjs), nothing it started is left behind. Windows needs no guard:
  // every process runs in a Job Object that ends when the server's handles
  // close, however it dies (TerminateProcess included)
  const { guardAgainstSigkill } = await import('./guard.mjs')
  guardAgainstSigkill()
  process.on('exit', () => killAllProcessGroups())
  // Windows: SIGINT is Ctrl+C, SIGHUP the console closing, SIGBREAK Ctrl+Break
  // or the CTRL_BREAK_EVENT of a graceful terminate (Node's default for it
  // ends the process without its 'exit' handlers: no token file removed)
  const signals = process.platform === 'win32' ? ['SIGINT', 'SIGHUP', 'SIGBREAK'] : ['SIGINT', 'SIGTERM', 'SIGHUP']
  for (const sig of signals) process.on(sig, () => process.exit(0))
  try {
    await serve(opts)
    process.exit(0)
  } catch (e) {
    process.stderr.write(`${e.message}\n`)
    process.exit(2)
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  serveCommand(process.argv.slice(2))
}
