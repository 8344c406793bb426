// The MCP server (`exec-native mcp`) through the official TypeScript client,
// as an agent host drives it (issue 26).
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, describe, expect, it } from 'vitest'

import { isRunning, sleep, waitGone } from './helpers'

import { CommandRunner } from '../index.js'

const bin = join(__dirname, '..', 'bin', 'exec-native.mjs')
const work = mkdtempSync(join(tmpdir(), 'exec-native-mcp-test-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

type Text = { type: 'text'; text: string }
type Result = { content: Text[]; isError?: boolean; structuredContent?: Record<string, any> }

async function connect(extra: string[] = [], cwd = work) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [bin, 'mcp', '-C', cwd, ...extra],
    stderr: 'pipe',
  })
  const client = new Client({ name: 'exec-native-test', version: '1.0.0' })
  await client.connect(transport)
  const call = async (name: string, args: Record<string, unknown>, options?: Parameters<Client['callTool']>[2]) =>
    (await client.callTool({ name, arguments: args }, undefined, options)) as unknown as Result
  return { client, transport, call }
}

const text = (r: Result) => r.content.map((c) => c.text).join('')
const pidOf = (t: string) => Number(/\(pid (\d+)\)/.exec(t)![1])

/** Raw JSON-RPC lines to a fresh server; resolves with the answers read until `count`. */
async function raw(lines: string[], count: number): Promise<any[]> {
  const child = spawn(process.execPath, [bin, 'mcp', '-C', work], { stdio: ['pipe', 'pipe', 'inherit'] })
  const answers: any[] = []
  let buf = ''
  const done = new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      buf += d
      let i
      while ((i = buf.indexOf('\n')) >= 0) {
        answers.push(JSON.parse(buf.slice(0, i)))
        buf = buf.slice(i + 1)
        if (answers.length >= count) resolve()
      }
    })
  })
  for (const l of lines) child.stdin.write(`${l}\n`)
  await Promise.race([done, sleep(10_000)])
  child.stdin.end()
  child.kill()
  return answers
}

const init = JSON.stringify({
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
})
const initialized = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })

