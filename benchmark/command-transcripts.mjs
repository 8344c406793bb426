// What the model reads, one transcript per point of issue 15 (docs/COMMAND.md).
// mkdir -p /tmp/t15 && node benchmark/command-transcripts.mjs
import { CommandRunner, runCommand } from '../index.js'
const o = { cwd: '/tmp/t15', outputDir: '/tmp/t15' }
const r = new CommandRunner(o)
const show = (t, x) => console.log(`=== ${t}\n${x}\n`)
const a = await r.run('python3 -m http.server 8765 --bind 127.0.0.1 > /dev/null 2>&1 & sleep 1; echo started')
show('1', a.text)
show('1k', (await r.call({ kill_pid: a.adopted[0].pid })).text)
show('2', (await r.call({ command: 'echo a; sleep 0.3; echo b; sleep 5', timeout: 100 })).text)
await new Promise(s => setTimeout(s, 500))
const pid = r.listBackground()[1].pid
show('2c', (await r.call({ check_pid: pid })).text)
show('2e', (await r.call({ command: 'ls', check_pid: pid })).text)
const p = await r.start(`read -p 'Continue? ' x; echo "got $x"`)
show('3', p.text)
show('3w', (await r.write(p.sessionId, 'yes\r')).text)
const sl = await r.start('sleep 30', { yieldMs: 300 })
show('3s', sl.text)
show('3c', (await r.write(sl.sessionId, '\u0003', { yieldMs: 2000 })).text)
show('4', (await r.run(`python3 -c "
import sys
for i in range(20001): sys.stdout.write('\\r[%-20s] %d/20000' % ('#' * (i * 20 // 20000), i))
print()"`)).text)
show('5', (await r.run('seq 1 3000; seq 1 3000 >&2')).text.replace(/\n[0-9]+\n[\s\S]*?\n(?=\d+\n\nstderr)/, '\n…\n').replace(/stderr:\n[\s\S]*?\n(?=2999\n)/, 'stderr:\n…\n'))
show('6', (await r.run('head -c 1000 /dev/urandom')).text)
show('7', (await r.run('true')).text)
show('7b', (await r.run('printf abcdef', { maxBytes: 1 })).text)
await r.close()
