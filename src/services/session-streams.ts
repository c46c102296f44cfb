import type { Duplex } from 'node:stream'
import type { SandboxTerminal, TerminalOptions } from '../sandbox/types.js'

/** A stream into a session's sandbox, holding a lease of it until `stream` closes. */
export interface SessionPortStream {
  readonly stream: Duplex
  /** Resolves once the stream closed and the lease was released. */
  readonly done: Promise<void>
}

/** A terminal in a session's sandbox, holding a lease of it until the terminal ends. */
export interface SessionTerminal {
  readonly terminal: SandboxTerminal
  readonly done: Promise<void>
}

/** Ports and terminals of a tenant's sessions. Another tenant's session is `NOT_FOUND`, like an unknown one. */
export interface SessionStreamService {
  /** A connection to `127.0.0.1:port` inside the session's sandbox (binding one on first use). */
  openPort(
    tenant: string,
    sessionId: string,
    port: number,
    opts?: { signal?: AbortSignal },
  ): Promise<SessionPortStream>
  /** An interactive terminal in the session's sandbox. */
  openTerminal(tenant: string, sessionId: string, opts: TerminalOptions): Promise<SessionTerminal>
}
