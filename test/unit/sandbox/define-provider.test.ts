/**
 * `defineProvider` from a provider author's side: a small provider whose "sandboxes" are bash
 * processes on this machine (a test fixture, no isolation at all), written against the public SPI
 * entry only, passes the shared conformance suite; and the edge rules defineProvider owns are
 * checked one by one on a backend that records what it was asked.
 */
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import {
  AppError,
  HeadTailSink,
  LABELS,
  OWNER,
  PROVIDER_LABELS,
  Semaphore,
  defineProvider,
  resolveExecRequest,
  resolveProfile,
  resolveSandboxPath,
} from '../../../src/sandbox/index.js'
import type {
  ExecOptions,
  ExecRequest,
  ExecResult,
  LabelSettings,
  Labels,
  ProviderBackend,
  ResolvedProfile,
  Sandbox,
  SandboxHealth,
  SandboxRef,
} from '../../../src/sandbox/index.js'
import { runProviderConformance } from '../../../src/sandbox/conformance/index.js'

/** The "backend": sandboxes this process knows, shared by every provider instance (like a remote API). */
const machine = new Map<string, { labels: Labels; env: Record<string, string> }>()

const lost = (id: string): AppError =>
  new AppError('SANDBOX_LOST', `local sandbox ${id} does not exist (destroyed?); create a new sandbox`)

/** A handle: every command is `bash -c` in its own process group, killed whole on timeout or abort. */
class LocalSandbox implements Sandbox {
  private readonly slots: Semaphore
  private closed = false

  constructor(
    readonly ref: SandboxRef,
    private readonly settings: LabelSettings,
  ) {
    this.slots = new Semaphore(settings.maxConcurrentExecs)
  }

  private entry(): { env: Record<string, string> } {
    if (this.closed) throw new AppError('BAD_REQUEST', `handle of ${this.ref.id} is closed`)
    const found = machine.get(this.ref.id)
    if (!found) throw lost(this.ref.id)
    return found
  }

  async exec(request: ExecRequest, opts: ExecOptions = {}): Promise<ExecResult> {
    opts.signal?.throwIfAborted()
    const r = resolveExecRequest(request, { cwd: this.settings.cwd, maxCommandBytes: 128 * 1024 })
    const { env } = this.entry()
    const release = await this.slots.acquire(opts.signal)
    try {
      return await this.run(r, env, opts)
    } finally {
      release()
    }
  }

  private run(
    r: ReturnType<typeof resolveExecRequest>,
    env: Record<string, string>,
    opts: ExecOptions,
  ): Promise<ExecResult> {
    const started = performance.now()
    const child = spawn('bash', ['-c', r.command], {
      cwd: r.cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: this.settings.cwd, ...env, ...r.env },
      detached: true,
    })
    const out = new HeadTailSink(r.outputCapBytes, opts.onStdout)
    const err = new HeadTailSink(r.outputCapBytes, opts.onStderr)
    child.stdout.on('data', (c: Buffer) => out.push(c))
    child.stderr.on('data', (c: Buffer) => err.push(c))
    child.stdin.on('error', () => undefined)
    child.stdin.end(r.stdin)
    const killGroup = (): void => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      killGroup()
    }, r.timeoutMs)
    return new Promise<ExecResult>((resolve, reject) => {
      const onAbort = (): void => {
        killGroup()
        reject(opts.signal?.reason)
      }
      opts.signal?.addEventListener('abort', onAbort, { once: true })
      child.on('error', (e) => reject(new AppError('BAD_REQUEST', `cannot run the command: ${e.message}`)))
      // The command's end ends what it left behind too (the group), so the pipes close.
      child.on('exit', killGroup)
      child.on('close', (code, signal) => {
        clearTimeout(timer)
        opts.signal?.removeEventListener('abort', onAbort)
        const stdout = out.finish()
        const stderr = err.finish()
        resolve({
          exitCode: signal ? null : code,
          ...(signal ? { signal } : {}),
          stdout,
          stderr,
          timedOut,
          truncated: out.truncated || err.truncated,
          durationMs: Math.round(performance.now() - started),
          sandboxId: this.ref.id,
        })
      })
    })
  }

  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    this.entry()
    const file = resolveSandboxPath(this.settings.cwd, path)
    await mkdir(dirname(file), { recursive: true })
    await writeFile(file, data)
  }

  async readFile(path: string): Promise<Uint8Array> {
    this.entry()
    const file = resolveSandboxPath(this.settings.cwd, path)
    try {
      return await readFile(file)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === 'ENOENT') throw new AppError('NOT_FOUND', `${file} does not exist`)
      throw new AppError('BAD_REQUEST', `cannot read ${file}: ${code ?? String(e)}`)
    }
  }

  health(): Promise<SandboxHealth> {
    return Promise.resolve(machine.has(this.ref.id) ? { ok: true } : { ok: false, reason: 'gone' })
  }

  close(): Promise<void> {
    this.closed = true
    return Promise.resolve()
  }
}

