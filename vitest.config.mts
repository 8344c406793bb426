import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    // native addons are not safe in the `threads` pool
    pool: 'forks',
    include: ['__test__/**/*.test.{ts,mts}', 'packages/**/*.test.{ts,mts}'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
})