describe('the MCP server', () => {
  it('1. a cancelled call kills its whole process tree', async () => {
    const { client, call } = await connect()
    const ac = new AbortController()
    const pending = call('bash', { command: 'echo $$ > shell.pid; sleep 300 & echo $! > child.pid; wait' }, { signal: ac.signal })
    pending.catch(() => {})
    let shell = 0
    let child = 0
    for (let i = 0; i < 100 && !(shell && child); i++) {
      await sleep(50)
      try {
        shell = Number(readFileSync(join(work, 'shell.pid'), 'utf8'))
        child = Number(readFileSync(join(work, 'child.pid'), 'utf8'))
      } catch {}
    }
    expect(isRunning(shell) && isRunning(child)).toBe(true)
    ac.abort('the user pressed Esc')
    await expect(pending).rejects.toThrow()
    expect(await waitGone([shell, child], 5000)).toEqual([])
    await client.close()
  }, 20_000)

  it('1. a cancelled exec_command or write_stdin kills that session\'s tree, and no answer comes', async () => {
    const { client, call } = await connect()
    const pids = async (file: string) => {
      for (let i = 0; i < 100; i++) {
        await sleep(50)
        try {
          const [a, b] = readFileSync(join(work, file), 'utf8').trim().split(' ').map(Number)
          if (a && b) return [a, b]
        } catch {}
      }
      throw new Error(`no ${file}`)
    }
    // a start that waits out its yield (nothing reads input, nothing ends)
    const late: string[] = []
    client.onerror = (e) => late.push(String(e))
    const ac = new AbortController()
    const started = call('exec_command', { cmd: 'sleep 300 & echo $$ $! > ia-start.pid; wait', yield_time_ms: 20_000 }, { signal: ac.signal })
    started.catch(() => {})
    const tree = await pids('ia-start.pid')
    expect(tree.every(isRunning)).toBe(true)
    ac.abort('the user pressed Esc')
    expect(await waitGone(tree, 5000)).toEqual([])
    // a write that waits: the session it writes to goes
    const s = await call('exec_command', { cmd: 'read x; sleep 300 & echo $$ $! > ia-write.pid; wait', tty: false, yield_time_ms: 300 })
    const id = Number(/session (\d+)/.exec(text(s))![1])
    const ac2 = new AbortController()
    const wrote = call('write_stdin', { session_id: id, chars: 'go\n', yield_time_ms: 20_000 }, { signal: ac2.signal })
    wrote.catch(() => {})
    const tree2 = await pids('ia-write.pid')
    expect(tree2.every(isRunning)).toBe(true)
    ac2.abort('the user pressed Esc')
    expect(await waitGone(tree2, 5000)).toEqual([])
    const gone = await call('write_stdin', { session_id: id, chars: '' })
    expect(text(gone)).toMatch(/^exec: no interactive session \d+ in this runner .*\(ESRCH\)$/)
    await sleep(300)
    expect(late).toEqual([]) // an answer to a cancelled call would be a response to an unknown id
    await client.close()
  }, 30_000)

  it('2. the default wait answers before the client gives up, with progress meanwhile', async () => {
    const { client, call } = await connect()
    const tools = await client.listTools()
    const bash = tools.tools.find((t) => t.name === 'bash')!
    expect(bash.description).toContain('default 30s, at most 50s')
    const progress: number[] = []
    const t0 = Date.now()
    const r = await call('bash', { command: 'echo begun; sleep 45' }, { onprogress: (p) => progress.push(p.progress) })
    const waited = Date.now() - t0
    expect(waited).toBeGreaterThan(29_000)
    expect(waited).toBeLessThan(40_000) // the TS SDK gives up at 60 s
    const pid = pidOf(text(r))
    expect(text(r)).toMatch(/^\[Command backgrounded after 30s timeout \(pid \d+\)\. Partial output:\n\nstdout:\nbegun\n/)
    expect(r.structuredContent).toMatchObject({ pid, backgrounded: true, running: true, exit_code: null })
    expect(progress.length).toBeGreaterThanOrEqual(10)
    expect(progress).toEqual([...progress].sort((a, b) => a - b))
    const k = await call('bash', { kill_pid: pid })
    expect(text(k)).toMatch(new RegExp(`^\\[Process ${pid} killed \\(SIGTERM`))
    await client.close()
  }, 60_000)

  it('3. malformed JSON-RPC gets -32700 / -32602; unknown arguments are named', async () => {
    const badArgs = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'bash', arguments: 'ls' } })
    const answers = await raw([init, initialized, 'this is not json', badArgs], 3)
    expect(answers[0].id).toBe(0)
    expect(answers.find((a) => a.id === null)?.error.code).toBe(-32700)
    expect(answers.find((a) => a.id === 7)?.error.code).toBe(-32602)
    expect(answers.find((a) => a.id === 7)?.error.message).toContain('arguments must be an object')

    const { client, call } = await connect()
    const r = await call('bash', { command: 'pwd', cwd: '/' })
    expect(r.isError).toBe(true)
    expect(text(r)).toBe(
      'exec: unknown argument cwd (use workdir); the parameters are command, timeout, check_pid, kill_pid, workdir, max_output_tokens, truncation (EINVAL)',
    )
    await client.close()
  }, 20_000)

  it('7. a working directory that does not exist stops the server at once', () => {
    const r = spawnSync(process.execPath, [bin, 'mcp', '-C', '/nonexistent/dir'], { input: '', encoding: 'utf8', timeout: 10_000 })
    expect(r.status).toBe(2)
    expect(r.stderr).toBe(
      "exec-native mcp: exec: Working directory does not exist '/nonexistent/dir' (ENOENT)\n",
    )
  })

  it('7b. --shell powershell: a clear error at start without PowerShell; else pwsh -NoProfile -NonInteractive -Command', async () => {
    const env = { ...process.env, PATH: dirname(process.execPath) }
    const none = spawnSync(process.execPath, [bin, 'mcp', '-C', work, '--shell', 'powershell'], { input: '', encoding: 'utf8', timeout: 10_000, env })
    expect(none.status).toBe(2)
    expect(none.stderr).toBe(
      'exec-native mcp: exec: --shell powershell: PowerShell was not found (neither pwsh nor powershell is on PATH): install PowerShell 7 (https://aka.ms/powershell) or use --shell bash (ENOENT)\n',
    )
    const bad = spawnSync(process.execPath, [bin, 'mcp', '--shell', 'fish'], { input: '', encoding: 'utf8', timeout: 10_000 })
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/--shell must be bash, powershell or cmd, got fish/)
    // cmd is Windows' shell: here the server refuses to start (the Windows suite runs it)
    const cmd = spawnSync(process.execPath, [bin, 'mcp', '-C', work, '--shell', 'cmd'], { input: '', encoding: 'utf8', timeout: 10_000 })
    expect(cmd.status).toBe(2)
    expect(cmd.stderr).toBe(
      "exec-native mcp: exec: --shell cmd: cmd is Windows' shell, there is no cmd.exe on this system: use --shell bash (ENOENT)\n",
    )
    // a stand-in pwsh on PATH: the server runs each command through it, with PowerShell's flags
    const fake = mkdtempSync(join(tmpdir(), 'exec-native-pwsh-'))
    writeFileSync(join(fake, 'pwsh'), '#!/bin/sh\nprintf "%s|" "$@"\n', { mode: 0o755 })
    const stateful = spawnSync(process.execPath, [bin, 'mcp', '-C', work, '--shell', 'powershell', '--stateful'], { input: '', encoding: 'utf8', timeout: 10_000, env: { ...process.env, PATH: `${fake}:${process.env.PATH}` } })
    expect(stateful.status).toBe(2)
    expect(stateful.stderr).toMatch(/--stateful needs bash.*\(EINVAL\)/)
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [bin, 'mcp', '-C', work, '--shell', 'powershell'],
      env: { ...(process.env as Record<string, string>), PATH: `${fake}:${process.env.PATH}` },
      stderr: 'pipe',
    })
    const client = new Client({ name: 'exec-native-test', version: '1.0.0' })
    await client.connect(transport)
    expect(client.getInstructions()).toMatch(/run their commands in PowerShell/)
    const r = (await client.callTool({ name: 'bash', arguments: { command: 'Write-Output 42' } })) as unknown as Result
    expect(r.isError).toBeFalsy()
    expect(text(r)).toContain('-NoLogo|-NoProfile|-NonInteractive|-Command|Write-Output 42|')
    await client.close()
    rmSync(fake, { recursive: true, force: true })
  }, 30_000)

  it('9. the schema: one action, no extra properties, title, annotations, structured output', async () => {
    const { client, call } = await connect()
    const { tools } = await client.listTools()
    expect(tools.map((t) => t.name)).toEqual(['bash', 'exec_command', 'write_stdin', 'execute_code'])
    const bash = tools[0]
    expect(bash.title).toBe('Run a shell command')
    expect(bash.annotations).toMatchObject({ destructiveHint: true, openWorldHint: true, readOnlyHint: false })
    expect(bash.inputSchema.additionalProperties).toBe(false)
    expect(bash.outputSchema?.required).toEqual(['exit_code', 'signal', 'pid', 'running', 'backgrounded', 'truncated', 'log_path', 'adopted'])
    for (const must of ['fresh `bash -c`', 'stdin is /dev/null', 'exec_command and write_stdin', 'check_pid', 'kill_pid', 'taken over', '2000 lines / 50KB', 'Give exactly one of command, check_pid, kill_pid'])
      expect(bash.description).toContain(must)
    for (const t of tools) expect(t.inputSchema.additionalProperties).toBe(false)

    const r = await call('bash', { command: 'echo hi; exit 3' })
    expect(r.isError).toBe(true)
    expect(r.structuredContent).toEqual({
      exit_code: 3,
      signal: null,
      pid: expect.any(Number),
      running: false,
      backgrounded: false,
      truncated: false,
      log_path: null,
      adopted: [],
    })
    const both = await call('bash', { command: 'ls', check_pid: 1 })
    expect(text(both)).toBe('exec: give exactly one of command, check_pid, kill_pid (EINVAL)')
    expect(both.isError).toBe(true)
    const long = await call('bash', { command: 'seq 1 3000' })
    expect(long.structuredContent).toMatchObject({ truncated: true, log_path: expect.stringMatching(/exec-native-[0-9a-f]+\.log$/) })
    await client.close()
  }, 20_000)

  it('14. one NUL byte in text is shown, not a binary notice', async () => {
    const { client, call } = await connect()
    const r = await call('bash', { command: "seq 1 5; printf 'a\\0b\\n'; seq 6 8" })
    expect(text(r)).toBe('stdout:\n1\n2\n3\n4\n5\na\u2400b\n6\n7\n8\n\nexit code: 0')
    const bin = await call('bash', { command: 'head -c 2000 /dev/urandom' })
    expect(text(bin)).toMatch(/^stdout:\n\[binary output: 2000 bytes, saved to .*\]\n\nexit code: 0$/)
    await client.close()
  }, 20_000)

  it('16. a carriage return overwrites the line as a terminal does', async () => {
    const { client, call } = await connect()
    expect(text(await call('bash', { command: "printf 'line1\\rXX\\n'" }))).toBe('stdout:\nXXne1\n\nexit code: 0')
    expect(text(await call('bash', { command: "printf 'Downloading 100%%\\r\\033[KDone\\n'" }))).toBe('stdout:\nDone\n\nexit code: 0')
    await client.close()
  }, 20_000)

  it('12. a multi-threaded job is one adopted process, not one per thread', async () => {
    const { client, call } = await connect()
    const r = await call('bash', { command: 'node -e "setInterval(()=>{},1000)" & sleep 1; echo ok' })
    const adopted = r.structuredContent!.adopted as { pid: number; command: string }[]
    expect(adopted).toHaveLength(1)
    expect(adopted[0].command).toBe('node -e setInterval(()=>{},1000)')
    expect(text(r)).toContain(`[Left running in the background:\npid ${adopted[0].pid}: node -e setInterval(()=>{},1000)\n`)
    expect(text(r)).toContain('Use check_pid or kill_pid to manage.]')
    await call('bash', { kill_pid: adopted[0].pid })
    expect(await waitGone([adopted[0].pid])).toEqual([])
    await client.close()
  }, 20_000)

  it('13. an adopted job is listed by the command it runs, on one line', async () => {
    const { client, call } = await connect()
    const r = await call('bash', { command: 'sleep 77 &' })
    const [job] = r.structuredContent!.adopted as { pid: number; command: string }[]
    expect(job.command).toBe('sleep 77')
    const here = await call('bash', { command: "while read l; do sleep 78; done <<'EOF' &\nfirst\nsecond\nEOF\nsleep 0.2" })
    const jobs = here.structuredContent!.adopted as { pid: number; command: string }[]
    expect(jobs).toHaveLength(1)
    expect(jobs[0].command).toBe('bash (a subshell, running: sleep 78)')
    expect(text(here)).toContain(`\npid ${jobs[0].pid}: bash (a subshell, running: sleep 78)\n`)
    await client.close()
    expect(await waitGone([job.pid, jobs[0].pid])).toEqual([])
  }, 20_000)

  it('4. interactive commands: exec_command + write_stdin', async () => {
    const { client, call } = await connect()
    const a = await call('exec_command', { cmd: `python3 -c 'print("hi", input("name? "))'`, tty: false })
    expect(text(a)).toMatch(/^name\? \n\n\[waiting for input: session (\d+) \(pid \d+\) is reading its stdin; send keys with write_stdin with session_id \1; "\\u0004" closes its stdin \(EOF\)\]$/)
    const id = Number(/session (\d+)/.exec(text(a))![1])
    const b = await call('write_stdin', { session_id: id, chars: 'bob\n' })
    expect(text(b)).toBe('hi bob\n\nexit code: 0')
    const poll = await call('exec_command', { cmd: 'sleep 0.4; echo later; sleep 30', yield_time_ms: 100 })
    const pid2 = Number(/session (\d+)/.exec(text(poll))![1])
    await sleep(600)
    expect(text(await call('write_stdin', { session_id: pid2, chars: '' }))).toMatch(/^later\n\n\[still running after 250 ms/)
    const c = await call('write_stdin', { session_id: pid2, chars: '\u0003' })
    expect(text(c)).toMatch(/killed by SIGINT$/)
    await client.close()
  }, 30_000)

  it('5. on pipes, \\u0004 (or closeStdin) ends stdin', async () => {
    const runner = new CommandRunner({ cwd: work, outputDir: work })
    const s = await runner.start('wc -l', { tty: false, yieldMs: 300 })
    expect(s.text).toContain('is reading its stdin')
    const r = await runner.write(s.sessionId!, 'a\nb\n\u0004', { yieldMs: 3000 })
    expect(r.text).toBe('2\n\nexit code: 0')
    const t = await runner.start('cat', { tty: false, yieldMs: 300 })
    const u = await runner.write(t.sessionId!, 'x\n', { yieldMs: 3000, closeStdin: true })
    expect(u.text).toBe('x\n\nexit code: 0')
    await runner.close()
  }, 20_000)

  it('6. a SIGKILL of the server leaves nothing running: foreground, adopted, interactive', async () => {
    const { transport, call } = await connect()
    const r = await call('bash', { command: 'sleep 300 & echo $!' })
    const adopted = Number(/stdout:\n(\d+)/.exec(text(r))![1])
    const s = await call('exec_command', { cmd: 'echo $$; exec sleep 302', yield_time_ms: 300 })
    const session = Number(/^(\d+)/.exec(text(s))![1])
    call('bash', { command: 'echo $$ > fg.pid; exec sleep 301' }).catch(() => {})
    let fg = 0
    for (let i = 0; i < 100 && !fg; i++) {
      await sleep(50)
      try {
        fg = Number(readFileSync(join(work, 'fg.pid'), 'utf8'))
      } catch {}
    }
    expect([adopted, session, fg].every(isRunning)).toBe(true)
    process.kill(transport.pid!, 'SIGKILL')
    expect(await waitGone([adopted, session, fg], 5000)).toEqual([])
  }, 20_000)

  it('15. a command over 128 KiB runs (no E2BIG)', async () => {
    const { client, call } = await connect()
    const filler = 'x'.repeat(200 * 1024)
    const r = await call('bash', { command: `: ${filler}\necho "$(( 6 * 7 ))"; exit 4` })
    expect(text(r)).toBe('stdout:\n42\n\nexit code: 4')
    const s = await call('exec_command', { cmd: `: ${filler}\necho long`, tty: false, yield_time_ms: 3000 })
    expect(text(s)).toBe('long\n\nexit code: 0')
    await client.close()
  }, 20_000)

  it('8. workdir and an output budget per call', async () => {
    mkdirSync(join(work, 'sub'), { recursive: true })
    writeFileSync(join(work, 'sub', 'here.txt'), 'x')
    const { client, call } = await connect()
    expect(text(await call('bash', { command: 'ls', workdir: 'sub' }))).toBe('stdout:\nhere.txt\n\nexit code: 0')
    const sandboxed = await connect(['--sandbox'])
    const outside = await sandboxed.call('bash', { command: 'pwd', workdir: '/etc' })
    expect(text(outside)).toBe(`exec: workdir /etc lies outside the sandbox's roots (${work}, /tmp) (EINVAL)`)
    await sandboxed.client.close()
    const missing = await call('bash', { command: 'ls', workdir: 'nope' })
    expect(missing.isError).toBe(true)
    expect(text(missing)).toBe(`exec: workdir: Working directory does not exist '${join(work, 'nope')}' (ENOENT)`)
    const small = await call('bash', { command: 'seq 1 1000', max_output_tokens: 10 })
    expect(text(small)).toMatch(/^stdout:\n(\d+\n)+\nexit code: 0\n\n\[stdout: Showing last \d+ of 1000 lines \(40B limit\)\. Full output: /)
    await client.close()
  }, 20_000)

  it('a 10-step agent task over MCP reads true at every step', async () => {
    const proj = mkdtempSync(join(work, 'agent-'))
    const { client, call } = await connect([], proj)
    const step = async (args: Record<string, unknown>) => {
      const r = await call('bash', args)
      const t = text(r)
      // nothing misleading: no stale shell command lines, the tool's own words
      expect(t).not.toMatch(/bash -c|checkBackground|killBackground|start\(\)/)
      return { r, t }
    }
    // 1-3: write the files
    expect((await step({ command: 'npm init -y > /dev/null && npm pkg set scripts.test="node test.js" && echo ready' })).t).toBe(
      'stdout:\nready\n\nexit code: 0',
    )
    expect((await step({ command: "mkdir -p lib && cat > lib/sum.js <<'EOF'\nexports.sum = (a, b) => a - b\nEOF" })).t).toBe('(no output)\n\nexit code: 0')
    await step({
      command: "cat > test.js <<'EOF'\nconst assert = require('node:assert')\nassert.strictEqual(require('./lib/sum').sum(2, 3), 5)\nconsole.log('all passed')\nEOF",
    })
    // 4: the test fails, and says why
    const fail = await step({ command: 'npm test' })
    expect(fail.r.isError).toBe(true)
    expect(fail.t).toMatch(/AssertionError/)
    expect(fail.t).toMatch(/\nexit code: 1$/)
    // 5-6: fix it, the test passes
    await step({ command: "sed -i 's/a - b/a + b/' sum.js", workdir: 'lib' })
    const pass = await step({ command: 'npm test --silent' })
    expect(pass.t).toBe('stdout:\nall passed\n\nexit code: 0')
    // 7: a dev server with &
    const dev = await step({
      command: `node -e "require('http').createServer((q, s) => s.end('hello from dev\\n')).listen(0, function () { console.log('port', this.address().port) })" & sleep 1; echo started`,
    })
    const server = (dev.r.structuredContent!.adopted as { pid: number; command: string }[])[0]
    expect(server.command).toMatch(/^node -e require\('http'\)/)
    const port = Number(/port (\d+)/.exec(dev.t)![1])
    expect(dev.t).toContain(`[Left running in the background:\npid ${server.pid}: node -e`)
    expect(dev.t).toMatch(/Use check_pid or kill_pid to manage\.\]$/)
    // 8: curl it
    expect((await step({ command: `curl -s http://127.0.0.1:${port}/` })).t).toBe('stdout:\nhello from dev\n\nexit code: 0')
    // 9: check on it
    const check = await step({ check_pid: server.pid })
    expect(check.t).toMatch(new RegExp(`^\\[Process ${server.pid} still running\\.`))
    // 10: kill it
    const kill = await step({ kill_pid: server.pid })
    expect(kill.t).toMatch(new RegExp(`^\\[Process ${server.pid} killed \\(SIGTERM\\)\\.`))
    expect(await waitGone([server.pid])).toEqual([])
    await client.close()
  }, 60_000)

describe.skipIf(process.platform !== 'linux')('the MCP server with --sandbox (issue 22: composition)', () => {
  it('a model-written attack through the bash tool reaches neither the server nor outside the roots, and the model reads the denial', async () => {
    const outside = mkdtempSync(join('/var/tmp', 'exn-mcp-out-'))
    try {
      writeFileSync(join(outside, 'bait'), 'bait')
      const { client, transport, call } = await connect(['--sandbox'])
      const server = transport.pid!
      const r = await call('bash', {
        command: `kill -9 ${server}; grep -a -l PATH /proc/${server}/environ; echo x > ${outside}/bait; chmod 777 ${outside}/bait; echo done`,
      })
      const t = text(r)
      expect(t).toContain('done')
      expect(t).toMatch(/Read-only file system|Permission denied/)
      // the host side: the server lives and answers, the file is as it was
      expect(isRunning(server)).toBe(true)
      expect(text(await call('bash', { command: 'echo alive' }))).toContain('alive')
      expect(readFileSync(join(outside, 'bait'), 'utf8')).toBe('bait')
      await client.close()
    } finally {
      rmSync(outside, { recursive: true, force: true })
    }
  }, 20_000)
})

})
