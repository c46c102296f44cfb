/** One server-sent event: its `event` name (`message` when absent), `id` and `data` lines joined. */
export interface SseEvent {
  readonly event: string
  readonly id?: string
  readonly data: string
}

/**
 * The events of an SSE response body, in order; comment lines (`: keepalive`) are skipped. Ends when
 * the body does.
 */
export async function* sseEvents(res: Response): AsyncGenerator<SseEvent> {
  const reader = res.body?.getReader()
  if (!reader) return
  const decoder = new TextDecoder()
  let buffer = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n')
    let at: number
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, at)
      buffer = buffer.slice(at + 2)
      let event = 'message'
      let id: string | undefined
      const data: string[] = []
      for (const line of frame.split('\n')) {
        if (line === '' || line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        const text = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'event') event = text
        else if (field === 'id') id = text
        else if (field === 'data') data.push(text)
      }
      if (data.length > 0) yield { event, ...(id !== undefined ? { id } : {}), data: data.join('\n') }
    }
  }
}
