// commandTools({ format }) against the SDKs' own parameter types: the
// definitions are written into a .ts file typed with openai's,
// @anthropic-ai/sdk's and the MCP SDK's tool types, and tsc must accept it.
import { execFileSync } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { commandTools, CommandRunner } from '../index.js'

const tsc = join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc')

describe('commandTools', () => {
  it('each format type-checks against its SDK, strict mode included', () => {
    const file = join(__dirname, `.tool-formats-${process.pid}.ts`)
    const j = (v: unknown) => JSON.stringify(v, null, 1)
    writeFileSync(
      file,
      `import type OpenAI from 'openai'
import type Anthropic from '@anthropic-ai/sdk'
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js'
export const responses: OpenAI.Responses.FunctionTool[] = ${j(commandTools({ format: 'openai-responses' }))}
export const responsesStrict: OpenAI.Responses.FunctionTool[] = ${j(commandTools({ format: 'openai-responses', strict: true }))}
export const chat: OpenAI.Chat.Completions.ChatCompletionTool[] = ${j(commandTools({ format: 'openai-chat', strict: true }))}
export const anthropic: Anthropic.Messages.Tool[] = ${j(commandTools({ format: 'anthropic' }))}
export const mcp: McpTool[] = ${j(commandTools({ format: 'mcp' }))}
`,
    )
    try {
      execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--skipLibCheck', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', file], {
        encoding: 'utf8',
        stdio: 'pipe',
      })
    } catch (e: any) {
      throw new Error(`tsc rejected the definitions:\n${e.stdout}${e.stderr}`)
    } finally {
      rmSync(file, { force: true })
    }
  }, 120_000)

  it('strict mode requires every property and forbids others; the shapes differ per harness', () => {
    const [bash] = commandTools({ format: 'openai-responses', strict: true }) as any[]
    expect(bash).toMatchObject({ type: 'function', name: 'bash', strict: true })
    expect(bash.parameters.required.sort()).toEqual(Object.keys(bash.parameters.properties).sort())
    expect(bash.parameters.additionalProperties).toBe(false)
    expect(bash.parameters.properties.timeout.type).toEqual(['integer', 'null'])
    const chat = commandTools({ format: 'openai-chat' }) as any[]
    expect(chat.map((t) => t.function.name)).toEqual(['bash', 'exec_command', 'write_stdin'])
    const anthropic = commandTools({ format: 'anthropic' }) as any[]
    expect(Object.keys(anthropic[0]).sort()).toEqual(['description', 'input_schema', 'name'])
    expect(() => commandTools({ format: 'gemini' as any })).toThrow(
      "exec: options.format must be 'openai-responses', 'openai-chat', 'anthropic' or 'mcp', got 'gemini' (EINVAL)",
    )
  })

  it('runner.callTool dispatches all three; strict nulls count as absent', async () => {
    const runner = new CommandRunner()
    const nulls = { timeout: null, workdir: null, max_output_tokens: null, check_pid: null, kill_pid: null }
    const r = await runner.callTool('bash', { command: 'echo hi', ...nulls })
    expect(r).toMatchObject({ text: 'stdout:\nhi\n\nexit code: 0', isError: false, structured: { exit_code: 0, backgrounded: false } })
    const s = await runner.callTool('exec_command', { cmd: 'read x; echo got $x', tty: false, yield_time_ms: 2000 })
    const id = Number(/session (\d+)/.exec(s.text)![1])
    expect((await runner.callTool('write_stdin', { session_id: id, chars: 'y\n', yield_time_ms: 2000 })).text).toBe('got y\n\nexit code: 0')
    expect((await runner.callTool('nope', {})).text).toBe("exec: no tool named 'nope' (tools: bash, exec_command, write_stdin) (EINVAL)")
    await runner.close()
  }, 20_000)

  it("runner.callTool keeps the runner's own timeout and limits", async () => {
    const runner = new CommandRunner({ timeout: 300, maxLines: 3 })
    const r = await runner.callTool('bash', { command: 'seq 1 10; sleep 2' })
    expect(r.text).toMatch(/^\[Command backgrounded after 0\.3s timeout \(pid \d+\)\. Partial output:\n\nstdout:\n8\n9\n10\n/)
    expect(r.structured).toMatchObject({ backgrounded: true })
    await runner.close()
  }, 20_000)
})
