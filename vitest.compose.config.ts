import { defineConfig } from 'vitest/config'

/**
 * The compose pass (`vitest run -c vitest.compose.config.ts`): brings the docker-compose fleet up on
 * this machine's engine, after the main pass and before the disruptive one. It builds its images
 * first (cached by their inputs), so the first run takes a few minutes and later ones well under two.
 */
export default defineConfig({
  test: {
    include: ['test/compose/**/*.test.ts'],
    testTimeout: 180_000,
    hookTimeout: 900_000,
    // One stack at a time: its images, ports and the engine are shared.
    maxWorkers: 1,
    fileParallelism: false,
  },
})
