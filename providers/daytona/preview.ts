import type { Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { connectPreview, jsonObject, type PortStream } from '../../src/sandbox/index.js'

/** Header Daytona's preview proxy checks on a private sandbox (the token of `getPreviewLink`). */
export const DAYTONA_PREVIEW_TOKEN_HEADER = 'x-daytona-preview-token'
/** Header that skips the proxy's browser warning page (the service is not a browser). */
export const DAYTONA_SKIP_WARNING_HEADER = 'x-daytona-skip-preview-warning'

/**
 * Whether a 502 body is Daytona's proxy failing to reach the port. Its errors are JSON
 * `{"statusCode":502,"message":"…","code":"BAD_GATEWAY",…}`; a server in the sandbox that
 * answers 502 itself rarely says exactly that.
 */
export function daytonaPortClosed(body: string): boolean {
  const json = jsonObject(body)
  return json?.statusCode === 502 && json.code === 'BAD_GATEWAY'
}

/**
 * A connection to `port` of a Daytona sandbox through its preview URL (`getPreviewLink`: url and
 * token), the token sent as `x-daytona-preview-token`.
 */
export async function openDaytonaPort(
  remote: RemoteSandbox,
  port: number,
  opts: { signal?: AbortSignal | undefined },
): Promise<PortStream> {
  const link = await remote.getPreviewLink(port)
  return connectPreview(
    {
      url: link.url,
      headers: {
        ...(link.token ? { [DAYTONA_PREVIEW_TOKEN_HEADER]: link.token } : {}),
        [DAYTONA_SKIP_WARNING_HEADER]: 'true',
      },
      unreachable: daytonaPortClosed,
      provider: 'Daytona',
    },
    opts.signal ? { signal: opts.signal } : {},
  )
}
