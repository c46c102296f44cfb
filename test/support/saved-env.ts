/**
 * Remembers `keys` of process.env now; the returned function puts them back as they were (deleting
 * the ones that were unset), for suites that point an SDK at the service through its variables.
 */
export function saveEnv(keys: readonly string[]): () => void {
  const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]))
  return () => {
    for (const k of keys) {
      if (saved[k] === undefined) delete process.env[k]
      else process.env[k] = saved[k]
    }
  }
}
