import type Docker from 'dockerode'
import { AppError } from '../errors.js'

/**
 * Turns a `DOCKER_HOST`-style address into dockerode options: `unix:///path`, `tcp://host:port`,
 * `http(s)://host:port`, or a bare socket path.
 */
export function dockerOptionsOf(host: string | undefined): Docker.DockerOptions | undefined {
  if (!host) return undefined
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) }
  if (host.startsWith('/')) return { socketPath: host }
  const m = /^(tcp|http|https):\/\/([^:/]+)(?::(\d+))?\/?$/.exec(host)
  if (!m?.[2]) {
    throw new AppError(
      'CONFIG_INVALID',
      `DOCKER_HOST "${host}" is not unix:///path, tcp://host:port or a socket path`,
    )
  }
  return {
    protocol: m[1] === 'https' ? 'https' : 'http',
    host: m[2],
    port: Number(m[3] ?? (m[1] === 'https' ? 2376 : 2375)),
  }
}
