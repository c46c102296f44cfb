import { z } from '@hono/zod-openapi'
import { ProcessStartInput } from '../services/processes.js'

/** Body of `POST /v1/sessions/{id}/processes`: the process service's schema, with its OpenAPI name. */
export const ProcessStartSchema = ProcessStartInput.openapi('ProcessStart')

/** One background process. */
export const ProcessSchema = z
  .object({
    id: z.string().openapi({ example: 'p-3f9a0c12d4e5' }),
    command: z.string(),
    pid: z.number().int().openapi({ description: "pid of the process group's leader inside the sandbox" }),
    state: z.enum(['running', 'exited', 'lost']).openapi({
      description:
        '`lost`: it ended without an exit status (its supervisor was killed from inside the sandbox)',
    }),
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable().openapi({ example: 'SIGTERM', description: 'the signal that ended it' }),
    startedAt: z.number().int().openapi({ description: 'epoch ms' }),
    endedAt: z.number().int().nullable(),
    stdinClosed: z.boolean(),
    stdoutBytes: z
      .number()
      .int()
      .openapi({ description: 'bytes written to stdout since the start (dropped ones included)' }),
    stderrBytes: z.number().int(),
  })
  .openapi('Process')

const SliceSchema = z
  .object({
    data: z.string().openapi({
      description:
        'the bytes offset..nextOffset, as UTF-8 (a character cut by the slice end is left for the next read)',
    }),
    offset: z.number().int().openapi({ description: 'offset of the first byte returned' }),
    nextOffset: z.number().int().openapi({ description: 'the offset to read from next' }),
    dropped: z.number().int().openapi({
      description: 'bytes between the offset asked for and `offset` that the capped buffer no longer holds',
    }),
  })
  .openapi('OutputSlice')

/** `GET …/output`. */
export const ProcessOutputSchema = z
  .object({ process: ProcessSchema, stdout: SliceSchema, stderr: SliceSchema })
  .openapi('ProcessOutput')

const offset = (name: string, description: string) =>
  z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .openapi({ param: { name, in: 'query' }, description })

/** Query of `GET …/output`. */
export const ProcessOutputQuery = z.object({
  offset: offset(
    'offset',
    'offset of both streams (default 0), unless stdoutOffset / stderrOffset say otherwise',
  ),
  stdoutOffset: offset('stdoutOffset', "stdout's offset: the nextOffset of the previous read"),
  stderrOffset: offset('stderrOffset', "stderr's offset: the nextOffset of the previous read"),
  maxBytes: z.coerce
    .number()
    .int()
    .min(0)
    .max(1_048_576)
    .default(65_536)
    .openapi({
      param: { name: 'maxBytes', in: 'query' },
      description: 'per stream (default 64 KiB, at most 1 MiB)',
    }),
  waitMs: z.coerce
    .number()
    .int()
    .min(0)
    .max(20_000)
    .default(0)
    .openapi({
      param: { name: 'waitMs', in: 'query' },
      description: 'long poll: wait up to this long (at most 20 s) for output past the offsets, or the end',
    }),
})

/** Body of `POST …/stdin`. */
export const ProcessStdinSchema = z
  .object({
    data: z.string().max(1_000_000).default('').openapi({ description: 'UTF-8 text written to stdin' }),
    close: z
      .boolean()
      .default(false)
      .openapi({ description: 'close stdin afterwards (the process reads EOF)' }),
  })
  .strict()
  .openapi('ProcessStdin')

/** Body of `POST …/signal`. */
export const ProcessSignalSchema = z
  .object({
    signal: z
      .string()
      .regex(/^(SIG)?[A-Z0-9+-]{2,12}$/i, 'a signal name such as SIGTERM')
      .default('SIGTERM'),
    waitMs: z.number().int().min(0).max(10_000).default(1_000).openapi({
      description:
        'wait this long for the process to end before answering (its state then says whether it did)',
    }),
  })
  .strict()
  .openapi('ProcessSignal')

/** Path of one process. */
export const ProcessParams = z.object({
  id: z
    .string()
    .min(1)
    .max(256)
    .openapi({ param: { name: 'id', in: 'path' }, example: 'my-session' }),
  processId: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a process id as start answered it (p-…)')
    .openapi({ param: { name: 'processId', in: 'path' }, example: 'p-3f9a0c12d4e5' }),
})
