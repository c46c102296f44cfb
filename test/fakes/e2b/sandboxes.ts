/**
 * The fake control plane's sandboxes: each one is a real Docker container (labelled with the fake's
 * instance id so tests can find and remove leftovers), with E2B's lifetime rules: a timeout from
 * now, reset by `POST /sandboxes/{id}/timeout`, only extended by `connect`, and on expiry the
 * sandbox is killed (or paused when created with `autoPause`).
 */
import { randomBytes } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { mkdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { EgressProxy } from '../../../src/egress/proxy.js'
import type { FakeProcess } from './processes.js'

/** Label on every container of a fake; its value is the fake's instance id. */
export const FAKE_LABEL = 'sandbox-router.fake-e2b'
/** Label carrying the fake sandbox id. */
export const FAKE_SANDBOX_LABEL = 'sandbox-router.fake-e2b.sandbox'

/** What the fake records about one sandbox (tests read it through `fake.sandbox(id)`). */
export interface FakeSandboxRecord {
  sandboxId: string
  templateId: string
  containerId: string
  metadata: Record<string, string>
  envVars: Record<string, string>
  /** The lifetime asked for at create (ms); E2B counts whole seconds. */
  timeoutMs: number
  autoPause: boolean
  allowInternetAccess: boolean | undefined
  /** `network.allowOut` / `network.denyOut` of the create request, as sent. */
  allowOut?: string[]
  denyOut?: string[]
  startedAt: Date
  endAt: Date
  state: 'running' | 'paused' | 'killed'
  /** Why it is gone: `api` (DELETE), `timeout` (lifetime over), `fault` (vanished by a test). */
  killedBy?: 'api' | 'timeout' | 'fault'
  envdAccessToken: string
  /** Set on a sandbox created with `network.allowPublicTraffic: false`: its preview hosts then need it. */
  trafficAccessToken?: string
  /** How many times its lifetime was set after create (timeout and connect calls). */
  timeoutUpdates: number
}

/** A live sandbox: its record plus its container and processes. */
export interface FakeSandbox extends FakeSandboxRecord {
  container: Docker.Container
  processes: Map<number, FakeProcess>
  timer?: NodeJS.Timeout
}

/** Events of {@link SandboxStore}, each with the record: `lifetime` when a timeout or connect call set it. */
export interface SandboxStoreEvents {
  created: [FakeSandboxRecord]
  killed: [FakeSandboxRecord]
  paused: [FakeSandboxRecord]
  lifetime: [FakeSandboxRecord]
}

/** Options of a new sandbox. */
export interface NewSandbox {
  templateId: string
  image: string
  metadata: Record<string, string>
  envVars: Record<string, string>
  timeoutMs: number
  autoPause: boolean
  allowInternetAccess: boolean | undefined
  /** `network.allowOut` / `network.denyOut` of the create request. */
  allowOut?: string[]
  denyOut?: string[]
  /** `network.allowPublicTraffic` of the create request. @default true */
  allowPublicTraffic?: boolean
}

/** Holds the fake's sandboxes and their containers. */
export class SandboxStore extends EventEmitter<SandboxStoreEvents> {
  private readonly sandboxes = new Map<string, FakeSandbox>()

  /** Enforces allowlist sandboxes (allowOut with everything else denied), as E2B's own proxy would. */
  private readonly egress = new EgressProxy()
  private readonly egressDir: string

  constructor(
    private readonly docker: Docker,
    readonly instanceId: string,
  ) {
    super()
    this.egressDir = join(tmpdir(), `sbx-fake-e2b-${instanceId}`)
  }

  /**
   * How the sandbox's network is enforced: no network unless internet access is on; with
   * `denyOut` of all traffic and an `allowOut`, only those destinations, through the egress proxy
   * (names on ports 80/443, addresses on any port, like E2B).
   */
  private network(spec: NewSandbox): 'none' | 'bridge' | { allow: string[] } {
    const denyAll = spec.allowInternetAccess === false || (spec.denyOut ?? []).includes('0.0.0.0/0')
    if (denyAll && spec.allowOut?.length) return { allow: spec.allowOut }
    if (denyAll || spec.allowInternetAccess !== true) return 'none'
    return 'bridge'
  }

  private async egressSpec(
    sandboxId: string,
    allow: string[],
  ): Promise<Partial<Docker.ContainerCreateOptions> & { HostConfig: Docker.HostConfig }> {
    const dir = join(this.egressDir, sandboxId)
    await mkdir(dir, { recursive: true, mode: 0o755 })
    await this.egress.listen(join(dir, 'proxy.sock'), {
      tenant: 'fake-e2b',
      session: sandboxId,
      sandboxId,
      policy: { allow, secrets: {}, tlsIntercept: false },
    })
    const proxy = 'http://127.0.0.1:3128'
    return {
      Entrypoint: ['/usr/local/bin/sbx-agent'],
      Cmd: ['--init', '--egress-forward', '3128', '/run/sbx-egress/proxy.sock'],
      Env: [`HTTP_PROXY=${proxy}`, `HTTPS_PROXY=${proxy}`, `http_proxy=${proxy}`, `https_proxy=${proxy}`],
      HostConfig: { NetworkMode: 'none', Binds: [`${dir}:/run/sbx-egress:ro`] },
    }
  }

  /** Starts a container and registers the sandbox. */
  async create(spec: NewSandbox): Promise<FakeSandbox> {
    const sandboxId = `i${randomBytes(10).toString('hex')}`
    const network = this.network(spec)
    const { HostConfig: egressHost, ...egressSpec } =
      typeof network === 'object' ? await this.egressSpec(sandboxId, network.allow) : { HostConfig: {} }
    const container = await this.docker.createContainer({
      Image: spec.image,
      // Another image (e.g. the dev image, for the code interpreter) may not keep running by itself:
      // hold it up the way envd holds up a real sandbox.
      ...(spec.image.startsWith('sandbox-router/base') ? {} : { Cmd: ['sleep', 'infinity'] }),
      Labels: { [FAKE_LABEL]: this.instanceId, [FAKE_SANDBOX_LABEL]: sandboxId },
      Hostname: 'e2b',
      ...egressSpec,
      HostConfig: {
        NetworkMode: network === 'bridge' ? 'bridge' : 'none',
        ...egressHost,
        Memory: 512 * 1024 * 1024,
        PidsLimit: 512,
        Init: false,
        AutoRemove: false,
        LogConfig: { Type: 'none', Config: {} },
      },
    })
    try {
      await container.start()
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined)
      throw err
    }
    const now = new Date()
    const sandbox: FakeSandbox = {
      sandboxId,
      templateId: spec.templateId,
      containerId: container.id,
      metadata: spec.metadata,
      envVars: spec.envVars,
      timeoutMs: spec.timeoutMs,
      autoPause: spec.autoPause,
      allowInternetAccess: spec.allowInternetAccess,
      ...(spec.allowOut ? { allowOut: spec.allowOut } : {}),
      ...(spec.denyOut ? { denyOut: spec.denyOut } : {}),
      startedAt: now,
      endAt: now,
      state: 'running',
      envdAccessToken: randomBytes(16).toString('hex'),
      ...(spec.allowPublicTraffic === false ? { trafficAccessToken: randomBytes(16).toString('hex') } : {}),
      timeoutUpdates: 0,
      container,
      processes: new Map(),
    }
    this.sandboxes.set(sandboxId, sandbox)
    this.setLifetime(sandbox, spec.timeoutMs)
    this.emit('created', this.record(sandbox))
    return sandbox
  }

  /** A sandbox that is not killed (running or paused). */
  get(sandboxId: string): FakeSandbox | undefined {
    const sandbox = this.sandboxes.get(sandboxId)
    return sandbox && sandbox.state !== 'killed' ? sandbox : undefined
  }

  /** Every sandbox ever created by this fake, killed ones included, oldest first. */
  all(): FakeSandbox[] {
    return [...this.sandboxes.values()]
  }

  /** A copy of the public record (no container handle). */
  record(sandbox: FakeSandbox): FakeSandboxRecord {
    const { container: _c, processes: _p, timer: _t, ...rest } = sandbox
    return { ...rest, metadata: { ...rest.metadata }, envVars: { ...rest.envVars } }
  }

  /** Sets the lifetime of a running sandbox to `ms` from now, as asked by a timeout or connect call. */
  updateLifetime(sandbox: FakeSandbox, ms: number): void {
    this.setLifetime(sandbox, ms)
    sandbox.timeoutUpdates++
    this.emit('lifetime', this.record(sandbox))
  }

  /** Sets the lifetime to `ms` from now (E2B rounds to whole seconds). */
  setLifetime(sandbox: FakeSandbox, ms: number): void {
    clearTimeout(sandbox.timer)
    const seconds = Math.max(1, Math.ceil(ms / 1000))
    sandbox.endAt = new Date(Date.now() + seconds * 1000)
    sandbox.timer = setTimeout(() => void this.expire(sandbox), seconds * 1000)
    sandbox.timer.unref()
  }

  private async expire(sandbox: FakeSandbox): Promise<void> {
    if (sandbox.state !== 'running') return
    if (sandbox.autoPause) {
      sandbox.state = 'paused'
      await sandbox.container.pause().catch(() => undefined)
      this.emit('paused', this.record(sandbox))
      return
    }
    await this.kill(sandbox, 'timeout')
  }

  /** Resumes a paused sandbox. */
  async resume(sandbox: FakeSandbox): Promise<void> {
    if (sandbox.state !== 'paused') return
    await sandbox.container.unpause()
    sandbox.state = 'running'
  }

  /** Kills the sandbox and removes its container. */
  async kill(sandbox: FakeSandbox, by: 'api' | 'timeout' | 'fault'): Promise<void> {
    if (sandbox.state === 'killed') return
    sandbox.state = 'killed'
    sandbox.killedBy = by
    clearTimeout(sandbox.timer)
    await sandbox.container.remove({ force: true, v: true }).catch(() => undefined)
    await this.egress.close(join(this.egressDir, sandbox.sandboxId, 'proxy.sock'))
    this.emit('killed', this.record(sandbox))
  }

  /** Kills every sandbox (fake shutdown). */
  async killAll(): Promise<void> {
    await Promise.all(this.all().map((s) => this.kill(s, 'api')))
    await this.egress.closeAll()
    await rm(this.egressDir, { recursive: true, force: true })
  }
}
