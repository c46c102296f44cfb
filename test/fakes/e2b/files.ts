/**
 * Short helper commands of the fake envd (file reads and writes, signals), run with `docker exec`
 * and buffered: binary-safe through the exec's stdin and stdout.
 */
import type { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import { createDemuxer } from './docker-demux.js'

/** The buffered outcome of a helper command. */
export interface CommandOutput {
  exitCode: number
  stdout: Buffer
  stderr: Buffer
}

/** Runs `cmd` in the container, feeding `stdin` when given, and collects its output. */
export async function runFileCommand(
  container: Docker.Container,
  cmd: string[],
  opts: { user?: string; stdin?: Buffer } = {},
): Promise<CommandOutput> {
  const withStdin = opts.stdin !== undefined
  const exec = await container.exec({
    Cmd: cmd,
    AttachStdin: withStdin,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    ...(opts.user ? { User: opts.user } : {}),
  })
  const stream = (await exec.start({ hijack: true, stdin: withStdin })) as Duplex
  const out: Buffer[] = []
  const err: Buffer[] = []
  const demux = createDemuxer((id, payload) => (id === 2 ? err : out).push(payload))
  const done = new Promise<void>((resolve, reject) => {
    stream.on('data', demux)
    stream.on('end', resolve)
    stream.on('error', reject)
  })
  if (opts.stdin !== undefined) stream.end(opts.stdin)
  await done
  const info = await exec.inspect()
  return { exitCode: info.ExitCode ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }
}
