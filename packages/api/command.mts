/**
 * The agent command tool for the host, backed by the exec-native addon.
 *
 * - `runCommand(command, options)`: `bash -c` for a model: sanitized,
 *   tail-truncated output, full output offloaded to a log file, commands that
 *   outlive their timeout move to the background.
 * - `CommandRunner`: a session owning its background processes
 *   (`run`, `call`, `checkBackground`, `killBackground`, `listBackground`, `close`).
 * - `commandTool`: the model's tool definition; `runner.call(args)` dispatches its calls.
 * - `checkBackground` / `killBackground` / `listBackground`: the same on the
 *   default runner used by `runCommand`.
 * - `sanitize(text)`, `truncateTail(text, { maxLines, maxBytes })`: the pipeline's steps.
 */
import { createRequire } from 'node:module'

import type * as Native from 'exec-native'

const require = createRequire(import.meta.url)
const native: typeof Native = require('exec-native')

export type {
  AdoptedProcess,
  BackgroundCheck,
  BackgroundHandle,
  BackgroundProcessInfo,
  CommandOptions,
  CommandResult,
  CommandRunnerOptions,
  StreamsTruncation,
  TruncateOptions,
  TruncateResult,
  TruncationInfo,
  ToolCallResult,
} from 'exec-native'

export const runCommand: typeof Native.runCommand = native.runCommand
export const CommandRunner: typeof Native.CommandRunner = native.CommandRunner
export type CommandRunner = Native.CommandRunner
export const checkBackground: typeof Native.checkBackground = native.checkBackground
export const killBackground: typeof Native.killBackground = native.killBackground
export const listBackground: typeof Native.listBackground = native.listBackground
export const commandTool: typeof Native.commandTool = native.commandTool
export const serveMcp: typeof Native.serveMcp = native.serveMcp
export const sanitize: typeof Native.sanitize = native.sanitize
export const truncateTail: typeof Native.truncateTail = native.truncateTail
