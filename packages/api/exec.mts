/**
 * The notebook host's execution module, backed by the exec-native addon.
 *
 * Two families of calls live here:
 *
 * - The seed's positional forms: `executeAndCapture(code, language, options)`
 *   (buffered), `spawnCall(command, args, options, onStdout, onStderr)`
 *   (streaming, resolves at the end), `node/tsx/python/bash(code, cwd, env,
 *   onStdout, onStderr, timeout?)`.
 * - A drop-in for distbook's `packages/api/exec.mts`: the object forms
 *   `spawnCall({ ... })`, `node({ ... })`, `tsx({ ... })`, `npmInstall`, `vite`
 *   return a ChildProcess-compatible handle at once; `executeCellPromise` and
 *   `executeAndCapture({ cwd, entry, language })` resolve with the output.
 *
 * Every type comes from the binding (`index.d.ts`); only the request shapes of
 * distbook's calls are declared here.
 */
import type { ChildProcess } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import Path from 'node:path'
import { Writable } from 'node:stream'

import type * as Native from 'exec-native'

const require = createRequire(import.meta.url)
const native: typeof Native = require('exec-native')

export type Language = 'typescript' | 'javascript' | 'python' | 'bash'
export type ExecutionOptions = Native.ExecuteOptions
export type CapturedExecutionResult = Native.CapturedExecutionResult
export type CallOptions = Native.SpawnOptions
export type SpawnResult = Native.SpawnResult
export type SubprocessOptions = Native.SubprocessOptions

// ---------------------------------------------------------------------------
// The ChildProcess-compatible handle
// ---------------------------------------------------------------------------

/** An error as Node's `'error'` event carries it: `code` says why. */
export interface ExecErrorLike extends Error {
  code?: string
}

type ExitListener = (code: number | null, signal: NodeJS.Signals | null) => void

/**
 * What the object forms return, typed as Node's `ChildProcess` so that
 * distbook's callers (`processes.mts` stores a `ChildProcess`) compile
 * unchanged: an EventEmitter with `pid`, `killed`, `exitCode`, `signalCode`,
 * `kill()`, `stdin` (a Writable with `stdin: 'pipe'`, else null) and the
 * events `'spawn'`, `'exit'`, `'close'`, `'error'`, backed by a native
 * `Subprocess`. `stdout`/`stderr` are null: output goes to the callbacks.
 * `kill()` stops the whole tree the command started (its process group and
 * every marked descendant; SIGTERM, then SIGKILL). Unlike Node's, `'exit'`
 * comes after every byte of output was delivered to the callbacks. `exited`
 * is the addon's result.
 */
export type ExecChild = ChildProcess & { readonly exited: Promise<SpawnResult> }

class ExecChildProcess extends EventEmitter {
  readonly #proc: Native.Subprocess
  readonly pid: number | undefined
  exitCode: number | null = null
  signalCode: NodeJS.Signals | null = null
  readonly exited: Promise<SpawnResult>
  readonly stdin: Writable | null
  readonly stdout = null
  readonly stderr = null
  readonly stdio: [Writable | null, null, null, undefined, undefined]
  readonly connected = false
  readonly spawnfile: string
  readonly spawnargs: string[]

  constructor(proc: Native.Subprocess, command: string, args: string[], error: Promise<ExecErrorLike | null>) {
    super()
    this.#proc = proc
    this.pid = proc.pid
    this.exited = proc.exited
    this.spawnfile = command
    this.spawnargs = [command, ...args]
    this.stdin = proc.stdin ? stdinWritable(proc.stdin) : null
    this.stdio = [this.stdin, null, null, undefined, undefined]
    if (this.pid !== undefined) process.nextTick(() => this.emit('spawn'))
    void Promise.all([proc.exited, error]).then(([r, err]) => {
      if (err) {
        // as Node: 'error', then 'close' with the negative errno, no 'exit'
        this.exitCode = err.code === 'ENOENT' ? -2 : -1
        this.emit('error', err)
        this.emit('close', this.exitCode, null)
        return
      }
      const signal = (r.signal as NodeJS.Signals | null) ?? null
      this.signalCode = signal
      this.exitCode = signal ? null : r.exitCode
      this.emit('exit', this.exitCode, this.signalCode)
      this.emit('close', this.exitCode, this.signalCode)
    })
  }

  /** Whether `kill()` sent a signal. */
  get killed(): boolean {
    return this.#proc.killed
  }

  /**
   * Signal the whole tree. `'SIGTERM'` (default) and `'SIGKILL'` end it, with
   * SIGKILL after the grace period; other signals are delivered as they are.
   * Returns whether a signal was sent.
   */
  kill(signal: NodeJS.Signals | number = 'SIGTERM'): boolean {
    return this.#proc.kill(signal)
  }

  ref(): void {}
  unref(): void {}
  disconnect(): void {}
}

function stdinWritable(stdin: Native.SubprocessStdin): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      stdin.write(chunk).then(() => done(), done)
    },
    final(done) {
      stdin.end().then(() => done(), done)
    },
  })
}

