import type { CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams } from '@daytonaio/sdk'
import { daytonaNetwork, type Labels, type ResolvedProfile } from '../../src/sandbox/index.js'
import type { ResolvedDaytonaProviderOptions } from './options.js'

const MINUTE_MS = 60_000
const GIB_MB = 1024

/** Sandbox parameters of one create call. */
export type CreateParams = CreateSandboxFromSnapshotParams | CreateSandboxFromImageParams

/**
 * Maps a profile onto Daytona's create parameters: `snapshot` wins, else `image` with resources
 * (cpu rounded up to whole cores, memory to whole GiB), else the default snapshot. The profile's
 * env becomes the sandbox env; `network: 'none'` blocks all egress, an allowlist of IPv4 CIDRs becomes
 * `networkAllowList` (what else a policy may hold is refused at start-up). A server-side lifetime is always
 * set: auto-stop after the profile's idle TTL (or `autoStopMinutes`), then auto-delete, so a sandbox
 * whose worker died does not outlive it for long.
 */
export function buildCreateParams(
  profile: ResolvedProfile,
  labels: Labels,
  options: ResolvedDaytonaProviderOptions,
): CreateParams {
  const base = {
    labels: { ...labels },
    envVars: { ...profile.env },
    public: false,
    // Throws for a policy Daytona cannot enforce (start-up refuses such a profile first).
    ...daytonaNetwork(profile.network),
    autoStopInterval: options.autoStopMinutes ?? Math.max(1, Math.ceil(profile.idleTtlMs / MINUTE_MS)),
    autoDeleteInterval: options.autoDeleteMinutes,
    ...(options.ttlMinutes !== undefined ? { ttlMinutes: options.ttlMinutes } : {}),
  }
  if (profile.snapshot) return { ...base, snapshot: profile.snapshot }
  if (profile.image) {
    return {
      ...base,
      image: profile.image,
      resources: {
        cpu: Math.max(1, Math.ceil(profile.cpu)),
        memory: Math.max(1, Math.ceil(profile.memoryMb / GIB_MB)),
      },
    }
  }
  return options.defaultSnapshot ? { ...base, snapshot: options.defaultSnapshot } : base
}
