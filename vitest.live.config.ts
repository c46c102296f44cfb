import { defineConfig } from 'vitest/config'

/**
 * The live suites: the provider conformance suite against the real Daytona and E2B clouds.
 * `npm run test:live` needs DAYTONA_API_KEY and E2B_API_KEY (each file fails with a clear message
 * when its key is missing); they are not part of `npm test`, which runs against local fakes.
 */
export default defineConfig({
  test: {
    include: ['test/live/**/*.live.ts'],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    fileParallelism: false,
  },
})
