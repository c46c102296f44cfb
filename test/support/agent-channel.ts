import { execFile } from 'node:child_process'
import { readlink } from 'node:fs/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** An agent channel process of a container, seen from this machine (needs root for /proc/<pid>/fd). */
export interface AgentChannelView {
  /** Its command line, e.g. `/.sbx-agent/sbx-agent --direct`. */
  args: string
  /** What its stdin is: `socket:[…]` on the direct channel, `pipe:[…]` on the engine's exec. */
  stdin: string
}

/** The agent channel processes of a container (not its `--init`), from `docker top` and /proc. */
export async function agentChannels(container: string): Promise<AgentChannelView[]> {
  const { stdout } = await run('docker', ['top', container, '-eo', 'pid,args'])
  const lines = stdout
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => /sbx-agent( --direct)?$/.test(l))
  return Promise.all(
    lines.map(async (line) => {
      const [pid, ...args] = line.split(/\s+/)
      return { args: args.join(' '), stdin: await readlink(`/proc/${pid}/fd/0`) }
    }),
  )
}

/** The one agent channel of a container; throws when there is none. */
export async function agentChannel(container: string): Promise<AgentChannelView> {
  const [channel] = await agentChannels(container)
  if (!channel) throw new Error(`no agent channel process in container ${container}`)
  return channel
}
