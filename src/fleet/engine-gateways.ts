import type { EngineDirectory, EngineView } from '../queue/engines/engine-directory.js'

/** An engine as its workers last reported it, with the URLs of its live worker gateways. */
export type EngineWithGateways = EngineView & {
  /**
   * The gateways (`fleet.gateway`) of the engine's live workers: each URL a healthy heartbeat
   * renewed within `engineStaleMs`. Fleet-internal: show them to operators (`sbx engine ls`, an
   * admin key), never to a tenant's key.
   */
  readonly gatewayUrls: string[]
}

/**
 * Every engine of the fleet with its live worker gateways (for `sbx engine ls`, `GET /v1/providers`
 * and the `sbx_engine_gateways` gauge). An engine whose gateways cannot be read counts none; a
 * failing list reads as no engines, so an observer never fails on Redis hiccups.
 */
export async function engineViews(
  engines: Pick<EngineDirectory, 'list' | 'gateways'>,
): Promise<EngineWithGateways[]> {
  const list = await engines.list().catch(() => [] as EngineView[])
  return Promise.all(
    list.map(async (e) => ({
      ...e,
      gatewayUrls: await engines.gateways(e.id).catch(() => [] as string[]),
    })),
  )
}
