// What a SIGKILL of the server leaves behind, killed anyway. The server's
// `exit` handler kills its processes when Node ends in any way it sees; a
// SIGKILL it does not see. So a small watchdog, started first, holds the
// read end of a pipe whose write end only this process has: when this
// process dies, however, the read sees EOF and the watchdog kills every
// process carrying this host's mark (EXEC_NATIVE_RUN_ID=<pid>.…, which
// every child of exec-native and all their descendants inherit), twice, to
// catch a fork in flight. The direct children also get a parent-death
// signal (`dieWithParent`). Linux only (it reads /proc).
import { spawn } from 'node:child_process'

const SWEEP = `
read -r _
sweep() {
  for d in /proc/[0-9]*; do
    grep -qz "^EXEC_NATIVE_RUN_ID=$HOST_PID\\\\." "$d/environ" 2>/dev/null && kill -KILL "\${d#/proc/}" 2>/dev/null
  done
}
sweep; sleep 0.2; sweep
`

export function guardAgainstSigkill() {
  if (process.platform !== 'linux') return
  const child = spawn('/bin/sh', ['-c', SWEEP], {
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOST_PID: String(process.pid) },
  })
  child.on('error', () => {})
  // neither the watchdog nor its pipe keeps Node alive
  child.unref()
  child.stdin.on('error', () => {})
  child.stdin.unref?.()
  const handle = child.stdin._handle
  if (handle && typeof handle.unref === 'function') handle.unref()
}
