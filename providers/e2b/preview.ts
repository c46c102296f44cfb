import type { Sandbox as E2BSdkSandbox } from 'e2b'
import { connectPreview, jsonObject, type PortStream } from '../../src/sandbox/index.js'

/** Header E2B's sandbox proxy checks on a sandbox created with `allowPublicTraffic: false`. */
export const E2B_TRAFFIC_TOKEN_HEADER = 'e2b-traffic-access-token'

/**
 * Whether a 502 body is E2B's proxy saying nothing listens on the port:
 * `{"sandboxId":…,"message":"The sandbox is running but port is not open","port":8000,"code":502}`.
 */
export function e2bPortClosed(body: string): boolean {
  const json = jsonObject(body)
  return json?.code === 502 && typeof json.message === 'string' && /port is not open/i.test(json.message)
}

/**
 * A connection to `port` of an E2B sandbox through E2B's preview host `https://<port>-<sandboxId>.<domain>`
 * (the SDK's `getHost`), carrying the sandbox's traffic access token when it has one. With
 * `previewUrl`, the connection goes there instead and the preview host is only the `Host` header.
 */
export function openE2BPort(
  sdk: E2BSdkSandbox,
  port: number,
  opts: { previewUrl?: string | undefined; signal?: AbortSignal | undefined },
): Promise<PortStream> {
  const token = sdk.trafficAccessToken
  return connectPreview(
    {
      url: `https://${sdk.getHost(port)}`,
      ...(opts.previewUrl ? { connectTo: opts.previewUrl } : {}),
      headers: token ? { [E2B_TRAFFIC_TOKEN_HEADER]: token } : {},
      unreachable: e2bPortClosed,
      provider: 'E2B',
    },
    opts.signal ? { signal: opts.signal } : {},
  )
}
