import { configDefaults, defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Engine restarts run in their own pass (vitest.disruptive.config.ts), after everything else.
    exclude: [...configDefaults.exclude, 'test/disruptive/**'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration suites share one Docker engine and one Redis: keep file parallelism modest.
    maxWorkers: 2,
  },
})