/** Start `command` with the addon's `spawn` and wrap the handle. */
export function spawnChild(command: string, args: string[], options: SubprocessOptions = {}): ExecChild {
  let reportError!: (e: ExecErrorLike | null) => void
  const error = new Promise<ExecErrorLike | null>((resolve) => (reportError = resolve))
  const userOnError = options.onError
  const proc = native.spawn(command, args, {
    ...options,
    onError: (err) => {
      reportError(err)
      userOnError?.(err)
    },
  })
  void proc.exited.then(() => reportError(null))
  return new ExecChildProcess(proc, command, args, error) as unknown as ExecChild
}

// ---------------------------------------------------------------------------
// distbook's request shapes
// ---------------------------------------------------------------------------

export type BaseExecRequestType = {
  cwd: string
  stdout: (data: Buffer) => void
  stderr: (data: Buffer) => void
  onExit: ExitListener
  onError?: (err: ExecErrorLike) => void
}

export type NodeRequestType = BaseExecRequestType & {
  env: NodeJS.ProcessEnv
  entry: string
}

export type NPMInstallRequestType = BaseExecRequestType & {
  packages?: Array<string>
  args?: Array<string>
}

export type NpxRequestType = BaseExecRequestType & {
  args: Array<string>
}

export type SpawnCallRequestType = {
  cwd: string
  env: NodeJS.ProcessEnv
  command: string
  args: Array<string>
  stdout: (data: Buffer) => void
  stderr: (data: Buffer) => void
  onExit: ExitListener
  onError?: (err: ExecErrorLike) => void
}

export type ExecuteCellPromiseOptions = {
  cwd: string
  env: NodeJS.ProcessEnv
  entry: string
  /** 'node' or 'tsx' */
  command: string
}

export interface ExecuteAndCaptureRequest {
  cwd: string
  entry: string
  language: 'javascript' | 'typescript'
  env?: NodeJS.ProcessEnv
  /** @default 30000 */
  timeoutMs?: number
  /** Bytes kept per stream (head + tail). @default 1048576 */
  maxOutputBytes?: number
}

/** What distbook's MCP `cell_execute` reads, plus the addon's own fields. */
export type ExecutionResult = CapturedExecutionResult & {
  stdout: string
  stderr: string
}

// ---------------------------------------------------------------------------
// spawnCall
// ---------------------------------------------------------------------------

function spawnRequest(req: SpawnCallRequestType): ExecChild {
  const { cwd, env, command, args, stdout, stderr, onExit, onError } = req
  const child = spawnChild(command, args ?? [], {
    cwd,
    // as Node's spawn: `env` is the whole environment when given
    ...(env ? { env: env as Record<string, string>, extendEnv: false } : {}),
    encoding: 'buffer',
    onStdout: stdout,
    onStderr: stderr,
  })
  child.on('error', (err) => {
    if (onError) onError(err)
    else console.error(err)
  })
  child.on('exit', (code, signal) => onExit?.(code, signal))
  return child
}

/** Object form (distbook): start `command` and return its handle at once. */
export function spawnCall(options: SpawnCallRequestType): ExecChild
/** Positional form: run a command (PATH lookup, no shell), stream its output, resolve at the end. */
export function spawnCall(
  command: string,
  args: string[],
  options: CallOptions,
  onStdout: (data: string) => void,
  onStderr: (data: string) => void,
): Promise<SpawnResult>
export function spawnCall(
  commandOrRequest: string | SpawnCallRequestType,
  args?: string[],
  options?: CallOptions,
  onStdout?: (data: string) => void,
  onStderr?: (data: string) => void,
): ExecChild | Promise<SpawnResult> {
  if (typeof commandOrRequest === 'object' && commandOrRequest !== null) {
    return spawnRequest(commandOrRequest)
  }
  return native.spawnCall(commandOrRequest, args ?? [], options, onStdout, onStderr)
}

// ---------------------------------------------------------------------------
// node / tsx / python / bash
// ---------------------------------------------------------------------------

/**
 * `<cwd>/node_modules/.bin/<name>`: on Windows npm's `<name>.cmd` shim (the
 * file without extension is a shell script Windows cannot start; the addon
 * runs a `.cmd` through cmd.exe with its arguments quoted, refusing any it
 * cannot quote safely).
 */
function binCommand(cwd: string, name: string): string {
  return Path.join(cwd, 'node_modules', '.bin', process.platform === 'win32' ? `${name}.cmd` : name)
}

/** tsx for `cwd`: the project's own, else the one shipped with exec-native. */
export function tsxCommand(cwd: string): { command: string; args: string[] } {
  const local = binCommand(cwd, 'tsx')
  if (existsSync(local)) return { command: local, args: [] }
  return { command: process.execPath, args: [require.resolve('tsx/cli')] }
}

function runEntry(req: NodeRequestType, command: string, pre: string[]): ExecChild {
  return spawnRequest({
    ...req,
    command,
    args: [...pre, req.entry],
    env: { ...process.env, ...req.env },
  })
}

