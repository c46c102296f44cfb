/**
 * Output a process stream of the E2B endpoint did not get: the `dropped` bytes of a read, turned
 * into the error that ends the stream instead of a silent hole.
 */
import type { ProcessOutput } from '../../sandbox/types.js'
import { ConnectRpcError } from './connect.js'

/**
 * The error that ends a stream whose read found bytes gone (`dropped`): every command starts with
 * backpressure, so its buffer keeps what this stream has not read, unless another stream of the same
 * process read further (its reads acknowledge the bytes, and the buffer moves on), or the process
 * was started without backpressure (a sandbox whose agent predates it). Never skipped silently: the
 * client would get output with a hole.
 */
export function lossOf(out: ProcessOutput, pid: number): ConnectRpcError | undefined {
  const lost = [
    out.stdout.dropped ? `${out.stdout.dropped} bytes of stdout` : '',
    out.stderr.dropped ? `${out.stderr.dropped} bytes of stderr` : '',
  ].filter(Boolean)
  if (!lost.length) return undefined
  return new ConnectRpcError(
    'data_loss',
    `${lost.join(' and ')} of process ${pid} were lost before this stream read them: the output buffer ` +
      '(quotas.processOutputBytes) no longer held them, because another stream of the same process ' +
      '(commands.connect) read further, or the process was started without backpressure (the ' +
      "sandbox's agent predates it: create a new sandbox). Read each process through one stream, " +
      'or raise quotas.processOutputBytes',
  )
}
