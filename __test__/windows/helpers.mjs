// What both Windows suites (wine.test.mjs, conpty.test.mjs) use.

/** Whether process `pid` still runs. */
export function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e.code === 'EPERM'
  }
}

/** Poll until `f()` or `ms` have passed. */
export async function until(f, ms = 5000) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (f()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return f()
}
