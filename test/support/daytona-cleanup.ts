import type { DaytonaProvider } from '../../providers/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'

/** Destroys every sandbox the providers can list, closes them, then the fake (a suite's afterAll). */
export async function closeProvidersAndFake(
  providers: readonly DaytonaProvider[],
  fake: FakeDaytona | undefined,
): Promise<void> {
  for (const p of providers) {
    for (const ref of await p.list({ labels: {} }).catch(() => []))
      await p.destroy(ref).catch(() => undefined)
    await p.close()
  }
  await fake?.close()
}
