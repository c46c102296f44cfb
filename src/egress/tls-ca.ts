import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { isIP } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { rootCertificates } from 'node:tls'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Where an intercepting sandbox finds its CA (inside its egress folder, mounted read-only). */
export const SANDBOX_CA_FILE = 'ca.crt'
/** The CA together with Node's bundled roots: the trust store an intercepting sandbox is pointed at. */
export const SANDBOX_CA_BUNDLE_FILE = 'ca-bundle.crt'

/** A CA's certificate and key (PEM). The key stays on the service's machine. */
export interface CaPair {
  certPem: string
  keyPem: string
}

/** A leaf certificate and key (PEM) for one host. */
export interface LeafPair {
  certPem: string
  keyPem: string
}

const DAYS = '30'

async function openssl(args: readonly string[]): Promise<void> {
  try {
    await run('openssl', args, { timeout: 30_000 })
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string }
    if (e.code === 'ENOENT')
      throw new Error('TLS interception needs the openssl command on the service machine; install openssl', {
        cause: err,
      })
    throw new Error(`openssl ${args[0]} failed: ${(e.stderr ?? e.message).trim()}`, { cause: err })
  }
}

async function inTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'sbx-egress-ca-'))
  try {
    return await fn(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** Makes a new CA (P-256, 30 days), named for the sandbox it serves. */
export function createCa(name: string): Promise<CaPair> {
  return inTempDir(async (dir) => {
    const key = join(dir, 'ca.key')
    const cert = join(dir, 'ca.crt')
    await openssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      DAYS,
      '-subj',
      `/O=sandbox-router/CN=sbx egress CA ${name.replace(/[^\w.-]/g, '')}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE,pathlen:0',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ])
    return { certPem: await readFile(cert, 'utf8'), keyPem: await readFile(key, 'utf8') }
  })
}

/** Mints a server certificate for `host` (a name or an IP literal), signed by `ca`. */
export function createLeaf(ca: CaPair, host: string): Promise<LeafPair> {
  return inTempDir(async (dir) => {
    const [caCert, caKey, key, csr, cert, ext] = ['ca.crt', 'ca.key', 'l.key', 'l.csr', 'l.crt', 'l.ext'].map(
      (f) => join(dir, f),
    ) as [string, string, string, string, string, string]
    await writeFile(caCert, ca.certPem)
    await writeFile(caKey, ca.keyPem, { mode: 0o600 })
    const san = isIP(host) ? `IP:${host}` : `DNS:${host}`
    await writeFile(
      ext,
      `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
    )
    const cn = host.slice(0, 64)
    await openssl(
      ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'].concat([
        '-keyout',
        key,
        '-out',
        csr,
        '-subj',
        `/CN=${cn}`,
      ]),
    )
    await openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      caCert,
      '-CAkey',
      caKey,
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-days',
      DAYS,
      '-extfile',
      ext,
      '-out',
      cert,
    ])
    return { certPem: await readFile(cert, 'utf8'), keyPem: await readFile(key, 'utf8') }
  })
}

/** The trust bundle put into an intercepting sandbox: Node's bundled roots plus the sandbox's CA. */
export function caBundle(ca: CaPair): string {
  return `${rootCertificates.join('\n')}\n${ca.certPem}`
}