/** The backend of the local provider: what a third-party author writes. */
const localBackend: ProviderBackend<string, LocalSandbox> = {
  describe: (id) => `local sandbox ${id}`,
  defaultCwd: '/tmp',
  create(profile, labels) {
    const id = `local-${randomUUID()}`
    machine.set(id, { labels, env: profile.env })
    return Promise.resolve({ id, native: id })
  },
  open: (ref, _native, settings) => Promise.resolve(new LocalSandbox(ref, settings)),
  prepare: async (_handle, _native, profile) => {
    await mkdir(profile.cwd, { recursive: true })
  },
  discard: (ref) => Promise.resolve(void machine.delete(ref.id)),
  find(ref) {
    const found = machine.get(ref.id)
    if (!found) return Promise.reject(lost(ref.id))
    return Promise.resolve({ id: ref.id, labels: found.labels, native: ref.id })
  },
  // Like a backend that ignores label filters: defineProvider re-checks every answer.
  list: () => Promise.resolve([...machine].map(([id, s]) => ({ id, labels: s.labels }))),
  destroy: (ref) => Promise.resolve(void machine.delete(ref.id)),
}

const createLocalProvider = () => defineProvider({ id: 'local', instanceId: 'test', backend: localBackend })

const root = mkdtempSync(join(tmpdir(), 'sbx-define-provider-'))
afterAll(() => rm(root, { recursive: true, force: true }))

runProviderConformance('local (defineProvider over child_process)', {
  createProvider: createLocalProvider,
  profile: resolveProfile('local', {
    provider: 'local',
    cwd: join(root, 'work'),
    env: { SBX_PROFILE_VAR: 'from profile' },
    maxConcurrentExecs: 4,
  }),
  largeOutputBytes: 1024 * 1024,
  testTimeoutMs: 30_000,
})

