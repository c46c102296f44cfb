import { createRoute } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import type { App } from '../app.js'
import { CodeResultSchema, RunCodeSchema } from '../code-schemas.js'
import type { AppDeps } from '../deps.js'
import { ErrorSchema, IdParam } from '../schemas.js'

const err = (description: string) => ({
  content: { 'application/json': { schema: ErrorSchema } },
  description,
})

/** `POST /v1/sessions/{id}/code`: runs a cell in the session's stateful code interpreter. */
export function registerCodeRoutes(app: App, deps: AppDeps): void {
  app.openapi(
    createRoute({
      method: 'post',
      path: '/v1/sessions/{id}/code',
      summary: "Run code in the session's stateful kernel (python or javascript)",
      description:
        'Runs one cell in a long-lived interpreter of the session (one per language): variables, imports and ' +
        'definitions persist between calls, like a notebook. The answer carries stdout, stderr, the text of the ' +
        'last expression, rich outputs (display(), _repr_png_/_repr_html_, matplotlib figures) and the ' +
        "exception with its traceback. A timeout interrupts the cell and keeps the kernel's state; a kernel " +
        'that died is reported (error KernelDied) and started anew on the next call (kernelRestarted).',
      security: [{ bearer: [] }],
      request: {
        params: IdParam,
        body: { content: { 'application/json': { schema: RunCodeSchema } }, required: true },
      },
      responses: {
        200: {
          content: { 'application/json': { schema: CodeResultSchema } },
          description: 'the cell ran (an exception in it is `error`, not an HTTP error)',
        },
        400: err('bad input (empty code, unknown language, timeoutMs over the profile maximum)'),
        404: err('no such session (or not this key’s tenant)'),
        501: err(
          'the sandbox has no interpreter for the language (UNSUPPORTED), e.g. no python3 in its image',
        ),
        502: err("the session's sandbox was lost"),
      },
    }),
    async (c) => {
      if (!deps.code) throw new AppError('UNSUPPORTED', 'this server has no code interpreter')
      const { id } = c.req.valid('param')
      const input = c.req.valid('json')
      const r = await deps.code.run(c.get('principal').tenant, id, input, { signal: c.req.raw.signal })
      if (!r) throw new AppError('NOT_FOUND', `no session ${id}`)
      return c.json(r, 200)
    },
  )
}
