// What the model reads over MCP, one transcript per point of issue 26:
//   mkdir -p /tmp/t26 && node benchmark/mcp-transcripts.mjs
// (a real MCP client, the TypeScript SDK's, driving `exec-native mcp -C /tmp/t26`;
// pids and log names vary).
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'

const bin = join(fileURLToPath(import.meta.url), '..', '..', 'bin', 'exec-native.mjs')
const dir = process.argv[2] ?? '/tmp/t26'

async function connect(extra = []) {
  const client = new Client({ name: 'transcripts', version: '1' })
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [bin, 'mcp', '-C', dir, ...extra] }))
  return client
}

const show = (label, r) => {
  const t = r.content.map((c) => c.text).join('')
  console.log(`--- ${label}${r.isError ? ' (isError)' : ''}\n${t}\n`)
  return t
}

const c = await connect()
const call = (name, args) => c.callTool({ name, arguments: args })
show("bash { command: 'ls', cwd: '/' }", await call('bash', { command: 'ls', cwd: '/' }))
show("bash { command: \"seq 1 5; printf 'a\\\\0b\\\\n'; seq 6 8\" }", await call('bash', { command: "seq 1 5; printf 'a\\0b\\n'; seq 6 8" }))
show("bash { command: \"printf 'line1\\\\rXX\\\\n'\" }", await call('bash', { command: "printf 'line1\\rXX\\n'" }))
const thr = show('bash { command: \'node -e "setInterval(()=>{},1000)" & sleep 1\' }', await call('bash', { command: 'node -e "setInterval(()=>{},1000)" & sleep 1' }))
const heredoc = show("bash { command: \"sleep 77 &\\nwhile read l; do sleep 78; done <<'EOF' &\\nfirst\\nEOF\" }", await call('bash', { command: "sleep 77 &\nwhile read l; do sleep 78; done <<'EOF' &\nfirst\nEOF" }))
const bg = show("bash { command: 'echo a; sleep 5', timeout: 300 }", await call('bash', { command: 'echo a; sleep 5', timeout: 300 }))
for (const m of [...thr.matchAll(/pid (\d+):/g), ...heredoc.matchAll(/pid (\d+):/g), ...bg.matchAll(/\(pid (\d+)\)/g)])
  await call('bash', { kill_pid: Number(m[1]) })
const s = show("exec_command { cmd: \"python3 -c 'print(\\\"hi\\\", input(\\\"name? \\\"))'\", tty: false }", await call('exec_command', { cmd: `python3 -c 'print("hi", input("name? "))'`, tty: false }))
const id = Number(/session (\d+)/.exec(s)[1])
show(`write_stdin { session_id: ${id}, chars: 'bob\\n' }`, await call('write_stdin', { session_id: id, chars: 'bob\n' }))
const w = show("exec_command { cmd: 'wc -l', tty: false, yield_time_ms: 300 }", await call('exec_command', { cmd: 'wc -l', tty: false, yield_time_ms: 300 }))
const wid = Number(/session (\d+)/.exec(w)[1])
show(`write_stdin { session_id: ${wid}, chars: 'a\\nb\\n\\u0004' }`, await call('write_stdin', { session_id: wid, chars: 'a\nb\n\u0004', yield_time_ms: 2000 }))
show("bash { command: 'seq 1 1000', max_output_tokens: 10 }", await call('bash', { command: 'seq 1 1000', max_output_tokens: 10 }))
show("bash { command: 'ls', workdir: 'nope' }", await call('bash', { command: 'ls', workdir: 'nope' }))
const compiler = 'echo "error[E0308]: mismatched types"; seq 1 50; echo "error: aborting"'
show(`bash { command: '${compiler}', truncation: 'head_tail', max_output_tokens: 20 }`, await call('bash', { command: compiler, truncation: 'head_tail', max_output_tokens: 20 }))
await c.close()

const st = await connect(['--stateful'])
const stTools = await st.listTools()
console.log(`--- --stateful: the bash description says\n${stTools.tools[0].description.split('\n')[1]}\n`)
const scall = (args) => st.callTool({ name: 'bash', arguments: args })
await st.callTool({ name: 'bash', arguments: { command: 'mkdir -p proj' } })
show(`bash { command: 'cd proj && export API=http://localhost:3000 && hi() { echo "hi $1"; }' } under --stateful`, await scall({ command: 'cd proj && export API=http://localhost:3000 && hi() { echo "hi $1"; }' }))
show("bash { command: 'pwd; echo $API; hi there' } under --stateful", await scall({ command: 'pwd; echo $API; hi there' }))
const sbg = show("bash { command: 'cd /; sleep 5', timeout: 300 } under --stateful", await scall({ command: 'cd /; sleep 5', timeout: 300 }))
show("bash { command: 'pwd' } under --stateful (the backgrounded cd did not carry over)", await scall({ command: 'pwd' }))
await scall({ kill_pid: Number(/\(pid (\d+)\)/.exec(sbg)[1]) })
await st.close()

const sb = await connect(['--sandbox'])
const tools = await sb.listTools()
console.log(`--- --sandbox: the bash description ends\n${tools.tools[0].description.split('\n').at(-1)}\n`)
show("bash { command: 'echo x > /etc/exec-native-probe; curl -sS -m 3 http://example.com >/dev/null' } under --sandbox", await sb.callTool({ name: 'bash', arguments: { command: 'echo x > /etc/exec-native-probe; curl -sS -m 3 http://example.com >/dev/null' } }))
show("bash { command: 'pwd', workdir: '/etc' } under --sandbox", await sb.callTool({ name: 'bash', arguments: { command: 'pwd', workdir: '/etc' } }))
await sb.close()
