// sandboxStatus() against independent probes of the same kernel facts.
import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'

import { sandboxStatus } from '../index.js'

const py = (code: string) => spawnSync('python3', ['-c', code], { encoding: 'utf8' }).stdout.trim()

describe('sandboxStatus', () => {
  const s = sandboxStatus()

  it('reports the platform and the Landlock ABI the kernel gives (landlock_create_ruleset, VERSION)', () => {
    expect(s.platform).toBe(process.platform === 'darwin' ? 'darwin' : 'linux')
    if (process.platform !== 'linux') return
    // syscall 444 is landlock_create_ruleset on x86_64 and aarch64
    const abi = Number(py('import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(444, None, 0, 1); print(r if r > 0 else 0)'))
    expect(s.landlockAbi).toBe(abi)
  })

  it('reports seccomp filter support as prctl(PR_SET_SECCOMP, FILTER, NULL) does, and installs nothing', () => {
    if (process.platform !== 'linux') return
    const efault = py('import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.prctl(22, 2, None, 0, 0); print(r == -1 and ctypes.get_errno() == 14)')
    expect(s.seccomp).toBe(efault === 'True')
    // asking changed nothing: this process has no filter
    const status = spawnSync('grep', ['^Seccomp:', `/proc/${process.pid}/status`], { encoding: 'utf8' }).stdout
    expect(status).toMatch(/Seccomp:\s+0/)
  })

  it('reports user namespaces as unshare -U finds them', () => {
    if (process.platform !== 'linux') return
    const r = spawnSync('unshare', ['-U', 'true'])
    if (r.error) return // no util-linux unshare here
    expect(s.userNamespaces).toBe(r.status === 0)
    expect(s.sandboxExec).toBe(false)
  })
})
