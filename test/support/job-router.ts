import { deriveJobId } from '../../src/queue/index.js'
import type { ExecJob } from '../../src/queue/index.js'
import type { QueueRouteExecutor } from '../../src/routing/queue-route-executor.js'

/**
 * The part of the router that `QueueExecService` uses, for tests of the service on a queue: the job
 * a request becomes (a Docker exec of `route.command`, its id derived from tenant + callId).
 */
export const jobRouter = {
  buildJob: (route: { tenant?: string; callId: string; command: string; sessionId?: string }): ExecJob => {
    const tenant = route.tenant ?? 'default'
    return {
      jobId: deriveJobId(tenant, route.callId),
      tenant,
      ...(route.sessionId === undefined ? {} : { sessionId: route.sessionId }),
      providerId: 'docker',
      profile: 'default',
      command: route.command,
      timeoutMs: 10_000,
      outputCapBytes: 1 << 20,
      idempotent: false,
      callId: route.callId,
      toolName: 'exec',
      submittedAt: Date.now(),
    }
  },
} as unknown as QueueRouteExecutor
