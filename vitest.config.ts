import { configDefaults, defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The compose stack (vitest.compose.config.ts) and engine restarts (vitest.disruptive.config.ts)
    // run in their own passes, after everything else.
    exclude: [
      ...configDefaults.exclude,
      'test/compose/**',
      'test/disruptive/**',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites share one Docker engine and one Redis: keep file parallelism modest.
    maxWorkers: 2,
  },
})
