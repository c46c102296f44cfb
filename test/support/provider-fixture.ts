import type { ExecRequest } from '../../src/sandbox/types.js'

/** Label that scopes one test file's sandboxes; a fixture's `cleanup` destroys everything carrying it. */
export const TEST_RUN_LABEL = 'sandbox-router.test-run'

/** Defaults for quick commands. */
export const quick: Pick<ExecRequest, 'timeoutMs' | 'outputCapBytes'> = {
  timeoutMs: 20_000,
  outputCapBytes: 1 << 20,
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error('expected the promise to reject')
}
