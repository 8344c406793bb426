// Issue 26, items 8 and 11: the head+tail truncation mode and the stateful
// mode, through the official TypeScript MCP client and the JavaScript API.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, describe, expect, it } from 'vitest'

import { isRunning, waitGone } from './helpers'

import { CommandRunner, commandTools, runCommand } from '../index.js'

const bin = join(__dirname, '..', 'bin', 'exec-native.mjs')
const work = mkdtempSync(join(tmpdir(), 'exec-native-mcp-modes-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

type Text = { type: 'text'; text: string }
type Result = { content: Text[]; isError?: boolean; structuredContent?: Record<string, any> }

async function connect(extra: string[] = [], cwd = work) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [bin, 'mcp', '-C', cwd, ...extra], stderr: 'pipe' })
  const client = new Client({ name: 'exec-native-test', version: '1.0.0' })
  await client.connect(transport)
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as unknown as Result
  return { client, call }
}

const text = (r: Result | { text: string }) => ('text' in r ? r.text : r.content.map((c) => c.text).join(''))
const pidOf = (t: string) => Number(/\(pid (\d+)\)/.exec(t)![1])
const logOf = (t: string) => /Full output: (\S+\.log)\]/.exec(t)![1]
// a compiler-like output: the first error at the top, the summary at the end
const COMPILER = 'echo "error[E0308]: mismatched types at src/main.rs:3"; seq 1 5000; echo "error: aborting due to 1 previous error"'

