import { Sandbox as CodeSandbox, type Execution } from '@e2b/code-interpreter'
import type { ConnectionOpts } from 'e2b'
import type { AppError, CodeLanguage, CodeOutput, CodeResult, SandboxCode } from '../../src/sandbox/index.js'

const FIELDS: [keyof Execution['results'][number], string][] = [
  ['text', 'text/plain'],
  ['html', 'text/html'],
  ['markdown', 'text/markdown'],
  ['svg', 'image/svg+xml'],
  ['png', 'image/png'],
  ['jpeg', 'image/jpeg'],
  ['pdf', 'application/pdf'],
  ['latex', 'text/latex'],
  ['javascript', 'application/javascript'],
]

/** An E2B execution as the service's {@link CodeResult}. */
export function resultOfExecution(language: CodeLanguage, e: Execution, durationMs: number): CodeResult {
  const outputs: CodeOutput[] = e.results.map((r) => {
    const data: Record<string, string> = {}
    for (const [field, mime] of FIELDS) {
      const v = r[field]
      if (typeof v === 'string') data[mime] = v
    }
    if (r.json !== undefined)
      data['application/json'] = typeof r.json === 'string' ? r.json : JSON.stringify(r.json)
    return { type: r.isMainResult ? 'result' : 'display', data }
  })
  return {
    language,
    stdout: e.logs.stdout.join(''),
    stderr: e.logs.stderr.join(''),
    text: e.text ?? null,
    outputs,
    error: e.error ? { name: e.error.name, value: e.error.value, traceback: e.error.traceback } : null,
    executionCount: e.executionCount ?? 0,
    timedOut: false,
    truncated: false,
    durationMs,
    kernelRestarted: false,
  }
}

/**
 * E2B's own code interpreter (the `@e2b/code-interpreter` SDK's `runCode`, a Jupyter kernel per
 * language in the sandbox, reached on port 49999): state persists between cells. Needs a template
 * that runs it (E2B's `code-interpreter-v1`); the SDK handle is connected once per sandbox handle.
 */
export function e2bCode(
  sandboxId: string,
  connection: ConnectionOpts,
  classify: (err: unknown) => Promise<AppError>,
  languages: SandboxCode['languages'],
): SandboxCode {
  let sdk: Promise<CodeSandbox> | undefined
  const connect = (): Promise<CodeSandbox> => {
    sdk ??= CodeSandbox.connect(sandboxId, connection).catch((err: unknown) => {
      sdk = undefined
      throw err
    })
    return sdk
  }
  return {
    languages,
    async run(req, opts) {
      const t0 = Date.now()
      try {
        const s = await connect()
        opts?.signal?.throwIfAborted()
        const e = await s.runCode(req.code, {
          language: req.language === 'javascript' ? 'js' : 'python',
          timeoutMs: req.timeoutMs,
          ...(req.env ? { envs: req.env } : {}),
        })
        return resultOfExecution(req.language, e, Date.now() - t0)
      } catch (err) {
        throw await classify(err)
      }
    },
  }
}
