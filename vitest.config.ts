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
      // Runs alone in the disruptive pass: concurrently with test/integration/sessions/pool-processes
      // (two processes taking a sandbox at once) it left that test hanging (see vitest.disruptive.config.ts).
      'test/integration/docker/any-image-conformance.test.ts',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites share one Docker engine and one Redis: keep file parallelism modest.
    maxWorkers: 2,
  },
})
