// Bun.spawn over the same child programs as benchmark/bench.mjs, run by
// `bun` (the npm package's binary). Served over stdin/stdout, one JSON line
// per request (see benchmark/spawn-floor.py for the protocol):
//   seq:   Bun.spawn(argv) + `await exited`, one after the other
//   burst: n at once, wall time and the latency of each
const run = async (argv) => {
  const p = Bun.spawn(argv)
  const code = await p.exited
  if (code !== 0) throw new Error(`bun-spawn: ${argv.join(' ')} exited with ${code}`)
}
async function seq(n, argv) {
  const ms = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await run(argv)
    ms.push(performance.now() - t)
  }
  return { ms }
}
async function burst(n, argv) {
  const t0 = performance.now()
  const lat = await Promise.all(
    Array.from({ length: n }, async () => {
      const t = performance.now()
      await run(argv)
      return performance.now() - t
    }),
  )
  return { wall: performance.now() - t0, lat }
}
for await (const line of console) {
  if (!line.trim()) continue
  const req = JSON.parse(line)
  const res = await (req.op === 'seq' ? seq : burst)(req.n, req.argv)
  process.stdout.write(JSON.stringify(res) + '\n')
}
