import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { Sandbox } from '../../../../src/sandbox/types.js'
import { dockerFixture, quick, rejectionOf } from '../../../support/docker-fixture.js'

const fx = dockerFixture()
let sb: Sandbox

beforeAll(async () => {
  sb = await fx.create({ memoryMb: 256, diskMb: 64, tmpMb: 32, cpu: 0.5, pidsLimit: 100 })
})

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
})

const run = (command: string) => sb.exec({ ...quick, command })

describe('docker provider hardening', () => {
  test('docker inspect shows the hardened host config and labels', async () => {
    const info = await fx.provider.docker.getContainer(sb.ref.id).inspect()
    const hc = info.HostConfig
    expect(hc.NetworkMode).toBe('none')
    expect(hc.CapDrop).toEqual(['ALL'])
    expect(hc.CapAdd ?? []).toEqual([])
    expect(hc.SecurityOpt).toContain('no-new-privileges')
    expect(hc.ReadonlyRootfs).toBe(true)
    expect(hc.Privileged).toBe(false)
    expect(hc.PidsLimit).toBe(100)
    // The processes' 256 MiB plus the two tmpfs mounts (64 + 32), which are memory too.
    expect(hc.Memory).toBe((256 + 64 + 32) * 1024 * 1024)
    expect(hc.MemorySwap).toBe((256 + 64 + 32) * 1024 * 1024)
    expect(hc.Tmpfs?.['/workspace']).toMatch(/size=64m/)
    expect(hc.Tmpfs?.['/tmp']).toMatch(/size=32m/)
    expect(hc.NanoCpus).toBe(500_000_000)
    expect(Object.keys(hc.Tmpfs ?? {}).sort()).toEqual(['/tmp', '/workspace'])
    expect(info.Config.User).toBe('1000:1000')
    expect(info.Config.Labels).toMatchObject({ ...fx.labels, 'sandbox-router.owner': 'sandbox-router' })
  })

  test('commands run as uid 1000 with no capabilities and no-new-privileges', async () => {
    expect((await run('id -u; id -g')).stdout).toBe('1000\n1000\n')
    const status = (await run('grep -E "^(CapEff|CapPrm|CapBnd|NoNewPrivs)" /proc/self/status')).stdout
    expect(status).toMatch(/CapEff:\s+0{16}/)
    expect(status).toMatch(/CapBnd:\s+0{16}/)
    expect(status).toMatch(/NoNewPrivs:\s+1/)
  })

  test('there is no network from inside: only the loopback interface, no route out', async () => {
    expect((await run('ls /sys/class/net')).stdout.trim()).toBe('lo')
    const r = await run('timeout 5 bash -c "exec 3<>/dev/tcp/1.1.1.1/80" 2>&1; echo "exit=$?"')
    expect(r.stdout).toMatch(/Network is unreachable/)
    expect(r.stdout).toMatch(/exit=1\n$/)
  })

  test('the root filesystem is read-only; the workspace and /tmp are writable', async () => {
    const r = await run('touch /etc/x 2>&1; touch /usr/bin/x 2>&1; echo done')
    expect(r.stdout).toMatch(/Read-only file system/)
    expect((await run('touch /workspace/ok /tmp/ok && echo writable')).stdout).toBe('writable\n')
    expect(await rejectionOf(sb.writeFile('/etc/evil', 'x'))).toMatchObject({ code: 'BAD_REQUEST' })
  })

  test('the memory limit is enforced (an oversized allocation is killed)', async () => {
    const r = await run('dd if=/dev/zero of=/dev/null bs=400M count=1 2>&1')
    expect(r.exitCode === null ? r.signal : `exit ${r.exitCode}`).toMatch(/SIGKILL|exit [1-9]/)
    expect((await run('echo alive')).stdout).toBe('alive\n')
  })
})
