/**
 * `node bin/sbx.js serve|api|worker` as a child process for the benchmarks: a config file of its own
 * in a temporary directory, a fresh admin key, a free loopback port; resolves once it is ready.
 */
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const SBX = fileURLToPath(new URL('../../bin/sbx.js', import.meta.url))

/** A running `sbx` process. */
export interface SbxProcess {
  readonly url: string
  readonly key: string
  /** SIGTERM, then SIGKILL after 20 s. */
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  const srv = createServer().listen(0, '127.0.0.1')
  await once(srv, 'listening')
  const address = srv.address()
  await new Promise<void>((r) => srv.close(() => r()))
  return typeof address === 'object' && address ? address.port : 0
}

/** Starts `sbx <command>` with `config` and waits for its ready line (at most 120 s). */
export async function startSbx(command: 'serve' | 'api' | 'worker', config: object): Promise<SbxProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-'))
  writeFileSync(join(dir, 'sandbox-router.config.json'), JSON.stringify(config))
  const key = `sbx_bench_${randomUUID().replace(/-/g, '')}`
  const port = command === 'worker' ? 0 : await freePort()
  const args =
    command === 'worker' ? [SBX, command] : [SBX, command, '--host', '127.0.0.1', '--port', String(port)]
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: dir,
    env: { ...process.env, SBX_API_KEY: key, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  const ready = command === 'worker' ? /consuming/ : /listening on/
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sbx ${command} not ready within 120 s`)), 120_000)
    child.once('exit', (code) => reject(new Error(`sbx ${command} exited (${code}) before it was ready`)))
    createInterface({ input: child.stderr! }).on('line', (line) => {
      if (ready.test(line)) {
        clearTimeout(timer)
        resolve()
      }
    })
  })
  return {
    url: `http://127.0.0.1:${port}`,
    key,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
      await once(child, 'exit')
      clearTimeout(timer)
    },
  }
}
