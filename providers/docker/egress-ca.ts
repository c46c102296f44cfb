import { chmod, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import {
  caBundle,
  type CaPair,
  createCa,
  SANDBOX_CA_BUNDLE_FILE,
  SANDBOX_CA_FILE,
} from '../../src/sandbox/index.js'

/** The CA key's file: beside the sandbox's egress folder, never inside it (the folder is mounted). */
const keyPath = (socketDir: string, dir: string): string => join(socketDir, `${dir}.ca-key.pem`)

/**
 * Makes the CA of a `tlsIntercept` sandbox: its certificate (and a trust bundle with it) in the
 * sandbox's egress folder, which the sandbox sees read-only; the key next to the folder, mode 0600.
 */
export async function writeSandboxCa(socketDir: string, dir: string): Promise<CaPair> {
  const ca = await createCa(dir)
  await writeFile(keyPath(socketDir, dir), ca.keyPem, { mode: 0o600 })
  for (const [file, text] of [
    [SANDBOX_CA_FILE, ca.certPem],
    [SANDBOX_CA_BUNDLE_FILE, caBundle(ca)],
  ] as const) {
    await writeFile(join(socketDir, dir, file), text)
    await chmod(join(socketDir, dir, file), 0o644)
  }
  return ca
}

/** The CA of a sandbox another process made (for taking its proxy socket over). */
export async function readSandboxCa(socketDir: string, dir: string): Promise<CaPair> {
  const [certPem, keyPem] = await Promise.all([
    readFile(join(socketDir, dir, SANDBOX_CA_FILE), 'utf8'),
    readFile(keyPath(socketDir, dir), 'utf8'),
  ])
  return { certPem, keyPem }
}

/** Removes the CA key of a sandbox (its folder goes separately). */
export async function removeSandboxCa(socketDir: string, dir: string): Promise<void> {
  await rm(keyPath(socketDir, dir), { force: true })
}
