import type Docker from 'dockerode'
import { AppError, type SandboxRuntime } from '../../src/sandbox/index.js'
import { mapEngineError } from './errors.js'

/** How to give an engine the gVisor runtime (what `scripts/setup-gvisor.sh` does). */
export const RUNSC_INSTALL_HINT =
  'install gVisor and register it with the engine: run scripts/setup-gvisor.sh as root ' +
  '(it installs the Debian package runsc, adds "runsc" with runtimeArgs ["--network=none", "--host-uds=open"] to ' +
  '/etc/docker/daemon.json "runtimes" and reloads dockerd with SIGHUP, leaving running containers alone)'

/** Names of the runtimes the engine offers (`docker info` `.Runtimes`), sorted. */
export async function engineRuntimes(docker: Docker): Promise<string[]> {
  let info: { Runtimes?: Record<string, unknown> }
  try {
    info = (await docker.info()) as { Runtimes?: Record<string, unknown> }
  } catch (err) {
    throw mapEngineError(err, 'listing the engine runtimes')
  }
  return Object.keys(info.Runtimes ?? {}).sort()
}

/** `CONFIG_INVALID` for a profile whose runtime the engine lacks, saying how to install it. */
export function missingRuntimeError(
  profile: string,
  runtime: SandboxRuntime,
  offered: readonly string[],
  cause?: unknown,
): AppError {
  const how = runtime === 'runsc' ? RUNSC_INSTALL_HINT : `register runtime "${runtime}" with the engine`
  return new AppError(
    'CONFIG_INVALID',
    `profile '${profile}' asks for runtime '${runtime}', which the Docker engine does not offer ` +
      `(it has: ${offered.join(', ') || 'none'}); ${how}`,
    { cause },
  )
}
