/**
 * A local stand-in for E2B that the real `e2b` SDK talks to over HTTP/1.1: the REST control plane
 * and envd on one port (envd requests are told apart by their `E2b-Sandbox-Id` header). Every
 * sandbox is a real Docker container from `sandbox-router/base`, and commands really run in it.
 *
 * ```ts
 * const fake = await startFakeE2B()
 * const provider = createE2BProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl })
 * ```
 */
import { randomBytes } from 'node:crypto'
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import Docker from 'dockerode'
import { type ApiContext, type CreateFault, handleApi } from './api-routes.js'
import { type EnvdContext, handleEnvd } from './envd-routes.js'
import { handlePreview, handlePreviewUpgrade, previewTarget } from './preview.js'
import { FAKE_LABEL, type FakeSandboxRecord, SandboxStore } from './sandboxes.js'

/** Options of {@link startFakeE2B}. */
export interface FakeE2BOptions {
  /** The key the API accepts. @default `e2b_` + 40 random hex digits */
  apiKey?: string
  /** Image of every sandbox. @default 'sandbox-router/base:latest' */
  image?: string
  /** envd version reported at create and connect (the SDK needs ≥ 0.1.0). @default '0.6.4' */
  envdVersion?: string
  /** Templates that exist (others get 404); any template when absent. */
  templates?: string[]
  /** Largest page `GET /v2/sandboxes` returns. @default 100 */
  maxPageSize?: number
  /** Echo the request's API key in 401 messages (tests that adapters redact it). @default false */
  leakKeyInErrors?: boolean
  /** Multiplies the keepalive interval the SDK asks for. @default 1 */
  keepaliveScale?: number
  docker?: Docker
}

/** One request the fake served (for assertions on what the SDK called). */
export interface FakeRequest {
  method: string
  path: string
  /** Set for envd requests. */
  sandboxId?: string
  /** Time from the request's arrival to its response's end (ms), once it ended. */
  durationMs?: number
  /** Body bytes written so far (the envelopes of a streaming call included). */
  bytesOut: number
  /** HTTP version the client used (`1.1`: the SDK's undici only negotiates HTTP/2 over TLS). */
  httpVersion: string
}

/** A running fake; see {@link startFakeE2B}. */
export interface FakeE2B {
  /** Pass as `apiUrl` (or E2B_API_URL). */
  readonly apiUrl: string
  /** Pass as `sandboxUrl` (or E2B_SANDBOX_URL). */
  readonly sandboxUrl: string
  /** Pass as `previewUrl` (or SBX_E2B_PREVIEW_URL): preview hosts are told apart by `Host` (see preview.ts). */
  readonly previewUrl: string
  readonly apiKey: string
  /** Value of the `sandbox-router.fake-e2b` label on this fake's containers. */
  readonly instanceId: string
  /** `created`, `killed` (with `killedBy`), `paused` and `lifetime` events, each with the sandbox record. */
  readonly events: SandboxStore
  /** Every request served so far, oldest first. */
  readonly requests: FakeRequest[]
  /** Fault injection. */
  readonly faults: {
    /** The next `n` creates fail with `status` (default 429), optionally with `Retry-After`. */
    failNextCreates(n: number, fault?: Partial<CreateFault>): void
    /** Removes the sandbox behind the client's back (its container too): later calls see 404 / 502. */
    vanish(sandboxId: string): Promise<void>
  }
  /** The record of one sandbox (killed ones included). */
  sandbox(sandboxId: string): FakeSandboxRecord | undefined
  /** Records of every sandbox this fake created. */
  sandboxes(): FakeSandboxRecord[]
  /** Ids of the Docker containers carrying this fake's label (running or not). */
  containers(): Promise<string[]>
  /** Kills every sandbox, removes the containers and stops the server. */
  close(): Promise<void>
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port))
  })
}

/** Starts the fake on a free port of 127.0.0.1. */
export async function startFakeE2B(options: FakeE2BOptions = {}): Promise<FakeE2B> {
  const docker = options.docker ?? new Docker()
  const instanceId = randomBytes(6).toString('hex')
  const store = new SandboxStore(docker, instanceId)
  const apiKey = options.apiKey ?? `e2b_${randomBytes(20).toString('hex')}`
  const requests: FakeRequest[] = []
  const api: ApiContext = {
    store,
    apiKey,
    image: options.image ?? 'sandbox-router/base:latest',
    envdVersion: options.envdVersion ?? '0.6.4',
    templates: options.templates ? new Set(options.templates) : undefined,
    maxPageSize: options.maxPageSize ?? 100,
    leakKeyInErrors: options.leakKeyInErrors ?? false,
    createFaults: [],
  }
  const envd: EnvdContext = { store, keepaliveScale: options.keepaliveScale ?? 1 }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    // A client that resets mid-request (a worker killed or stopped mid-call) is not the fake's failure.
    req.on('error', () => res.destroy())
    res.on('error', () => undefined)
    const started = performance.now()
    const url = new URL(req.url ?? '/', 'http://fake')
    const sandboxId = req.headers['e2b-sandbox-id']
    const entry: FakeRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      httpVersion: req.httpVersion,
      bytesOut: 0,
      ...(typeof sandboxId === 'string' ? { sandboxId } : {}),
    }
    requests.push(entry)
    const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string' || chunk instanceof Uint8Array) entry.bytesOut += Buffer.byteLength(chunk)
      return write(chunk, ...rest)
    }) as typeof res.write
    res.on('close', () => (entry.durationMs = performance.now() - started))
    if (previewTarget(req)) void handlePreview(store, req, res).catch(() => res.destroy())
    else if (typeof sandboxId === 'string') void handleEnvd(envd, sandboxId, req, res, url)
    else void handleApi(api, req, res, url)
  })
  server.keepAliveTimeout = 30_000
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // An upgraded socket has no error listener of the server's: a client reset must not go uncaught.
    socket.on('error', () => socket.destroy())
    void handlePreviewUpgrade(store, req, socket, head).catch(() => socket.destroy())
  })
  const port = await listen(server)
  const origin = `http://127.0.0.1:${port}`

  const containers = async (): Promise<string[]> =>
    (await docker.listContainers({ all: true, filters: { label: [`${FAKE_LABEL}=${instanceId}`] } })).map(
      (c) => c.Id,
    )

  return {
    apiUrl: origin,
    sandboxUrl: origin,
    previewUrl: origin,
    apiKey,
    instanceId,
    events: store,
    requests,
    faults: {
      failNextCreates(n, fault = {}) {
        for (let i = 0; i < n; i++) {
          api.createFaults.push({
            status: fault.status ?? 429,
            ...(fault.retryAfterS === undefined ? {} : { retryAfterS: fault.retryAfterS }),
          })
        }
      },
      async vanish(sandboxId) {
        const sandbox = store.get(sandboxId)
        if (sandbox) await store.kill(sandbox, 'fault')
      },
    },
    sandbox(sandboxId) {
      const sandbox = store.all().find((s) => s.sandboxId === sandboxId)
      return sandbox && store.record(sandbox)
    },
    sandboxes() {
      return store.all().map((s) => store.record(s))
    },
    containers,
    async close() {
      await store.killAll()
      await Promise.all(
        (await containers()).map((id) =>
          docker
            .getContainer(id)
            .remove({ force: true, v: true })
            .catch(() => undefined),
        ),
      )
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
