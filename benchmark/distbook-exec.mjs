// distbook's own packages/api/exec.mts (Kastalien-Research/distbook at
// d62124b, a Srcbook fork, Apache-2.0), its spawnCall and node as they are,
// with the TypeScript types removed: the baseline of the bench's "hosts" case,
// which runs the same cell through exec-native's drop-in (dist/exec.mjs).
import { spawn } from 'node:child_process'

export function spawnCall(options) {
  const { cwd, env, command, args, stdout, stderr, onExit, onError } = options
  const child = spawn(command, args, { cwd: cwd, env: env })

  child.stdout.on('data', stdout)
  child.stderr.on('data', stderr)

  child.on('error', (err) => {
    if (onError) {
      onError(err)
    } else {
      console.error(err)
    }
  })

  child.on('exit', (code, signal) => {
    onExit(code, signal)
  })

  return child
}

export function node(options) {
  const { cwd, env, entry, stdout, stderr, onExit } = options

  return spawnCall({
    command: 'node',
    cwd,
    args: [entry],
    stdout,
    stderr,
    onExit,
    env: { ...process.env, ...env },
  })
}
