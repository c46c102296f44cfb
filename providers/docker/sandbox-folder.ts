import { chmod, chown, mkdir } from 'node:fs/promises'

/**
 * Makes a sandbox's own host folder (bind-mounted into it): only the sandbox's user may enter it
 * where the service may chown (as root); otherwise others may pass through it but not list it
 * (mode 0711; its name is random).
 */
export async function makeSandboxFolder(path: string, user: string): Promise<void> {
  await mkdir(path, { mode: 0o700 })
  const owner = /^(\d+)(?::(\d+))?$/.exec(user)
  const chowned = owner
    ? await chown(path, Number(owner[1]), Number(owner[2] ?? owner[1])).then(
        () => true,
        () => false,
      )
    : false
  if (!chowned) await chmod(path, 0o711)
}
