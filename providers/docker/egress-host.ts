import { randomUUID } from 'node:crypto'
import { mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import {
  AppError,
  type EgressPolicy,
  EgressPolicySchema,
  LABELS,
  type Labels,
  PROVIDER_LABELS,
  type ResolvedProfile,
} from '../../src/sandbox/index.js'
import { readSandboxCa, removeSandboxCa, writeSandboxCa } from './egress-ca.js'
import { makeSandboxFolder } from './sandbox-folder.js'
import type { DockerEgressOptions } from './options.js'

/** The egress allowlist of a profile (`network: { allow }`), if it has one. */
export const egressPolicyOf = (profile: ResolvedProfile): EgressPolicy | undefined =>
  typeof profile.network === 'object' ? profile.network : undefined

/**
 * The host side of egress-allowlist sandboxes: each has a folder (named by its `egress-dir` label)
 * under the proxy's socket dir, holding the proxy socket the sandbox talks through (and its CA).
 */
export interface EgressHost {
  /** The labels of a new sandbox with `policy`: its folder's name, and the policy `connect` reads. */
  labels(policy: EgressPolicy): Labels
  /**
   * Makes the folder of a new sandbox (and its CA); `CONFIG_INVALID` when this provider has no
   * egress proxy. Returns the folder's host path.
   */
  makeFolder(profile: ResolvedProfile, labels: Labels, policy: EgressPolicy): Promise<string>
  /** Starts (or takes over) the proxy listener of the sandbox with these labels. */
  listen(id: string, labels: Labels, policy: EgressPolicy): Promise<void>
  /** Takes over the listener of a sandbox another process made (or this one before a restart). */
  takeOver(id: string, labels: Labels): Promise<void>
  /** Stops the listener and removes the folder (and the CA); nothing for a sandbox without one. */
  drop(labels: Labels | undefined): Promise<void>
}

/** The {@link EgressHost} of a provider with (or without) an egress proxy. */
export function egressHost(egress: DockerEgressOptions | undefined): EgressHost {
  const socket = (dir: string): string => join(egress?.socketDir ?? '', dir, 'proxy.sock')

  async function makeFolder(profile: ResolvedProfile, labels: Labels, policy: EgressPolicy): Promise<string> {
    const dir = labels[PROVIDER_LABELS.egressDir]
    if (!egress || !dir)
      throw new AppError(
        'CONFIG_INVALID',
        `profile '${profile.name}' has an egress allowlist but this Docker provider has no egress proxy; run it through the service (sbx serve / sbx worker), which starts one`,
      )
    const hostDir = join(egress.socketDir, dir)
    await mkdir(egress.socketDir, { recursive: true, mode: 0o711 })
    // Other host users cannot borrow its egress or secrets.
    await makeSandboxFolder(hostDir, profile.user)
    if (policy.tlsIntercept) await writeSandboxCa(egress.socketDir, dir)
    return hostDir
  }

  async function listen(id: string, labels: Labels, policy: EgressPolicy): Promise<void> {
    const dir = labels[PROVIDER_LABELS.egressDir]
    if (!egress || !dir) return
    const tenant = labels[LABELS.tenant] ?? ''
    const cap = egress.tenantCaps?.[tenant]
    const ca = policy.tlsIntercept ? await readSandboxCa(egress.socketDir, dir) : undefined
    await egress.proxy.listen(socket(dir), {
      tenant,
      session: labels[LABELS.session] ?? '',
      sandboxId: id,
      policy,
      ...(cap ? { cap } : {}),
      ...(ca ? { ca } : {}),
    })
  }

  async function takeOver(id: string, labels: Labels): Promise<void> {
    const policyText = labels[PROVIDER_LABELS.egressPolicy]
    const dir = labels[PROVIDER_LABELS.egressDir]
    if (policyText !== undefined && dir && !egress?.proxy.has(socket(dir))) {
      await listen(id, labels, EgressPolicySchema.parse(JSON.parse(policyText)))
    }
  }

  async function drop(labels: Labels | undefined): Promise<void> {
    const dir = labels?.[PROVIDER_LABELS.egressDir]
    if (!egress || !dir) return
    await egress.proxy.close(socket(dir))
    await rm(join(egress.socketDir, dir), { recursive: true, force: true })
    await removeSandboxCa(egress.socketDir, dir)
  }

  return {
    labels: (policy) => ({
      [PROVIDER_LABELS.egressDir]: randomUUID(),
      [PROVIDER_LABELS.egressPolicy]: JSON.stringify(policy),
    }),
    makeFolder,
    listen,
    takeOver,
    drop,
  }
}
