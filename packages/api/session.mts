/**
 * Persistent sessions for the notebook host, backed by the exec-native addon.
 *
 * - `PythonSession`: one long-lived `python3` whose namespace survives from
 *   cell to cell; Jupyter-like last-expression values; interrupt; restart.
 * - `NodeSession`: one long-lived `node` whose let/const/class/function
 *   declarations survive from cell to cell (and can be declared again);
 *   top-level await, imports from the cwd, TypeScript cells, rich display.
 * - `ShellSession`: one long-lived bash whose cwd, exports, aliases and
 *   functions survive from command to command; real exit codes; interrupt.
 *
 * Python and Node sessions keep their `history()`, write it as a Jupyter
 * notebook (`exportNotebook(path)`) and replay one (`importNotebook(path)`).
 *
 * Completion travels on a private control channel (a socketpair on the
 * interpreter's fd 0, moved out of the way of the code), never in-band in
 * stdout, so nothing a cell prints can fake or hide the end of a cell.
 */
import { createRequire } from 'node:module'

import type * as Native from 'exec-native'

const require = createRequire(import.meta.url)
const native: typeof Native = require('exec-native')

export const PythonSession = native.PythonSession
export type PythonSession = Native.PythonSession
export const NodeSession = native.NodeSession
export type NodeSession = Native.NodeSession
export const ShellSession = native.ShellSession
export type ShellSession = Native.ShellSession

export type {
  HistoryEntry,
  NodeCellError,
  NodeExecuteResult,
  NodeSessionOptions,
  PythonException,
  PythonExecuteResult,
  PythonSessionOptions,
  SessionException,
  SessionExecuteOptions,
  ShellExecuteResult,
  ShellSessionOptions,
} from 'exec-native'

/** A MIME bundle: `{ 'text/plain': ..., 'text/html'?: ..., 'image/png'?: <base64> }`. */
export type MimeBundle = Record<string, any>

/** Status of a session execution. */
export type SessionStatus = Native.PythonExecuteResult['status']

/**
 * Run `fn` with a session that is closed afterwards, whatever happens.
 *
 * ```ts
 * const out = await withSession(PythonSession.start(), (py) => py.execute('1 + 1'))
 * ```
 */
export async function withSession<S extends { close(): Promise<void> }, T>(
  session: Promise<S> | S,
  fn: (session: S) => Promise<T> | T,
): Promise<T> {
  const s = await session
  try {
    return await fn(s)
  } finally {
    await s.close()
  }
}