function streamCode(language: Language) {
  return (
    code: string,
    cwd: string,
    env: NodeJS.ProcessEnv | undefined,
    onStdout: (data: string) => void,
    onStderr: (data: string) => void,
    timeout?: number,
  ): Promise<SpawnResult> =>
    native.executeStreaming(
      code,
      language,
      { cwd, env: env as Record<string, string> | undefined, timeout },
      onStdout,
      onStderr,
    )
}

/** `node` and `tsx`: an entry file (distbook's object form) or code (the seed's positional form). */
export interface EntryOrCodeRunner {
  /** Object form (distbook): run `entry`; returns the handle at once. */
  (options: NodeRequestType): ExecChild
  /** Positional form: run code, streaming its output; resolves at the end. */
  (
    code: string,
    cwd: string,
    env: NodeJS.ProcessEnv | undefined,
    onStdout: (data: string) => void,
    onStderr: (data: string) => void,
    timeout?: number,
  ): Promise<SpawnResult>
}

function entryOrCode(language: Language, runner: (cwd: string) => { command: string; args: string[] }) {
  const code = streamCode(language)
  return ((first: string | NodeRequestType, ...rest: Parameters<typeof code> extends [string, ...infer R] ? R : never) => {
    if (typeof first === 'object' && first !== null) {
      const { command, args } = runner(first.cwd)
      return runEntry(first, command, args)
    }
    return code(first, ...rest)
  }) as EntryOrCodeRunner
}

/** Run JavaScript with node: `node({ cwd, env, entry, stdout, stderr, onExit })` or `node(code, cwd, env, onStdout, onStderr, timeout?)`. */
export const node = entryOrCode('javascript', () => ({ command: process.execPath, args: [] }))
/**
 * Run TypeScript: `tsx({ cwd, env, entry, ... })` runs `entry` with
 * `<cwd>/node_modules/.bin/tsx`, or the tsx shipped with exec-native when the
 * project has none; `tsx(code, cwd, ...)` strips the types (or uses tsx).
 */
export const tsx = entryOrCode('typescript', tsxCommand)

/** Run Python with python3, streaming its output. */
export const python = streamCode('python')
/** Run a bash script, streaming its output. */
export const bash = streamCode('bash')

/** `npm install --include=dev [args] [packages]` in `cwd`. */
export function npmInstall(options: NPMInstallRequestType): ExecChild {
  const args = ['install', '--include=dev', ...(options.args ?? []), ...(options.packages ?? [])]
  return spawnRequest({ ...options, command: 'npm', args, env: process.env })
}

/** `<cwd>/node_modules/.bin/vite [args]`. */
export function vite(options: NpxRequestType): ExecChild {
  return spawnRequest({
    ...options,
    command: binCommand(options.cwd, 'vite'),
    env: process.env,
  })
}

/**
 * Run a cell's file with `node` or `tsx` and resolve with all its output and
 * its exit code (1 when it could not start or died by a signal).
 */
export function executeCellPromise(
  options: ExecuteCellPromiseOptions,
): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  return new Promise((resolve) => {
    const out: Buffer[] = []
    const err: Buffer[] = []
    const text = (b: Buffer[]) => Buffer.concat(b).toString('utf8')
    const req: NodeRequestType = {
      cwd: options.cwd,
      env: options.env,
      entry: options.entry,
      stdout: (d) => out.push(d),
      stderr: (d) => err.push(d),
      onExit: (code) => resolve({ stdout: text(out), stderr: text(err), exitCode: code ?? 1 }),
      onError: (e) => resolve({ stdout: text(out), stderr: text(err) + '\n' + e.message, exitCode: 1 }),
    }
    if (options.command === 'tsx') tsx(req)
    else if (options.command === 'node') node(req)
    else spawnRequest({ ...req, command: options.command, args: [options.entry] })
  })
}

// ---------------------------------------------------------------------------
// executeAndCapture
// ---------------------------------------------------------------------------

function captureEntry(req: ExecuteAndCaptureRequest): Promise<ExecutionResult> {
  const { cwd, entry, language, env, timeoutMs, maxOutputBytes } = req
  const { command, args } =
    language === 'typescript' ? tsxCommand(cwd) : { command: process.execPath, args: [] as string[] }
  return native.captureCall(command, [...args, entry], {
    cwd,
    env: env as Record<string, string> | undefined,
    timeout: timeoutMs,
    maxOutputBytes,
  }) as Promise<ExecutionResult>
}

/**
 * Object form (distbook's MCP `cell_execute`): run the file `entry` and resolve
 * with its output, head + tail kept with the `[Output truncated]` marker.
 */
export function executeAndCapture(options: ExecuteAndCaptureRequest): Promise<ExecutionResult>
/** Positional form: run code and resolve with its whole (capped) output. Never rejects for a failed run. */
export function executeAndCapture(
  code: string,
  language: Language,
  options?: ExecutionOptions,
): Promise<CapturedExecutionResult>
export function executeAndCapture(
  codeOrRequest: string | ExecuteAndCaptureRequest,
  language?: Language,
  options: ExecutionOptions = {},
): Promise<CapturedExecutionResult> {
  if (typeof codeOrRequest === 'object' && codeOrRequest !== null) {
    return captureEntry(codeOrRequest)
  }
  return native.executeAndCapture(codeOrRequest, language as Language, options)
}