describe('item 8: a head+tail truncation mode', () => {
  it('over MCP: the first and the last lines, a marker of the cut, the full log; tail stays the default', async () => {
    const { client, call } = await connect()
    const { tools } = await client.listTools()
    for (const name of ['bash', 'exec_command']) {
      const p = (tools.find((t) => t.name === name)!.inputSchema.properties as any).truncation
      expect(p.enum).toEqual(['tail', 'head_tail'])
      expect(p.description).toContain('Default: tail')
    }
    expect(tools[0].description).toContain('truncation "head_tail" keeps the first lines too')

    const tail = text(await call('bash', { command: COMPILER }))
    expect(tail).toMatch(/^stdout:\n3002\n/)
    expect(tail).not.toContain('E0308')

    const both = await call('bash', { command: COMPILER, truncation: 'head_tail' })
    const t = text(both)
    const head = ['error[E0308]: mismatched types at src/main.rs:3', ...Array.from({ length: 999 }, (_, i) => String(i + 1))]
    const last = [...Array.from({ length: 999 }, (_, i) => String(4002 + i)), 'error: aborting due to 1 previous error']
    expect(t).toMatch(/^stdout:\nerror\[E0308\]/)
    expect(t.startsWith(`stdout:\n${head.join('\n')}\n[... 3002 lines (`)).toBe(true)
    expect(t).toMatch(/\n\[\.\.\. 3002 lines \([\d.]+KB\) omitted \.\.\.\]\n4002\n/)
    expect(t).toContain(`\n${last.join('\n')}\n\nexit code: 0\n\n[stdout: Showing first 1000 and last 1000 of 5002 lines. Full output: `)
    expect(both.structuredContent).toMatchObject({ truncated: true })
    const log = readFileSync(logOf(t), 'utf8')
    expect(log.split('\n').length).toBe(5003)

    // far past the window the tail keeps (2 x 50KB): the head is kept apart
    const big = text(await call('bash', { command: 'seq 1 300000', truncation: 'head_tail' }))
    expect(big).toMatch(/^stdout:\n1\n2\n3\n/)
    expect(big).toMatch(/\n\[\.\.\. 298000 lines \([\d.]+[KM]B\) omitted \.\.\.\]\n299001\n/)
    expect(big).toContain('300000\n\nexit code: 0\n\n[stdout: Showing first 1000 and last 1000 of 300000 lines. Full output: ')

    // the budget covers head and tail together
    const small = text(await call('bash', { command: COMPILER, truncation: 'head_tail', max_output_tokens: 30 }))
    expect(small).toMatch(
      /^stdout:\nerror\[E0308\]: mismatched types at src\/main\.rs:3\n1\n2\n3\n4\n5\n6\n\[\.\.\. 4990 lines \(23\.3KB\) omitted \.\.\.\]\n4997\n4998\n4999\n5000\nerror: aborting due to 1 previous error\n\nexit code: 0\n\n\[stdout: Showing first 7 and last 5 of 5002 lines \(120B limit\)\. Full output: /,
    )

    const interactive = text(await call('exec_command', { cmd: COMPILER, truncation: 'head_tail', tty: false, yield_time_ms: 5000 }))
    expect(interactive).toMatch(/^error\[E0308\]/)
    expect(interactive).toMatch(/\n\[\.\.\. 3002 lines \([\d.]+KB\) omitted \.\.\.\]\n4002\n/)

    const bad = await call('bash', { command: 'ls', truncation: 'middle' })
    expect(bad.isError).toBe(true)
    expect(text(bad)).toBe("exec: truncation must be 'tail' or 'head_tail', got 'middle' (EINVAL)")
    await client.close()
  }, 30_000)

  it('in the JavaScript API: runCommand, CommandRunner, start and commandTools', async () => {
    const r = await runCommand(COMPILER, { cwd: work, outputDir: work, truncation: 'head_tail' })
    expect(r.text).toMatch(/^stdout:\nerror\[E0308\]/)
    expect(r.truncation.stdout).toMatchObject({ truncated: true, outputLines: 2000, totalLines: 5002 })
    const runner = new CommandRunner({ cwd: work, outputDir: work, truncation: 'head_tail', maxLines: 4 })
    expect(text(await runner.run('seq 1 10'))).toMatch(/^stdout:\n1\n2\n\[\.\.\. 6 lines \(12B\) omitted \.\.\.\]\n9\n10\n/)
    // a call's own mode over the runner's
    expect(text(await runner.run('seq 1 10', { truncation: 'tail' }))).toMatch(/^stdout:\n7\n8\n9\n10\n/)
    const s = await runner.start('seq 1 10', { tty: false, yieldMs: 3000 })
    expect(s.text).toMatch(/^1\n2\n\[\.\.\. 6 lines \(12B\) omitted \.\.\.\]\n9\n10\n/)
    expect(text(await runner.callTool('bash', { command: 'seq 1 10', truncation: 'tail' }))).toMatch(/^stdout:\n7\n8\n9\n10\n/)
    await runner.close()
    expect(() => new CommandRunner({ truncation: 'middle' as any })).toThrow(
      "exec: options.truncation must be 'tail' or 'head_tail', got 'middle' (EINVAL)",
    )
    const strict = commandTools({ format: 'openai-responses', strict: true })[0] as any
    expect(strict.parameters.properties.truncation).toMatchObject({ type: ['string', 'null'], enum: ['tail', 'head_tail', null] })
  }, 20_000)
})

describe('item 11: a stateful mode', () => {
  it('mcp --stateful: cd, export, functions carry over; the description says so; the stateless one says the opposite', async () => {
    const proj = mkdtempSync(join(work, 'stateful-'))
    mkdirSync(join(proj, 'sub'))
    mkdirSync(join(proj, 'other'))
    const stateless = await connect([], proj)
    const { tools: plain } = await stateless.client.listTools()
    expect(plain[0].description).toContain('Each call is a fresh `bash -c`: `cd`, `export` and functions do not carry over')
    await stateless.call('bash', { command: 'cd sub && export A=1' })
    expect(text(await stateless.call('bash', { command: 'pwd; echo "A=$A"' }))).toBe(`stdout:\n${proj}\nA=\n\nexit code: 0`)
    await stateless.client.close()

    const { client, call } = await connect(['--stateful'], proj)
    const { tools } = await client.listTools()
    expect(tools[0].description).toContain('Stateful: all calls share one shell state')
    expect(tools[0].description).toContain('`cd`, `export`, variables, functions, aliases and shell options carry over')
    expect((tools[0].inputSchema.properties as any).workdir.description).toContain('carries over to later calls')
    expect(text(await call('bash', { command: 'cd sub && export A=1 && greet() { echo "hi $1"; }; B=two; exit 3' }))).toBe(
      '(no output)\n\nexit code: 3',
    )
    expect(text(await call('bash', { command: 'pwd; echo "A=$A B=$B"; greet you; bash -c \'echo "child sees A=$A"\'' }))).toBe(
      `stdout:\n${proj}/sub\nA=1 B=two\nhi you\nchild sees A=1\n\nexit code: 0`,
    )
    // workdir is a cd that carries over
    expect(text(await call('bash', { command: 'pwd', workdir: 'other' }))).toBe(`stdout:\n${proj}/other\n\nexit code: 0`)
    expect(text(await call('bash', { command: 'pwd' }))).toBe(`stdout:\n${proj}/other\n\nexit code: 0`)
    // an interactive command starts from the shared state, and leaves it alone
    const s = text(await call('exec_command', { cmd: 'pwd; greet there; cd /', tty: false, yield_time_ms: 3000 }))
    expect(s).toBe(`${proj}/other\nhi there\n\nexit code: 0`)
    expect(text(await call('bash', { command: 'pwd' }))).toBe(`stdout:\n${proj}/other\n\nexit code: 0`)
    await client.close()
  }, 30_000)

  it('mcp --stateful: the timeout backgrounds, & jobs are adopted, truncation and the log as stateless', async () => {
    const proj = mkdtempSync(join(work, 'stateful-'))
    const { client, call } = await connect(['--stateful'], proj)
    // a command that moved to the background keeps its changes to itself
    const bg = text(await call('bash', { command: 'cd /; export GONE=1; echo begun; sleep 30', timeout: 500 }))
    expect(bg).toMatch(/^\[Command backgrounded after 0\.5s timeout \(pid \d+\)\. Partial output:\n\nstdout:\nbegun\n/)
    expect(bg).toMatch(/Use check_pid or kill_pid to manage\.\]$/)
    const pid = pidOf(bg)
    expect(text(await call('bash', { command: 'pwd; echo "GONE=$GONE"' }))).toBe(`stdout:\n${proj}\nGONE=\n\nexit code: 0`)
    expect(text(await call('bash', { check_pid: pid }))).toMatch(new RegExp(`^\\[Process ${pid} still running\\.`))
    expect(text(await call('bash', { kill_pid: pid }))).toMatch(new RegExp(`^\\[Process ${pid} killed \\(SIGTERM`))
    expect(await waitGone([pid])).toEqual([])
    // & jobs: taken over, listed, killed
    const job = await call('bash', { command: 'export KEEP=yes; sleep 300 & echo started' })
    const adopted = job.structuredContent!.adopted as { pid: number; command: string }[]
    expect(adopted.map((a) => a.command)).toEqual(['sleep 300'])
    expect(text(job)).toContain(`[Left running in the background:\npid ${adopted[0].pid}: sleep 300`)
    expect(isRunning(adopted[0].pid)).toBe(true)
    expect(text(await call('bash', { command: 'echo "KEEP=$KEEP"' }))).toBe('stdout:\nKEEP=yes\n\nexit code: 0')
    expect(text(await call('bash', { kill_pid: adopted[0].pid }))).toMatch(/killed \(SIGTERM/)
    // truncation and the log: what the stateless mode shows
    const plain = await connect([], proj)
    for (const args of [{ command: 'seq 1 3000' }, { command: COMPILER, truncation: 'head_tail' }]) {
      const a = text(await call('bash', args))
      const b = text(await plain.call('bash', args))
      expect(a.replace(logOf(a), 'LOG')).toBe(b.replace(logOf(b), 'LOG'))
      expect(readFileSync(logOf(a), 'utf8')).toBe(readFileSync(logOf(b), 'utf8'))
    }
    await plain.client.close()
    await client.close()
  }, 30_000)

  it('mcp --stateful under --sandbox keeps its state; a read-only sandbox, where it cannot, refuses to start', async () => {
    const proj = mkdtempSync(join(work, 'stateful-'))
    mkdirSync(join(proj, 'sub'))
    const { client, call } = await connect(['--stateful', '--sandbox'], proj)
    await call('bash', { command: 'cd sub; export S=1' })
    const r = await call('bash', { command: 'pwd; echo "S=$S"; echo x > /etc/exn-probe' })
    expect(text(r)).toMatch(new RegExp(`^stdout:\n${proj}/sub\nS=1\n\nstderr:\n.*(Read-only file system|Permission denied)`))
    await client.close()
    const ro = spawnSync(process.execPath, [bin, 'mcp', '-C', proj, '--stateful', '--sandbox=read-only'], { input: '', encoding: 'utf8', timeout: 10_000 })
    expect(ro.status).toBe(2)
    expect(ro.stderr).toMatch(/^exec-native mcp: exec: stateful mode keeps the shell's state in .*, which the sandbox does not let commands write .*\(EINVAL\)\n$/)
  }, 30_000)

  it('CommandRunner({ stateful: true }): run, call and callTool share the state; close removes it', async () => {
    const dir = mkdtempSync(join(work, 'runner-'))
    mkdirSync(join(dir, 'sub'))
    const out = mkdtempSync(join(work, 'out-'))
    const runner = new CommandRunner({ cwd: dir, outputDir: out, stateful: true })
    await runner.run('cd sub; alias hello="echo hello from alias"; export N=41')
    expect((await runner.run('pwd; hello; echo $((N + 1))')).text).toBe(`stdout:\n${dir}/sub\nhello from alias\n42\n\nexit code: 0`)
    expect((await runner.call({ command: 'N=$((N + 1)); echo $N' })).text).toBe('stdout:\n42\n\nexit code: 0')
    expect((await runner.callTool('bash', { command: 'echo $N; pwd' })).text).toBe(`stdout:\n42\n${dir}/sub\n\nexit code: 0`)
    // a call's own cwd is a cd that carries over
    expect((await runner.run('pwd', { cwd: dir })).text).toBe(`stdout:\n${dir}\n\nexit code: 0`)
    expect((await runner.run('pwd')).text).toBe(`stdout:\n${dir}\n\nexit code: 0`)
    expect(readdirSync(out).some((f) => f.startsWith('exec-native-state-'))).toBe(true)
    await runner.close()
    expect(readdirSync(out).filter((f) => f.startsWith('exec-native-state-'))).toEqual([])
    // the default stays stateless
    const plain = new CommandRunner({ cwd: dir, outputDir: out })
    await plain.run('cd sub')
    expect((await plain.run('pwd')).text).toBe(`stdout:\n${dir}\n\nexit code: 0`)
    await plain.close()
  }, 20_000)
})
