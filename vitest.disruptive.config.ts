import { defineConfig } from 'vitest/config'

/**
 * Suites that disturb the whole machine (they restart the Docker engine). `npm test` runs them in a
 * second pass, after every other suite, one file at a time.
 */
export default defineConfig({
  test: {
    include: ['test/disruptive/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 180_000,
    fileParallelism: false,
    maxWorkers: 1,
  },
})
