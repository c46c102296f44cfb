import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import type { MiddlewareHandler } from 'hono'
import type { App } from './app.js'

/**
 * Browser assets the service's own pages need, served from installed npm packages so that `/docs`
 * and the queue dashboard work on a machine without internet (no CDN, no web fonts).
 */

const require = createRequire(import.meta.url)
const packageDir = (name: string): string => dirname(require.resolve(`${name}/package.json`))

/** Path of the API reference's script (the Scalar browser bundle of `@scalar/api-reference`). */
export const DOCS_SCRIPT_PATH = '/docs/scalar.js'

let scalarBundle: Buffer | undefined
/** The Scalar standalone bundle, read once on first use. */
function readScalarBundle(): Buffer {
  // The package exports no `./package.json`; its `./style.css` sits in `dist/` beside `browser/`.
  const dist = dirname(require.resolve('@scalar/api-reference/style.css'))
  scalarBundle ??= readFileSync(join(dist, 'browser', 'standalone.js'))
  return scalarBundle
}

/** Serves the API reference's script at {@link DOCS_SCRIPT_PATH} (public, like `/docs` itself). */
export function registerDocsScript(app: App): void {
  app.get(DOCS_SCRIPT_PATH, (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8')
    c.header('Cache-Control', 'public, max-age=86400')
    return c.body(new Uint8Array(readScalarBundle()))
  })
}

/** The faces Bull Board's page asks the web for, as fontsource files (latin subset). */
const DASHBOARD_FACES = [
  { pkg: '@fontsource/ibm-plex-sans', weights: [400, 500, 600] },
  { pkg: '@fontsource/ibm-plex-mono', weights: [400, 500] },
] as const
const FONT_FILE = /^ibm-plex-(sans|mono)-latin-[456]00-normal\.woff2?$/
/** Bull Board's `<link>` to the web's font service, in its page template. */
const WEB_FONTS_LINK = /<link href="https:\/\/fonts\.googleapis\.com\/[^"]*" rel="stylesheet">/

/** The `@font-face` rules of {@link DASHBOARD_FACES}, pointing at `${basePath}/fonts/<file>`. */
function dashboardFontsCss(basePath: string): string {
  const rules: string[] = []
  for (const face of DASHBOARD_FACES) {
    for (const w of face.weights) {
      const css = readFileSync(join(packageDir(face.pkg), `latin-${w}.css`), 'utf8')
      rules.push(css.replace(/url\(\.\/files\//g, `url(${basePath}/fonts/`))
    }
  }
  return rules.join('\n')
}

/**
 * Serves the dashboard's fonts from the installed fontsource packages (`${basePath}/fonts.css` and
 * `${basePath}/fonts/<file>`), behind the same guard as the dashboard.
 */
export function registerDashboardFonts(app: App, basePath: string): void {
  let css: string | undefined
  app.get(`${basePath}/fonts.css`, (c) => {
    css ??= dashboardFontsCss(basePath)
    c.header('Content-Type', 'text/css; charset=utf-8')
    return c.body(css)
  })
  app.get(`${basePath}/fonts/:file`, (c) => {
    const file = c.req.param('file')
    const match = FONT_FILE.exec(file)
    if (!match) return c.notFound()
    const bytes = readFileSync(join(packageDir(`@fontsource/ibm-plex-${match[1]}`), 'files', file))
    c.header('Content-Type', file.endsWith('.woff2') ? 'font/woff2' : 'font/woff')
    c.header('Cache-Control', 'public, max-age=86400')
    return c.body(new Uint8Array(bytes))
  })
}

/**
 * After the dashboard answers a page, points its web-font `<link>` at the local
 * `${basePath}/fonts.css` instead (Bull Board's template names the web's font service).
 */
export function localDashboardFonts(basePath: string): MiddlewareHandler {
  return async (c, next) => {
    await next()
    if (!c.res.headers.get('content-type')?.startsWith('text/html')) return
    const html = await c.res.text()
    const headers = new Headers(c.res.headers)
    headers.delete('content-length')
    c.res = new Response(
      html.replace(WEB_FONTS_LINK, `<link href="${basePath}/fonts.css" rel="stylesheet">`),
      { status: c.res.status, headers },
    )
  }
}
