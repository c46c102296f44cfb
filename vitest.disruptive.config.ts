import { defineConfig } from 'vitest/config'

/**
 * Suites that disturb the whole machine (they restart the Docker engine). `npm test` runs them in a
 * second pass, after every other suite, one file at a time.
 */
export default defineConfig({
  test: {
    // The any-image conformance suite runs here, alone, too: run beside
    // test/integration/sessions/pool-processes.test.ts (a second process taking a sandbox at the same
    // time) that test hung, reproducibly, and the cause is not found yet (suspect: two processes
    // filling or mounting the agent volume at once, providers/docker/agent-volume.ts).
    include: ['test/disruptive/**/*.test.ts', 'test/integration/docker/any-image-conformance.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 180_000,
    fileParallelism: false,
    maxWorkers: 1,
  },
})
