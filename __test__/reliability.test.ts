import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { executeAndCapture, spawnCall } from '../index.js'
import { isRunning, waitGone } from './helpers'

const addon = join(__dirname, '..', 'index.js')

describe('resource limits', () => {
  it('memory: the tree is stopped and the result names the limit', async () => {
    const r = await executeAndCapture('x = bytearray(512 * 1024 * 1024); import time; time.sleep(5)', 'python', {
      limits: { memoryBytes: 256 * 1024 * 1024 },
    })
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe('exec: memory limit of 256 MiB exceeded (ELIMIT)')
    expect(r.success).toBe(false)
  })

  it('processes: a fork bomb inside the limit is stopped', async () => {
    const r = await spawnCall('bash', ['-c', ':(){ :|:& };:; sleep 10'], { limits: { maxProcesses: 40 }, timeout: 20000 })
    expect(r.errorCode).toBe('ELIMIT')
    expect(r.error).toBe('exec: process limit of 40 exceeded (ELIMIT)')
    expect(r.executionTime).toBeLessThan(10000)
  })

  it('cpu and file size', async () => {
    const cpu = await executeAndCapture('while True: pass', 'python', { limits: { cpuSeconds: 1 } })
    expect(cpu.error).toBe('exec: CPU time limit of 1s exceeded (ELIMIT)')
    expect(cpu.signal).toBe('SIGXCPU')
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-fsize-'))
    const fsz = await executeAndCapture(`head -c 5000000 /dev/zero > ${dir}/f`, 'bash', {
      limits: { fileSizeBytes: 1024 * 1024 },
    })
    expect(fsz.error).toBe('exec: file size limit of 1 MiB exceeded (ELIMIT)')
  })

  it('open files', async () => {
    const r = await executeAndCapture('ulimit -n', 'bash', { limits: { openFiles: 64 } })
    expect(r.stdout).toBe('64\n')
  })

  it('bad limits are TypeErrors', async () => {
    await expect(executeAndCapture('x', 'bash', { limits: { memoryBytes: -5 } })).rejects.toThrow(
      /options\.limits\.memoryBytes must not be negative/,
    )
    await expect(executeAndCapture('x', 'bash', { limits: 3 as never })).rejects.toThrow(TypeError)
  })
})

describe('environment hygiene', () => {
  it('envDenylist drops secrets, envAllowlist keeps only what is named; env always passes', async () => {
    process.env.EXEC_NATIVE_GITHUB_TOKEN = 'ghp_secret'
    process.env.EXEC_NATIVE_AWS_KEY = 'aws'
    const deny = await executeAndCapture('env', 'bash', { envDenylist: ['*_TOKEN', '*_KEY'] })
    expect(deny.stdout).not.toContain('ghp_secret')
    expect(deny.stdout).not.toContain('EXEC_NATIVE_AWS_KEY')
    expect(deny.stdout).toContain('PATH=')
    const allow = await executeAndCapture('env | sort', 'bash', {
      envAllowlist: ['PATH'],
      env: { MINE_TOKEN: 'given' },
      envDenylist: ['*_TOKEN'],
    })
    const names = allow.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('=')[0])
      .filter((n) => !['PWD', 'SHLVL', '_', 'OLDPWD'].includes(n))
    expect(names).toEqual(['EXEC_NATIVE_RUN_ID', 'MINE_TOKEN', 'PATH'])
  })
})

describe('host death', () => {
  it('dieWithParent: the child dies with a SIGKILLed host', async () => {
    const script = `
      const { spawnCall } = require(${JSON.stringify(addon)});
      spawnCall('sh', ['-c', 'echo $$; exec sleep 1000'], { timeout: 0, dieWithParent: true }, (d) => process.stdout.write(d));
    `
    const host = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    host.stdout.on('data', (d) => (out += d))
    for (let i = 0; i < 100 && !out.includes('\n'); i++) await new Promise((r) => setTimeout(r, 50))
    const pid = Number(out.trim())
    expect(isRunning(pid)).toBe(true)
    host.kill('SIGKILL')
    expect(await waitGone([pid])).toEqual([])
  })

  it('dieWithParent of a CommandRunner reaches runner.start() on pipes (it was dropped there)', async () => {
    const pidOf = async (dieWithParent: boolean) => {
      const script = `
        const { CommandRunner } = require(${JSON.stringify(addon)});
        const runner = new CommandRunner({ dieWithParent: ${dieWithParent} });
        runner.start('echo pid=$$; exec sleep 1000', { tty: false, yieldMs: 300 })
          .then((r) => process.stdout.write(r.output + '\\n'));
        setInterval(() => {}, 1000); // the host lives until it is killed
      `
      const host = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      host.stdout.on('data', (d) => (out += d))
      for (let i = 0; i < 200 && !/pid=\d+/.test(out); i++) await new Promise((r) => setTimeout(r, 50))
      const pid = Number(/pid=(\d+)/.exec(out)?.[1])
      expect(isRunning(pid)).toBe(true)
      host.kill('SIGKILL')
      return pid
    }
    const dies = await pidOf(true)
    const stays = await pidOf(false)
    try {
      expect(await waitGone([dies])).toEqual([])
      // the control: without it, a SIGKILLed host's pipe child lives on
      await new Promise((r) => setTimeout(r, 300))
      expect(isRunning(stays)).toBe(true)
    } finally {
      for (const p of [dies, stays]) {
        try {
          process.kill(p, 'SIGKILL')
        } catch {}
      }
    }
  })
})

