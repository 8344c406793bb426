// No process escapes: descendants that leave the process group (setsid,
// double fork, nohup, os.setsid) are found by their EXEC_NATIVE_RUN_ID mark.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { executeAndCapture, spawnCall } from '../index.js'
import { isRunning, sleep, waitGone } from './helpers'

const addon = join(__dirname, '..', 'index.js')

// Each escape appends the pid of the process that must not survive to $F, then
// keeps running; `settled(n)` waits until n pids are there and prints them.
const ESCAPES: Record<string, string> = {
  'setsid sleep': 'setsid sh -c \'echo $$ >> "$F"; exec sleep 1000\' </dev/null >/dev/null 2>&1 &',
  'double fork': '( (sh -c \'echo $$ >> "$F"; exec sleep 1000\') & ) ',
  nohup: 'nohup sh -c \'echo $$ >> "$F"; exec sleep 1000\' >/dev/null 2>&1 &',
  'python os.setsid':
    'python3 -c \'import os, sys, time\nif os.fork(): sys.exit(0)\nos.setsid()\nopen(os.environ["F"], "a").write("%d\\n" % os.getpid())\ntime.sleep(1000)\' &',
}
const settled = (n: number) =>
  `while [ "$(wc -l < "$F" 2>/dev/null || echo 0)" -lt ${n} ]; do sleep 0.02; done; cat "$F"`
const withFile = (body: string) => `F=$(mktemp); export F\n${body}`

const pidsOf = (text: string) =>
  text
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => Number.isInteger(n) && n > 0)

describe('no process escapes', () => {
  for (const [name, script] of Object.entries(ESCAPES)) {
    it(`after a normal exit: ${name}`, async () => {
      const r = await executeAndCapture(withFile(`${script}\n${settled(1)}`), 'bash', { forceKillAfterDelay: 200 })
      const pids = pidsOf(r.stdout)
      expect(pids.length).toBe(1)
      expect(await waitGone(pids)).toEqual([])
    })
  }

  it('one that escapes after the run ended, while the sweep still runs, gets its SIGTERM before the SIGKILL', async () => {
    // the subshell ignores SIGTERM, so the sweep goes on looking; the sleep
    // it starts 0.3 s later (SIGTERM back to its default) was not there at
    // the first look (the SIGTERM's): a later look finds it and sends it
    // its own. It used to get only the deadline's SIGKILL, 10 s later.
    const r = await executeAndCapture(
      withFile(
        // (the run waits until the subshell ignores SIGTERM: the group's SIGTERM comes at its end)
        `(trap '' TERM; : > "$F.ready"; sleep 0.3; env --default-signal=TERM setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >> "$F") </dev/null >/dev/null 2>&1 &
until [ -e "$F.ready" ]; do sleep 0.01; done
echo "$F"`,
      ),
      'bash',
      { forceKillAfterDelay: 10_000 },
    )
    const file = r.stdout.trim()
    const end = Date.now() + 5000
    while (Date.now() < end && !(existsSync(file) && readFileSync(file, 'utf8').trim())) await sleep(20)
    const pids = pidsOf(readFileSync(file, 'utf8'))
    expect(pids.length).toBe(1)
    // gone long before the deadline's SIGKILL (10 s after the run's end)
    expect(await waitGone(pids, 5000)).toEqual([])
  })

  it('after a timeout: every escape at once', async () => {
    const r = await executeAndCapture(withFile(`${Object.values(ESCAPES).join('\n')}\n${settled(4)}\nsleep 1000`), 'bash', {
      timeout: 1000,
      forceKillAfterDelay: 200,
    })
    expect(r.timedOut).toBe(true)
    const pids = pidsOf(r.stdout)
    expect(pids.length).toBe(4)
    expect(await waitGone(pids)).toEqual([])
  })

  it('after a cancel', async () => {
    const ac = new AbortController()
    const seen: string[] = []
    const run = spawnCall('bash', ['-c', withFile(`${ESCAPES['setsid sleep']}\n${settled(1)}\nsleep 1000`)], { signal: ac.signal }, (d) => {
      seen.push(d)
      ac.abort()
    })
    const r = await run
    expect(r.canceled).toBe(true)
    const pids = pidsOf(seen.join(''))
    expect(pids.length).toBe(1)
    expect(await waitGone(pids)).toEqual([])
  })

  it('when the host gets SIGTERM', async () => {
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)});
      const print = (d) => process.stdout.write(d);
      spawnCall('bash', ['-c', ${JSON.stringify(withFile(`${ESCAPES['setsid sleep']}\n${settled(1)}\necho $$; sleep 1000`))}], { timeout: 0 }, print);
    `
    const host = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    host.stdout.on('data', (d) => (out += d))
    for (let i = 0; i < 100 && pidsOf(out).length < 2; i++) await new Promise((r) => setTimeout(r, 50))
    const pids = pidsOf(out)
    expect(pids.length).toBe(2)
    expect(pids.every(isRunning)).toBe(true)
    host.kill('SIGTERM')
    const code = await new Promise((r) => host.on('exit', (c, s) => r(s ?? c)))
    expect(code).toBe('SIGTERM') // the host still dies of its signal
    expect(await waitGone(pids)).toEqual([])
  })

  it('when the host gets SIGINT while a JS SIGINT listener exits', () => {
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)});
      process.on('SIGINT', () => process.exit(3));
      spawnCall('bash', ['-c', 'echo $$; sleep 1000'], { timeout: 0 }, (d) => { process.stdout.write(d); process.kill(process.pid, 'SIGINT') });
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 })
    expect(r.status).toBe(3)
    const pids = pidsOf(r.stdout)
    expect(pids.length).toBe(1)
    return waitGone(pids).then((left) => expect(left).toEqual([]))
  })
})
