import { describe, expect, test } from 'vitest'
import { buildContainerSpec } from '../../../../providers/docker/container-spec.js'
import { mapStartError } from '../../../../providers/docker/errors.js'
import { DockerProviderOptionsSchema } from '../../../../providers/docker/options.js'
import { decodeHello } from '../../../../providers/docker/protocol.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { tarOf } from '../../../../providers/docker/tar.js'

describe('docker: any image', () => {
  const opts = DockerProviderOptionsSchema.parse({})
  const profile = resolveProfile('p', { provider: 'docker', user: '1000:1000' })

  test("the image's ENTRYPOINT/CMD/WORKDIR/USER are overridden and the agent volume is mounted read-only", () => {
    const agent = {
      path: '/.sbx-agent/sbx-agent',
      volume: { name: 'sandbox-router-agent-abc', dir: '/.sbx-agent' },
    }
    const spec = buildContainerSpec(profile, 'debian:plain', {}, opts, agent)
    expect(spec.Entrypoint).toEqual(['/.sbx-agent/sbx-agent'])
    expect(spec.Cmd?.[0]).toBe('--init')
    expect(spec.WorkingDir).toBe('/')
    expect(spec.User).toBe('1000:1000')
    expect(spec.Labels?.['sandbox-router.agent-path']).toBe('/.sbx-agent/sbx-agent')
    expect(spec.HostConfig?.ReadonlyRootfs).toBe(true)
    expect(spec.HostConfig?.Mounts).toEqual([
      { Type: 'volume', Source: 'sandbox-router-agent-abc', Target: '/.sbx-agent', ReadOnly: true },
    ])
    // Without a volume: the image's own agent, no extra mount.
    const own = buildContainerSpec(profile, 'sandbox-router/base:latest', {}, opts)
    expect(own.Entrypoint).toEqual(['/usr/local/bin/sbx-agent'])
    expect(own.HostConfig?.Mounts).toBeUndefined()
  })

  test('HELLO: the flags word says whether bash is there; an agent without it had bash', () => {
    const hello = (flags?: number): Buffer => {
      const b = Buffer.alloc(flags === undefined ? 16 : 20)
      b.writeUInt32BE(3, 0)
      if (flags !== undefined) b.writeUInt32BE(flags, 16)
      return b
    }
    expect(decodeHello(hello()).hasBash).toBe(true)
    expect(decodeHello(hello(1)).hasBash).toBe(true)
    expect(decodeHello(hello(0)).hasBash).toBe(false)
  })

  test("a start that fails for a missing agent says what to do, not runc's text", () => {
    const runc = {
      statusCode: 400,
      json: {
        message:
          'failed to create shim: OCI runtime create failed: runc create failed: unable to start container process: ' +
          'exec: "/usr/local/bin/sbx-agent": stat /usr/local/bin/sbx-agent: no such file or directory: unknown',
      },
    }
    const err = mapStartError(runc, 'debian:plain', '/usr/local/bin/sbx-agent')
    expect(err.code).toBe('CONFIG_INVALID')
    expect(err.message).toMatch(/^image debian:plain has no \/usr\/local\/bin\/sbx-agent/)
    expect(err.message).not.toMatch(/runc|OCI/)
    const emptied = mapStartError(
      runc,
      'debian:plain',
      '/usr/local/bin/sbx-agent',
      'sandbox-router-agent-abc',
    )
    expect(emptied).toMatchObject({ code: 'SANDBOX_CREATE_FAILED', retryable: true })
  })

  test('tarOf: a ustar archive of one executable file', () => {
    const tar = tarOf([{ name: 'sbx-agent', data: Buffer.from('abc'), mode: 0o755 }])
    expect(tar.length).toBe(512 + 512 + 1024)
    expect(tar.toString('ascii', 0, 9)).toBe('sbx-agent')
    expect(tar.toString('ascii', 100, 107)).toBe('0000755')
    expect(tar.toString('ascii', 257, 262)).toBe('ustar')
    expect(tar.toString('ascii', 512, 515)).toBe('abc')
    let sum = 0
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : tar[i]!
    expect(parseInt(tar.toString('ascii', 148, 155), 8)).toBe(sum)
  })
})