describe('worker threads', () => {
  it('works in several workers at once; terminating one kills its children', () => {
    const script = `
      const { Worker } = require('node:worker_threads');
      const code = \`
        const { parentPort, workerData } = require('node:worker_threads');
        const { executeAndCapture, spawnCall } = require(${JSON.stringify(addon)});
        (async () => {
          const r = await executeAndCapture('echo w' + workerData, 'bash');
          parentPort.postMessage({ out: r.stdout });
          spawnCall('sh', ['-c', 'echo $$; exec sleep 1000'], { timeout: 0 }, (d) => parentPort.postMessage({ pid: Number(d) }));
        })();
      \`;
      const outs = [], pids = [];
      const workers = [0, 1, 2].map((i) => {
        const w = new Worker(code, { eval: true, workerData: i });
        w.on('message', (m) => {
          if (m.out) outs.push(m.out.trim());
          if (m.pid) pids.push(m.pid);
          if (pids.length === 3) {
            Promise.all(workers.map((x) => x.terminate())).then(() => {
              setTimeout(() => { console.log(JSON.stringify({ outs: outs.sort(), pids })); }, 300);
            });
          }
        });
        return w;
      });
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
    expect(r.status).toBe(0)
    const { outs, pids } = JSON.parse(r.stdout)
    expect(outs).toEqual(['w0', 'w1', 'w2'])
    expect(pids.length).toBe(3)
    return waitGone(pids).then((left) => expect(left).toEqual([]))
  })
})

describe('worker threads, streaming', () => {
  it('a stream of many batches in each of several workers and the main thread gets every byte', () => {
    // 4 MiB is 64 chunks, 8 batches: each batch after the first waits for a
    // turn of its own environment's loop (one turn function per environment)
    const script = `
      const { Worker } = require('node:worker_threads');
      const { spawnCall } = require(${JSON.stringify(addon)});
      const code = \`
        const { parentPort } = require('node:worker_threads');
        const { spawnCall } = require(${JSON.stringify(addon)});
        let got = 0, calls = 0;
        spawnCall('head', ['-c', '4194304', '/dev/zero'], {}, (d) => { got += d.length; calls++ })
          .then((r) => parentPort.postMessage({ got, calls, code: r.exitCode }));
      \`;
      const main = { got: 0 };
      const runs = [0, 1].map(() => new Promise((res) => {
        const w = new Worker(code, { eval: true });
        w.on('message', (m) => { res(m); w.terminate(); });
      }));
      runs.push(spawnCall('head', ['-c', '4194304', '/dev/zero'], { encoding: 'buffer' }, (d) => { main.got += d.length })
        .then((r) => ({ got: main.got, code: r.exitCode })));
      Promise.all(runs).then((rs) => console.log(JSON.stringify(rs)));
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
    expect(r.status).toBe(0)
    const rs = JSON.parse(r.stdout)
    expect(rs.map((x: { got: number }) => x.got)).toEqual([4194304, 4194304, 4194304])
    expect(rs.map((x: { code: number }) => x.code)).toEqual([0, 0, 0])
    expect(rs[0].calls).toBeGreaterThanOrEqual(64)
  })

  it('a worker terminated in the middle of a heavy stream leaves the host running and no child behind', () => {
    // the stream's next batch may be waiting for a turn of the worker's loop
    // when the worker goes: the environment's teardown lets it go
    const script = `
      const { Worker } = require('node:worker_threads');
      const code = \`
        const { parentPort } = require('node:worker_threads');
        const { spawnCall } = require(${JSON.stringify(addon)});
        let sent = false;
        spawnCall('sh', ['-c', 'echo $$ >&2; exec yes'], { timeout: 0 }, () => {},
          (d) => { if (!sent) { sent = true; parentPort.postMessage(Number(d)) } });
      \`;
      const w = new Worker(code, { eval: true });
      w.on('message', (pid) => setTimeout(() => w.terminate().then(() =>
        setTimeout(() => console.log(JSON.stringify({ pid })), 300)), 200));
    `
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30000 })
    expect(r.status).toBe(0)
    const { pid } = JSON.parse(r.stdout)
    return waitGone([pid]).then((left) => expect(left).toEqual([]))
  })
})

