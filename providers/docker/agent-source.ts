import type Docker from 'dockerode'
import {
  AGENT_DIR,
  INJECTED_AGENT_PATH,
  defaultAgentBinary,
  ensureAgentVolume,
  readAgentBinary,
} from './agent-volume.js'
import type { AgentSource } from './container-spec.js'
import type { ResolvedDockerProviderOptions } from './options.js'

/** Where the agent of a provider's new containers comes from. */
export interface AgentSupply {
  /** The agent volume (made ready once per provider, again after a failure), or the image's own agent. */
  source(image: string): Promise<AgentSource>
  /** Forgets the ready volume: the next `source` fills it again (it was pruned under us). */
  reset(): void
}

/** The {@link AgentSupply} of one provider: its binary (none when `agentBinary` is false). */
export function agentSupply(
  docker: Docker,
  opts: Pick<ResolvedDockerProviderOptions, 'agentBinary' | 'agentPath'>,
): AgentSupply {
  const agentBinary = opts.agentBinary === false ? undefined : (opts.agentBinary ?? defaultAgentBinary())
  let agentReady: Promise<AgentSource> | undefined

  const source = (image: string): Promise<AgentSource> => {
    if (!agentBinary) return Promise.resolve({ path: opts.agentPath })
    agentReady ??= (async () => {
      const agent = readAgentBinary(agentBinary)
      await ensureAgentVolume(docker, agent, image)
      return { path: INJECTED_AGENT_PATH, volume: { name: agent.volume, dir: AGENT_DIR } }
    })()
    const ready = agentReady
    ready.catch(() => {
      if (agentReady === ready) agentReady = undefined
    })
    return ready
  }

  return {
    source,
    reset: () => {
      agentReady = undefined
    },
  }
}
