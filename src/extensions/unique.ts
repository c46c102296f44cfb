import { ExtensionError } from './errors.js'

/** Throws `duplicate <kind> interceptor id: <name>` when two interceptors of one chain share a name. */
export function assertUniqueNames(kind: string, items: readonly { name: string }[]): void {
  const seen = new Set<string>()
  for (const { name } of items) {
    if (seen.has(name)) throw new ExtensionError(`duplicate ${kind} interceptor id: ${name}`)
    seen.add(name)
  }
}
