import { readdirSync, readFileSync } from 'node:fs'

/** Whether `pid` is a running process. A zombie (dead, not yet reaped by its
 * parent; this sandbox's PID 1 does not reap orphans) counts as dead. */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
    return state !== 'Z' && state !== 'X'
  } catch {
    return false
  }
}

/** Wait until none of `pids` runs, or `ms` passed; returns those still running. */
export async function waitGone(pids: number[], ms = 3000): Promise<number[]> {
  const end = Date.now() + ms
  while (Date.now() < end && pids.some(isRunning)) await new Promise((r) => setTimeout(r, 20))
  return pids.filter(isRunning)
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Host pids of the processes whose command line is exactly `argv`
 * (a sandboxed child sees only its own PID namespace, so tests find its
 * processes from the host by a unique command line). */
export function hostPidsOf(argv: string[]): number[] {
  const want = argv.join('\0') + '\0'
  const out: number[] = []
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8') === want) out.push(Number(d))
    } catch {}
  }
  return out
}
