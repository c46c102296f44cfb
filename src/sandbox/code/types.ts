/** Languages {@link runCode} runs. */
export const CODE_LANGUAGES = ['python', 'javascript'] as const
/** A language of the code interpreter. */
export type CodeLanguage = (typeof CODE_LANGUAGES)[number]

/** One cell to run in a session's kernel. */
export interface RunCodeRequest {
  code: string
  language: CodeLanguage
  /** The cell is interrupted past this (KeyboardInterrupt in Python); the kernel's state is kept. */
  timeoutMs: number
  /** Environment variables set for this cell only. */
  env?: Record<string, string>
}

/**
 * A rich output: `display(obj)` or the cell's last value. `data` maps MIME types (`text/plain`,
 * `text/html`, `image/png` as base64, `image/svg+xml`, `text/markdown`, `application/json`, …) to text.
 */
export interface CodeOutput {
  type: 'display' | 'result'
  data: Record<string, string>
}

/** An exception a cell raised (or the kernel's death, name `KernelDied`). */
export interface CodeError {
  /** Exception class, e.g. `ZeroDivisionError`, `ReferenceError`, `TimeoutError`, `KernelDied`. */
  name: string
  value: string
  traceback: string
}

/** The result of one cell, the same on every provider. */
export interface CodeResult {
  language: CodeLanguage
  stdout: string
  stderr: string
  /** `text/plain` of the cell's last value; `null` when it has none (a statement, `None`, `undefined`). */
  text: string | null
  outputs: CodeOutput[]
  error: CodeError | null
  /** How many cells this kernel ran, this one included. */
  executionCount: number
  timedOut: boolean
  /** Output past the kernel's cap (1 MiB per stream) was dropped. */
  truncated: boolean
  durationMs: number
  /**
   * True when this cell ran in a new kernel because the previous one died (crash, `os._exit`, a kill
   * after an unanswered interrupt): variables, imports and definitions from before are gone.
   */
  kernelRestarted: boolean
  /** Set when the provider's code runner keeps no state between calls (documented per provider). */
  stateless?: true
}

/**
 * What a routed code cell (a code job) reports besides its stdout and stderr: the part of a
 * {@link CodeResult} that travels in the job result. Rich outputs are named by MIME type only.
 */
export interface CodeCellPart {
  language: CodeLanguage
  text: string | null
  error: CodeError | null
  executionCount: number
  kernelRestarted: boolean
  outputs: { type: CodeOutput['type']; mimeTypes: string[] }[]
}
