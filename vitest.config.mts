import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    // native addons are not safe in the `threads` pool
    pool: 'forks',
    // at least two test files at once, also on a 2-core machine (vitest's
    // default there is one): the tests mostly wait on their child processes,
    // so two at a time used 1.35 cores (user+sys 311 s in 230 s, all 515
    // tests passing, with two cargo builds beside them)
    maxWorkers: Math.max(2, availableParallelism() - 1),
    include: ['__test__/**/*.test.{ts,mts}', 'packages/**/*.test.{ts,mts}'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
