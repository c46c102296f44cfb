import type Docker from 'dockerode'
import { AppError, LABELS, OWNER, POOL_LABELS } from '../../src/sandbox/index.js'
import { IDLE_EXIT_CODE } from './container-spec.js'
import { engineStatus, mapEngineError } from './errors.js'

/** A container created this recently and not started yet may be a create in flight (ms). */
const CREATE_GRACE_MS = 60_000

/** The label every pool puts its scope (the config's `queue.prefix`) in. */
const SCOPE_LABEL = POOL_LABELS.scope

/** One container of this project that {@link findEngineLeftovers} would remove. */
export interface EngineLeftover {
  id: string
  /** Engine state: `exited`, `created`, `dead`, or `running` (only with `includeRunning`). */
  state: string
  /** Why it may go, in words (`ended itself after idling`, `exited (code 137)`, ...). */
  reason: string
  scope: string
  session: string
  profile: string
  /** Creation time (ms since epoch). */
  createdAt: number
}

/** Options of {@link findEngineLeftovers}. */
export interface EngineSweepOptions {
  /** Only containers of this scope (the `POOL_LABELS.scope` label); every scope when absent. */
  scope?: string
  /**
   * Also running containers that have nothing attached (no `docker exec`: no agent channel, no
   * command). Only for a fleet known to be gone: a live fleet's idle sessions look the same.
   */
  includeRunning?: boolean
}

/** Whether any `docker exec` (an agent channel, an operator's shell) runs in the container now. */
async function attached(docker: Docker, id: string): Promise<boolean> {
  const info = await docker.getContainer(id).inspect()
  if (!info.State.Running) return false
  for (const execId of info.ExecIDs ?? []) {
    const exec = await docker
      .getExec(execId)
      .inspect()
      .catch((err: unknown) => {
        if (engineStatus(err) === 404) return undefined
        throw err
      })
    if (exec?.Running) return true
  }
  return false
}

function reasonOf(c: Docker.ContainerInfo, exitCode: number | undefined): string {
  if (c.State === 'running') return 'running with nothing attached'
  if (c.State === 'exited' && exitCode === IDLE_EXIT_CODE) return 'ended itself after idling'
  if (c.State === 'exited') return `exited (code ${exitCode ?? '?'})`
  return c.State
}

/**
 * Lists this project's containers (owner label {@link LABELS.owner} = {@link OWNER}) that no
 * fleet needs: stopped ones, and with `includeRunning` running ones with nothing attached. Needs
 * only the engine, no Redis. Containers with a `docker exec` running are never listed.
 */
export async function findEngineLeftovers(
  docker: Docker,
  opts: EngineSweepOptions = {},
): Promise<EngineLeftover[]> {
  const label = [`${LABELS.owner}=${OWNER}`, ...(opts.scope ? [`${SCOPE_LABEL}=${opts.scope}`] : [])]
  let containers: Docker.ContainerInfo[]
  try {
    containers = await docker.listContainers({ all: true, filters: { label } })
  } catch (err) {
    throw mapEngineError(err, 'listing sandbox containers')
  }
  const out: EngineLeftover[] = []
  const now = Date.now()
  for (const c of containers) {
    // Removal already under way, or paused on purpose by someone: not ours to decide.
    if (c.State === 'removing' || c.State === 'paused' || c.State === 'restarting') continue
    // A create in flight (created, not yet started) of a live fleet: spared for a minute.
    if (c.State === 'created' && now - c.Created * 1000 < CREATE_GRACE_MS) continue
    let exitCode: number | undefined
    try {
      if (c.State === 'running') {
        if (!opts.includeRunning || (await attached(docker, c.Id))) continue
      } else {
        exitCode = (await docker.getContainer(c.Id).inspect()).State.ExitCode
      }
    } catch (err) {
      if (engineStatus(err) === 404) continue // gone meanwhile
      throw mapEngineError(err, `inspecting container ${c.Id}`)
    }
    out.push({
      id: c.Id,
      state: c.State,
      reason: reasonOf(c, exitCode),
      scope: c.Labels[SCOPE_LABEL] ?? '',
      session: c.Labels[LABELS.session] ?? '',
      profile: c.Labels[LABELS.profile] ?? '',
      createdAt: c.Created * 1000,
    })
  }
  return out
}

/**
 * Removes what {@link findEngineLeftovers} listed; a running one is checked again first and kept
 * when something attached to it meanwhile. Returns the ids removed.
 */
export async function removeEngineLeftovers(
  docker: Docker,
  leftovers: readonly EngineLeftover[],
): Promise<string[]> {
  const removed: string[] = []
  for (const l of leftovers) {
    try {
      if (l.state === 'running' && (await attached(docker, l.id))) continue
      await docker.getContainer(l.id).remove({ force: true, v: true })
      removed.push(l.id)
    } catch (err) {
      const status = engineStatus(err)
      if (status === 404) continue
      if (status === 409) continue // a removal is already in progress
      throw err instanceof AppError ? err : mapEngineError(err, `removing container ${l.id}`)
    }
  }
  return removed
}
