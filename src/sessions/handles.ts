import type { Sandbox, SandboxProvider, SandboxRef } from '../sandbox/types.js'

interface Entry {
  readonly handle: Promise<Sandbox>
  users: number
  lastUsedAt: number
}

/**
 * Live sandbox handles of this process, one per sandbox: a worker opens one channel per sandbox
 * and shares it between calls, instead of connecting on every acquire.
 */
export class HandleCache {
  private readonly entries = new Map<string, Entry>()

  get size(): number {
    return this.entries.size
  }

  /** Caches a handle obtained elsewhere (a create). */
  put(sandbox: Sandbox): void {
    const old = this.entries.get(sandbox.ref.id)
    if (old) return
    this.entries.set(sandbox.ref.id, { handle: Promise.resolve(sandbox), users: 0, lastUsedAt: Date.now() })
  }

  /** The cached handle, or a new connection (shared by concurrent callers); counts a user until {@link unuse}. */
  async use(ref: SandboxRef, provider: SandboxProvider, signal?: AbortSignal): Promise<Sandbox> {
    let entry = this.entries.get(ref.id)
    if (!entry) {
      const handle = provider.connect(ref, { signal })
      entry = { handle, users: 0, lastUsedAt: Date.now() }
      this.entries.set(ref.id, entry)
      const created = entry
      // A failed connect must not poison the cache: the next caller tries again.
      void handle.catch(() => {
        if (this.entries.get(ref.id) === created) this.entries.delete(ref.id)
      })
    }
    entry.users++
    entry.lastUsedAt = Date.now()
    try {
      return await entry.handle
    } catch (err) {
      entry.users--
      throw err
    }
  }

  /** Ends one use started by {@link use}. */
  unuse(refId: string): void {
    const entry = this.entries.get(refId)
    if (!entry) return
    entry.users = Math.max(0, entry.users - 1)
    entry.lastUsedAt = Date.now()
  }

  /** Closes and forgets the handle of a sandbox (destroyed, lost, or no longer ours). */
  async drop(refId: string): Promise<void> {
    const entry = this.entries.get(refId)
    if (!entry) return
    this.entries.delete(refId)
    await closeQuietly(entry.handle)
  }

  /** Closes handles nobody used for `idleMs`; the sandboxes stay. */
  async closeIdle(now: number, idleMs: number): Promise<void> {
    const idle = [...this.entries].filter(([, e]) => e.users === 0 && now - e.lastUsedAt >= idleMs)
    await Promise.all(idle.map(([id]) => this.drop(id)))
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.entries.keys()].map((id) => this.drop(id)))
  }
}

async function closeQuietly(handle: Promise<Sandbox>): Promise<void> {
  try {
    await (await handle).close()
  } catch {
    // A handle that failed to open or to close holds nothing to release.
  }
}
