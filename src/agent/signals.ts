/**
 * A signal that never aborts, shared by runs started without one. Creating an AbortController per
 * run or per tool call is measurable in the loop's overhead, and listeners on it would never fire.
 */
export const NEVER_ABORTED: AbortSignal = new AbortController().signal
