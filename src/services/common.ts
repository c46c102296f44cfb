import { z } from 'zod'
import { SESSION_ID_PATTERN, SESSION_ID_RULE } from '../sessions/session-id.js'

// Parts shared by the request bodies of several services.

/** Environment variables of a command or cell: names as a shell accepts them. */
export const Env = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'),
  z.string(),
)

/** A client-chosen session id (see {@link SESSION_ID_PATTERN}): in every body that names a session. */
export const SessionId = z.string().regex(SESSION_ID_PATTERN, SESSION_ID_RULE).meta({ example: 'my-session' })
