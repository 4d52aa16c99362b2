/**
 * Server-sent events as a client reads them from a fetch response body (the CLI following a log,
 * tests reading a stream): one frame per event, with its `event`, `id` and `data` (several `data:`
 * lines joined by newlines); comments (heartbeats) are skipped.
 */
export interface SseFrame {
  event?: string;
  id?: string;
  data: string;
}

/** The frames of an SSE body, as they arrive; ends with the body. */
export async function* sseFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<SseFrame> {
  let buffer = '';
  for await (const text of body.pipeThrough(new TextDecoderStream())) {
    buffer += text.replace(/\r\n/g, '\n');
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const fields: Record<string, string> = {};
      for (const line of buffer.slice(0, end).split('\n')) {
        if (line === '' || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        fields[name] = name === 'data' && fields.data !== undefined ? `${fields.data}\n${value}` : value;
      }
      buffer = buffer.slice(end + 2);
      if (fields.data !== undefined)
        yield { data: fields.data, ...(fields.event !== undefined ? { event: fields.event } : {}), ...(fields.id !== undefined ? { id: fields.id } : {}) };
    }
  }
}
