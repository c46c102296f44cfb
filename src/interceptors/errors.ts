import { AppError } from '../errors.js'
import type { InterceptorStage } from './types.js'

/**
 * A control interceptor threw (or returned something that is not a decision). It fails the run and
 * is never swallowed; the original error is the `cause`.
 */
export class InterceptorError extends AppError {
  override readonly name = 'InterceptorError'
  constructor(
    readonly interceptor: string,
    readonly stage: InterceptorStage,
    cause: unknown,
    detail?: string,
  ) {
    super(
      'INTERCEPTOR_FAILED',
      `interceptor "${interceptor}" failed in ${stage}: ${detail ?? describe(cause)}`,
      { cause },
    )
  }
}

function describe(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause)
}
