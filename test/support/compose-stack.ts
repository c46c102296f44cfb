/*
 * The compose stack as a user runs it: `docker-compose -p <project> -f docker-compose.yml
 * -f docker-compose.docker-engine.yml …` (Debian's docker-compose 1.29, or `docker compose`), with a
 * project name of its own, driven over HTTP only.
 */
import { execFile, spawnSync } from 'node:child_process'
import { statSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import type { AddressInfo, Server, Socket } from 'node:net'
import { promisify } from 'node:util'
import { ROOT } from './redis-child.js'

const run = promisify(execFile)

/** The compose files of the fleet docs/deploy.md deploys: the stack plus the engine opt-in. */
export const COMPOSE_FILES = ['docker-compose.yml', 'docker-compose.docker-engine.yml'] as const

/** `docker-compose` (1.29) or `docker compose` (v2), whichever answers `version` here. */
export function composeTool(): string[] {
  for (const cmd of [['docker-compose'], ['docker', 'compose']]) {
    const [bin = '', ...rest] = cmd
    const r = spawnSync(bin, [...rest, 'version'], { encoding: 'utf8', timeout: 30_000 })
    if (r.status === 0) return cmd
  }
  throw new Error('no compose tool: install Debian’s docker-compose (apt-get install docker-compose)')
}

/** The group owning the engine socket (the opt-in file's DOCKER_SOCKET_GID). */
export function socketGid(): string {
  return String(statSync('/var/run/docker.sock').gid)
}

/** One compose project: runs compose commands with its name, files and environment. */
export class ComposeStack {
  private readonly tool = composeTool()
  constructor(
    readonly project: string,
    readonly env: Record<string, string>,
  ) {}

  /** `compose -p <project> -f … <args>`; rejects with compose's stderr on failure. */
  async compose(args: readonly string[], timeoutMs = 300_000): Promise<string> {
    const [bin = '', ...rest] = this.tool
    try {
      const { stdout } = await run(
        bin,
        [...rest, '-p', this.project, ...COMPOSE_FILES.flatMap((f) => ['-f', f]), ...args],
        {
          cwd: ROOT,
          env: { ...process.env, ...this.env },
          timeout: timeoutMs,
          maxBuffer: 64 * 1024 * 1024,
        },
      )
      return stdout
    } catch (err) {
      const e = err as Error & { stderr?: string }
      throw new Error(`compose ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`, { cause: err })
    }
  }

  /** Container ids of one service. */
  async containers(service: string): Promise<string[]> {
    return (await this.compose(['ps', '-q', service])).split('\n').filter(Boolean)
  }

  /** The project's containers with their state and ports, then its logs (for failure messages). */
  async logs(): Promise<string> {
    const ps = await this.compose(['ps']).catch((e: Error) => e.message)
    const logs = await this.compose(['logs', '--no-color', '--tail', '200']).catch((e: Error) => e.message)
    return `${ps}\n${logs}`
  }

  /** Objects of `docker <kind> ls` still labelled with this project. */
  async leftovers(): Promise<Record<'containers' | 'networks' | 'volumes', string[]>> {
    const label = `label=com.docker.compose.project=${this.project}`
    const list = async (args: string[]): Promise<string[]> =>
      (await run('docker', args)).stdout.split('\n').filter(Boolean)
    return {
      containers: await list(['ps', '-aq', '--filter', label]),
      networks: await list(['network', 'ls', '-q', '--filter', label]),
      volumes: await list(['volume', 'ls', '-q', '--filter', label]),
    }
  }

  /** The gateway address of the project's default network (the host, as its containers reach it). */
  async gateway(): Promise<string> {
    const { stdout } = await run('docker', [
      'network',
      'inspect',
      `${this.project}_default`,
      '-f',
      '{{range .IPAM.Config}}{{.Gateway}}{{end}}',
    ])
    const ip = stdout.trim()
    if (!/^\d+\.\d+\.\d+\.\d+$/.test(ip)) throw new Error(`no gateway for ${this.project}_default: "${ip}"`)
    return ip
  }
}

/**
 * A TCP relay listening on `host` (port 0) to `127.0.0.1:targetPort`: makes a loopback-only server
 * (the fake model) reachable from the project's containers through the network's gateway.
 */
export async function relay(
  host: string,
  targetPort: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((inbound) => {
    const outbound = connect(targetPort, '127.0.0.1')
    for (const s of [inbound, outbound]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => s.destroy())
    }
    inbound.pipe(outbound).pipe(inbound)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, host, resolve)
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** Calls `probe` until it returns a value (not undefined) or `timeoutMs` passes; each try waits on its answer. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: string
  for (;;) {
    try {
      const v = await probe()
      if (v !== undefined) return v
      last = 'answered, not yet as expected'
    } catch (err) {
      last = `failed: ${String(err)}`
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms (last probe ${last})`)
    // Between probes of a service that is starting up: its answer is what is waited on.
    await new Promise((r) => setTimeout(r, 250))
  }
}
