/** A JSON-RPC request id. */
export type RequestId = string | number

/** The ids of the JSON-RPC requests (not notifications) in a POST body; none when it is not JSON-RPC. */
export async function requestIdsOf(req: Request): Promise<RequestId[]> {
  if (req.method !== 'POST' || !req.body) return []
  try {
    const parsed: unknown = await req.clone().json()
    const messages = Array.isArray(parsed) ? (parsed as unknown[]) : [parsed]
    return messages.flatMap((m) => {
      if (typeof m !== 'object' || m === null) return []
      const { id, method } = m as { id?: unknown; method?: unknown }
      return typeof method === 'string' && (typeof id === 'string' || typeof id === 'number') ? [id] : []
    })
  } catch {
    // Not JSON: the transport answers the parse error.
    return []
  }
}

/**
 * `body`, passed through, calling `onCancel` when its reader cancels before the stream ended: the
 * HTTP server cancels a response body whose connection closed, i.e. the client went away mid-answer.
 */
export function onConsumerCancel(
  body: ReadableStream<Uint8Array>,
  onCancel: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read()
      if (done) controller.close()
      else controller.enqueue(value)
    },
    async cancel(reason) {
      onCancel()
      await reader.cancel(reason)
    },
  })
}