describe('hostile input and output', () => {
  it('NUL bytes and invalid UTF-8 in output', async () => {
    const r = await executeAndCapture("printf 'a\\0b\\xfe\\xffc'", 'bash')
    expect(r.errorCode).toBe('EBINARY')
    expect(r.stdout).toBe('a\0b\uFFFD\uFFFDc')
    expect(r.stdoutBytes).toBe(6)
  })

  it('10 MB on a single line', async () => {
    const r = await executeAndCapture("head -c 10000000 /dev/zero | tr '\\0' x", 'bash')
    expect(r.stdoutBytes).toBe(10_000_000)
    expect(r.truncated).toBe(true)
    expect(r.stdout.length).toBeLessThanOrEqual(1024 * 1024 + 50)
    expect(r.stdout.startsWith('xxxx')).toBe(true)
    expect(r.stdout.endsWith('xxxx')).toBe(true)
  })

  it('both streams at full speed at once', async () => {
    const r = await executeAndCapture('head -c 50000000 /dev/zero & head -c 50000000 /dev/zero >&2; wait', 'bash', {
      encoding: 'buffer',
    })
    expect(r.stdoutBytes).toBe(50_000_000)
    expect(r.stderrBytes).toBe(50_000_000)
  })

  it('a child that closes stdout early and keeps running', async () => {
    const r = await executeAndCapture('echo bye; exec 1>&-; sleep 0.5; echo err >&2', 'bash')
    expect(r.stdout).toBe('bye\n')
    expect(r.stderr).toBe('err\n')
    expect(r.exitCode).toBe(0)
  })

  it('code with NUL bytes, empty code', async () => {
    const nul = await executeAndCapture('print(1)\0print(2)', 'python')
    expect(nul.success).toBe(false)
    expect(nul.stderr).toMatch(/null bytes/)
    const empty = await executeAndCapture('', 'python')
    expect(empty).toMatchObject({ success: true, stdout: '', exitCode: 0 })
  })

  it('a cwd without permission', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exec-native-noperm-'))
    chmodSync(dir, 0o000)
    if (process.getuid?.() === 0) {
      // root enters any directory: run the check as an unprivileged user instead
      const probe = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', `
        require(${JSON.stringify(addon)}).executeAndCapture('pwd', 'bash', { cwd: ${JSON.stringify(dir)} })
          .then((r) => process.stdout.write(JSON.stringify(r)))`], { encoding: 'utf8' })
      const r = JSON.parse(probe.stdout)
      expect(r.errorCode).toBe('EACCES')
      expect(r.error).toBe(`exec: Working directory is not accessible '${dir}' (EACCES)`)
    } else {
      const r = await executeAndCapture('pwd', 'bash', { cwd: dir })
      expect(r.errorCode).toBe('EACCES')
    }
  })

  it('env values with = and NUL', async () => {
    const eq = await executeAndCapture('echo "$V"', 'bash', { env: { V: 'a=b=c' } })
    expect(eq.stdout).toBe('a=b=c\n')
    await expect(executeAndCapture('echo', 'bash', { env: { V: 'a\0b' } })).rejects.toThrow(/contains a NUL byte/)
  })

  it('timeouts of 0, Infinity, negative, NaN', async () => {
    expect((await executeAndCapture('echo ok', 'bash', { timeout: 0 })).stdout).toBe('ok\n')
    expect((await executeAndCapture('echo ok', 'bash', { timeout: Infinity })).stdout).toBe('ok\n')
    await expect(executeAndCapture('echo', 'bash', { timeout: -1 })).rejects.toThrow(TypeError)
    await expect(executeAndCapture('echo', 'bash', { timeout: NaN })).rejects.toThrow(TypeError)
  })

  it('a callback that returns a promise that never settles does not hold the result', async () => {
    const r = await spawnCall('sh', ['-c', 'echo a; echo b'], {}, () => new Promise(() => {}))
    expect(r.exitCode).toBe(0)
  })
})
