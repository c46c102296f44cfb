import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'
import type { LineChild } from '../support/sbx-cli.js'

/*
 * Issue 17, observability: each engine's live worker gateways, as `sbx engine ls` (text and --json),
 * `GET /v1/providers` and `/metrics` show them. Two workers beside the second engine, one beside the
 * main one, all with `fleet.secret`. URLs are fleet-internal: an admin key and the CLI (which holds
 * Redis) see them; a tenant's key sees the count only, and no gauge at all on /metrics.
 */
const SECRET = randomBytes(32).toString('hex')
const ADMIN = `sbx_test_adm_${randomBytes(16).toString('hex')}`
const TENANT = `sbx_test_ten_${randomBytes(16).toString('hex')}`

interface EngineLs {
  engines: { id: string; gateways: number; gatewayUrls: string[] }[]
}
interface Providers {
  providers: { id: string; engines?: { id: string; gateways?: number; gatewayUrls?: string[] }[] }[]
}

let fleet: EngineFleet
let extra: LineChild | undefined
const urlOf = (w: LineChild) =>
  /gateway for engine \S+ at (http\S+)/.exec(
    w.lines.find((l) => /gateway for engine/.test(l.text))?.text ?? '',
  )?.[1] ?? ''

beforeAll(async () => {
  fleet = await startEngineFleet('enggwshow', {
    fleet: { secret: SECRET },
    apiKeys: [
      { key: ADMIN, tenant: 'ops', admin: true },
      { key: TENANT, tenant: 'acme' },
    ],
  })
  extra = await fleet.addWorker('second')
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
}, 120_000)

const dockerOf = async (key: string) =>
  ((await (await fleet.api.fetch('/v1/providers', { key })).json()) as Providers).providers.find(
    (p) => p.id === 'docker',
  )?.engines ?? []

describe("each engine's live worker gateways", () => {
  test('sbx engine ls, /v1/providers (URLs for an admin key only) and /metrics show them', async () => {
    if (!extra) throw new Error('no second worker')
    const secondUrls = [urlOf(fleet.workers.second), urlOf(extra)].sort()
    const mainUrl = urlOf(fleet.workers.main)
    expect(secondUrls.every((u) => u.startsWith('http://'))).toBe(true)

    const ls = await fleet.engineCli(['ls', '--json'])
    expect(ls.code, ls.stderr).toBe(0)
    const byId = new Map((JSON.parse(ls.stdout) as EngineLs).engines.map((e) => [e.id, e]))
    expect(byId.get(fleet.ids.second)?.gateways).toBe(2)
    expect([...(byId.get(fleet.ids.second)?.gatewayUrls ?? [])].sort()).toEqual(secondUrls)
    expect(byId.get(fleet.ids.main)).toMatchObject({ gateways: 1, gatewayUrls: [mainUrl] })

    const text = await fleet.engineCli(['ls'])
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain(`gateways 2: `)
    for (const u of [...secondUrls, mainUrl]) expect(text.stdout).toContain(u)

    const asAdmin = new Map((await dockerOf(ADMIN)).map((e) => [e.id, e]))
    expect(asAdmin.get(fleet.ids.second)?.gateways).toBe(2)
    expect([...(asAdmin.get(fleet.ids.second)?.gatewayUrls ?? [])].sort()).toEqual(secondUrls)
    expect(asAdmin.get(fleet.ids.main)).toMatchObject({ gateways: 1, gatewayUrls: [mainUrl] })

    const tenantRes = await fleet.api.fetch('/v1/providers', { key: TENANT })
    expect(tenantRes.status).toBe(200)
    const tenantBody = await tenantRes.text()
    for (const u of [...secondUrls, mainUrl]) expect(tenantBody).not.toContain(u)
    const asTenant = new Map(
      ((JSON.parse(tenantBody) as Providers).providers.find((p) => p.id === 'docker')?.engines ?? []).map(
        (e) => [e.id, e],
      ),
    )
    expect(asTenant.get(fleet.ids.second)?.gateways).toBe(2)
    expect(asTenant.get(fleet.ids.second)).not.toHaveProperty('gatewayUrls')

    const metrics = await (await fleet.api.fetch('/metrics', { key: ADMIN })).text()
    expect(metrics).toContain(`sbx_engine_gateways{engine="${fleet.ids.second}"} 2`)
    expect(metrics).toContain(`sbx_engine_gateways{engine="${fleet.ids.main}"} 1`)
    const tenantMetrics = await (await fleet.api.fetch('/metrics', { key: TENANT })).text()
    expect(tenantMetrics).not.toContain('sbx_engine_gateways{')

    // A worker that stops cleanly removes its gateway at once: every view counts one fewer.
    await extra.stop()
    extra = undefined
    const after = (JSON.parse((await fleet.engineCli(['ls', '--json'])).stdout) as EngineLs).engines
    expect(after.find((e) => e.id === fleet.ids.second)?.gateways).toBe(1)
    expect((await dockerOf(ADMIN)).find((e) => e.id === fleet.ids.second)?.gateways).toBe(1)
    expect(await (await fleet.api.fetch('/metrics', { key: ADMIN })).text()).toContain(
      `sbx_engine_gateways{engine="${fleet.ids.second}"} 1`,
    )
  }, 120_000)
})
