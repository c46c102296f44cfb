import { chromium } from 'playwright-core'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * The service's own pages work without internet: `/docs` (the Scalar API reference) and the queue
 * dashboard load every asset from the service, in a real browser (Debian's headless Chromium, which
 * scripts/setup.sh installs) whose requests off this machine are refused and recorded.
 */
const CHROMIUM = process.env['SBX_CHROMIUM'] ?? '/usr/bin/chromium'
const scope = uniqueName('offline')
let api: SbxServer
let browser: Browser

beforeAll(async () => {
  // The queue dashboard shows BullMQ queues: it is mounted under the `bullmq` driver only.
  api = await startSbxServer('api', { config: fleetConfig(scope, { queue: { driver: 'bullmq' } }) })
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  })
}, 180_000)

afterAll(async () => {
  await browser?.close()
  await api?.stop()
  await removeScope(scope)
}, 60_000)

/** A page whose requests to any host but the service are aborted and listed in `offMachine`. */
async function offlinePage(): Promise<{ page: Page; offMachine: string[]; failed: string[] }> {
  const context = await browser.newContext()
  const page = await context.newPage()
  const offMachine: string[] = []
  const failed: string[] = []
  const origin = new URL(api.url).origin
  await page.route('**/*', async (route) => {
    const url = route.request().url()
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue()
    offMachine.push(url)
    return route.abort('internetdisconnected')
  })
  page.on('response', (r) => {
    if (r.url().startsWith(origin) && r.status() >= 400) failed.push(`${r.status()} ${r.url()}`)
  })
  return { page, offMachine, failed }
}

describe('pages of the service without internet', () => {
  test('/docs renders the API reference from the service alone and lists the operations', async () => {
    const { page, offMachine, failed } = await offlinePage()
    await page.goto(`${api.url}/docs`)
    // Operation summaries from the OpenAPI document, rendered by the Scalar bundle.
    await page.getByText('Server-sent events', { exact: false }).first().waitFor({ timeout: 60_000 })
    const text = (await page.locator('body').innerText()).replace(/\s+/g, ' ').replace(/`/g, '')
    // Every operation of the service's OpenAPI document is listed by its summary.
    const doc = (await (await fetch(`${api.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { summary?: string }>>
    }
    const summaries = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops).flatMap((op) => (op.summary ? [op.summary.replace(/\s+/g, ' ')] : [])),
    )
    expect(summaries.length).toBeGreaterThan(10)
    expect(summaries.filter((s) => !text.includes(s.replace(/`/g, '')))).toEqual([])
    expect(offMachine).toEqual([])
    expect(failed).toEqual([])
    await page.context().close()
  }, 120_000)

  test('the queue dashboard loads its scripts, styles and fonts from the service', async () => {
    const { page, offMachine, failed } = await offlinePage()
    const fonts: string[] = []
    page.on('response', (r) => {
      if (/\/fonts\//.test(r.url()) && r.ok()) fonts.push(r.url())
    })
    // ?key= once: the dashboard trades it for a session cookie (a browser cannot send a bearer header).
    await page.goto(`${api.url}/admin/queues?key=${encodeURIComponent(api.key)}`)
    // Both of the fleet's queues are on the board (exec jobs and agent runs).
    await page.getByText('sbx-agent-runs', { exact: false }).first().waitFor({ timeout: 60_000 })
    await page.getByText('sbx-exec', { exact: false }).first().waitFor({ timeout: 60_000 })
    // Evaluated in the page (a string: this file is typed for Node, without the DOM's types).
    const loaded = (await page.evaluate(
      `document.fonts.ready.then(() => [...document.fonts].filter((f) => f.status === 'loaded').map((f) => f.family))`,
    )) as string[]
    expect(loaded.join(',')).toContain('IBM Plex Sans')
    expect(fonts.length).toBeGreaterThan(0)
    expect(offMachine).toEqual([])
    expect(failed).toEqual([])
    await page.context().close()
  }, 120_000)
})
