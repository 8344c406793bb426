/**
 * The notebook host's execution module, backed by the exec-native addon.
 *
 * - `executeAndCapture(code, language, options)`: buffered result for MCP tools.
 * - `spawnCall(command, args, options, onStdout, onStderr)`: streaming, for the UI.
 * - `node(...)` / `tsx(...)`: run JavaScript / TypeScript code, streaming.
 */
import { createRequire } from 'node:module'

import type * as Native from '../../index.js'

const require = createRequire(import.meta.url)
const native: typeof Native = require('../../index.js')

export type Language = 'typescript' | 'javascript' | 'python' | 'bash'

export interface ExecutionOptions {
  /** Working directory; checked before spawning. @default process.cwd() */
  cwd?: string
  /** Variables over the host environment (`extendEnv: false` replaces it). */
  env?: NodeJS.ProcessEnv
  /** @default true */
  extendEnv?: boolean
  /** Timeout in ms; 0 = none. @default 30000 */
  timeout?: number
  /** Milliseconds between SIGTERM and SIGKILL. @default 500 */
  forceKillAfterDelay?: number
  /** Bytes kept per stream, head + tail. @default 1048576 */
  maxOutputBytes?: number
  /** Written to stdin; without it stdin is closed. */
  input?: string | Buffer | Uint8Array
  /** Cancels the run. */
  signal?: AbortSignal
  /** @default 'utf8' */
  encoding?: 'utf8' | 'buffer'
}

export interface CapturedExecutionResult {
  stdout: string
  stderr: string
  exitCode: number
  /** milliseconds */
  executionTime: number
  success: boolean
  timedOut: boolean
  canceled: boolean
  signal: string | null
  stdoutBytes: number
  stderrBytes: number
  truncated: boolean
  error?: string
  errorCode?: string
}

export type CallOptions = Native.SpawnOptions
export type SpawnResult = Native.SpawnResult

/** Run code and resolve with its whole (capped) output. Never rejects for a failed run. */
export async function executeAndCapture(
  code: string,
  language: Language,
  options: ExecutionOptions = {},
): Promise<CapturedExecutionResult> {
  const r = await native.executeAndCapture(code, language, options as Native.ExecuteOptions)
  return r as CapturedExecutionResult
}

/** Run a command (PATH lookup, no shell) and stream its output. */
export function spawnCall(
  command: string,
  args: string[],
  options: CallOptions,
  onStdout: (data: string) => void,
  onStderr: (data: string) => void,
): Promise<SpawnResult> {
  return native.spawnCall(command, args, options, onStdout, onStderr)
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

/** Run JavaScript with node, streaming its output. */
export const node = streamCode('javascript')
/** Run TypeScript with tsx, streaming its output. */
export const tsx = streamCode('typescript')
/** Run Python with python3, streaming its output. */
export const python = streamCode('python')
/** Run a bash script, streaming its output. */
export const bash = streamCode('bash')
