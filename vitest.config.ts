import { configDefaults, defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The compose stack (vitest.compose.config.ts) and engine restarts (vitest.disruptive.config.ts)
    // run in their own passes, after everything else.
    exclude: [...configDefaults.exclude, 'test/compose/**', 'test/disruptive/**'],
    // Most e2e tests start `sbx` child processes (each a Node start-up, ~1.5 s idle); on a loaded
    // 2-core machine a test that starts several needs far more than it does idle.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration suites share one Docker engine and one Redis: keep file parallelism modest.
    maxWorkers: 2,
  },
})