describe('defineProvider: the edge rules', () => {
  const profile: ResolvedProfile = resolveProfile('p', { provider: 'rec', cwd: '/w', maxConcurrentExecs: 3 })
  /** A backend that records its calls; `fail` makes `prepare` throw. */
  function recording(fail?: unknown) {
    const calls: string[] = []
    const sandboxes = new Map<string, Labels>()
    const backend: ProviderBackend<string, Sandbox & { settings: LabelSettings }> = {
      describe: (id) => `rec sandbox ${id}`,
      defaultCwd: '/default',
      createLabels: () => ({ [PROVIDER_LABELS.createId]: 'c-1' }),
      create(_profile, labels) {
        calls.push('create')
        sandboxes.set('s1', labels)
        return Promise.resolve({ id: 's1', native: 'n1' })
      },
      open(ref, _native, settings) {
        calls.push(`open ${ref.id}`)
        return Promise.resolve({
          ref,
          settings,
          exec: () => Promise.reject(new Error('unused')),
          writeFile: () => Promise.resolve(),
          readFile: () => Promise.resolve(new Uint8Array()),
          health: () => Promise.resolve({ ok: true }),
          close: () => Promise.resolve(void calls.push('close')),
        })
      },
      prepare: () => (fail === undefined ? Promise.resolve() : Promise.reject(fail)),
      discard(ref, native) {
        calls.push(`discard ${ref.id} ${native}`)
        return Promise.resolve()
      },
      find(ref) {
        const labels = sandboxes.get(ref.id)
        return labels ? Promise.resolve({ id: ref.id, labels, native: 'n' }) : Promise.reject(lost(ref.id))
      },
      list: () => Promise.resolve([...sandboxes].map(([id, labels]) => ({ id, labels }))),
      destroy: () => Promise.resolve(),
    }
    return { calls, sandboxes, provider: defineProvider({ id: 'rec', instanceId: 'i-9', backend }) }
  }

  test('create stamps the labels and opens the handle with the settings', async () => {
    const { provider, calls } = recording()
    const sb = await provider.create(profile, { labels: { [LABELS.tenant]: 't' } })
    expect(sb.ref).toMatchObject({ providerId: 'rec', id: 's1', profile: 'p' })
    expect(sb.ref.labels).toMatchObject({
      [LABELS.owner]: OWNER,
      [LABELS.tenant]: 't',
      [LABELS.instance]: 'i-9',
      [PROVIDER_LABELS.createId]: 'c-1',
    })
    expect(sb.settings).toEqual({ cwd: '/w', maxConcurrentExecs: 3 })
    expect(calls).toEqual(['create', 'open s1'])
  })

  test('a foreign profile or ref is CONFIG_INVALID', async () => {
    const { provider } = recording()
    const other = resolveProfile('q', { provider: 'docker' })
    await expect(provider.create(other, { labels: {} })).rejects.toMatchObject({ code: 'CONFIG_INVALID' })
    await expect(provider.connect({ providerId: 'docker', id: 'x', profile: 'q' })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
    })
  })

  test('a half-created sandbox is closed and discarded; the error says the create failed', async () => {
    const { provider, calls } = recording(new Error('mkdir: permission denied'))
    const err = await provider.create(profile, { labels: {} }).catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'SANDBOX_CREATE_FAILED' })
    expect((err as Error).message).toMatch(/rec sandbox s1 failed: mkdir: permission denied/)
    expect(calls).toEqual(['create', 'open s1', 'close', 'discard s1 n1'])
    const config = recording(new AppError('CONFIG_INVALID', 'bad cwd'))
    await expect(config.provider.create(profile, { labels: {} })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: 'bad cwd',
    })
  })

  test('an abort after the backend made the sandbox discards it and throws the reason', async () => {
    const { provider, calls } = recording()
    const controller = new AbortController()
    const reason = new Error('stop')
    const pending = provider.create(profile, { labels: {}, signal: controller.signal })
    controller.abort(reason)
    await expect(pending).rejects.toBe(reason)
    expect(calls).toContain('discard s1 n1')
    await expect(provider.create(profile, { labels: {}, signal: AbortSignal.abort(reason) })).rejects.toBe(
      reason,
    )
  })

  test('connect refuses a sandbox without the owner label and reads the settings back', async () => {
    const { provider, sandboxes } = recording()
    sandboxes.set('foreign', { [LABELS.profile]: 'p' })
    await expect(provider.connect({ providerId: 'rec', id: 'foreign', profile: 'p' })).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: `rec sandbox foreign is not a ${OWNER} sandbox (no ${LABELS.owner} label)`,
    })
    const made = await provider.create(profile, { labels: {} })
    const again = await provider.connect({ providerId: 'rec', id: made.ref.id, profile: 'ignored' })
    expect(again.ref.profile).toBe('p')
    expect(again.settings).toEqual({ cwd: '/w', maxConcurrentExecs: 3 })
    await expect(provider.connect({ providerId: 'rec', id: 'gone', profile: 'p' })).rejects.toMatchObject({
      code: 'SANDBOX_LOST',
    })
  })

  test('list adds the owner filter and drops answers that do not match it', async () => {
    const { provider, sandboxes } = recording()
    await provider.create(profile, { labels: { a: '1' } })
    sandboxes.set('foreign', { a: '1' })
    sandboxes.set('other', { [LABELS.owner]: OWNER, a: '2' })
    expect((await provider.list({ labels: { a: '1' } })).map((r) => r.id)).toEqual(['s1'])
    expect((await provider.list({ labels: {} })).map((r) => r.id).sort()).toEqual(['other', 's1'])
  })
})
