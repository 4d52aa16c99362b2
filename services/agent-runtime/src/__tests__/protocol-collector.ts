/**
 * Drives a protocol v2 scenario on a server over raw HTTP (`POST /threads/{id}/stream/events` as SSE,
 * then `POST /threads/{id}/commands`), as `client.threads.stream()` of the SDK does, and records what
 * it sends in a form two servers can be compared in: the envelope checked (strictly increasing `seq`,
 * an `event_id` that is the SSE frame's id, a timestamp), then dropped; namespace segments
 * `name:<task id>` reduced to `name:*`; ids (runs, messages, interrupts, checkpoints) replaced by
 * `<id N>` in order of first appearance, so that two sequences are equal exactly when they are the
 * same but for those.
 */
import { randomUUID } from 'node:crypto';

/** What `POST /threads/{id}/stream/events` takes. */
export interface EventFilter {
  channels: string[];
  namespaces?: string[][];
  depth?: number;
}

export interface Scenario extends EventFilter {
  assistant_id: string;
  input: unknown;
  /** Answer the first interrupt with this (`input.respond`), then record until the run after it ends. */
  respond?: unknown;
  /**
   * Once it ended, open a second stream with the same filter and `since` the seq of the event at
   * this index, and record what it replays (until the root's end again).
   */
  replayAfter?: number;
}

/** One event as recorded: what two servers must agree on. */
export interface RecordedEvent {
  method: string;
  namespace: string[];
  node?: string;
  data: unknown;
}

export interface Recording {
  events: RecordedEvent[];
  /** The commands' responses, normalised like the events (`applied_through_seq` only checked to be a number). */
  responses: unknown[];
  /** With `replayAfter`: what the second stream sent. */
  replayed?: RecordedEvent[];
}

interface WireEvent {
  type: string;
  seq: number;
  event_id: string;
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

/** Keys whose values are generated ids (or lists of them). */
const ID_KEYS = new Set(['id', 'interrupt_ids', 'parent_id', 'run_id', 'thread_id', 'interrupt_id', 'checkpoint_id', 'parent_checkpoint_id', 'message_id', 'task_id']);

/** Replaces generated ids by `<id N>`, the same id by the same N throughout one recording. */
class IdNormaliser {
  private readonly seen = new Map<string, string>();

  normalise(value: unknown, key?: string): unknown {
    if (typeof value === 'string' && key !== undefined && ID_KEYS.has(key)) {
      let placeholder = this.seen.get(value);
      if (!placeholder) this.seen.set(value, (placeholder = `<id ${this.seen.size + 1}>`));
      return placeholder;
    }
    if (Array.isArray(value)) return value.map((item) => this.normalise(item, key));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.normalise(v, k)]));
    }
    return value;
  }
}

/** `child:1f6dd17b-…` → `child:*`; a segment without a task id is kept as it is (and so shows in a diff). */
const namespaceSegment = (segment: string) => segment.replace(/^([^:]+):.+$/, '$1:*');

/** An open SSE subscription: events as they arrive. */
class EventStream {
  readonly events: WireEvent[] = [];
  private readonly waiters = new Set<() => void>();
  private failure: Error | undefined;
  private ended = false;

  constructor(private readonly abort: AbortController) {}

  async consume(body: ReadableStream<Uint8Array>): Promise<void> {
    let buffer = '';
    try {
      for await (const text of body.pipeThrough(new TextDecoderStream())) {
        buffer += text.replace(/\r\n/g, '\n');
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          this.frame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (!this.abort.signal.aborted) this.failure = error as Error;
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private frame(frame: string): void {
    const fields: Record<string, string> = {};
    for (const line of frame.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const name = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      fields[name] = name === 'data' && fields.data !== undefined ? `${fields.data}\n${value}` : value;
    }
    if (fields.data === undefined) return;
    const event = JSON.parse(fields.data) as WireEvent;
    const previous = this.events.at(-1);
    const problems = [
      event.type !== 'event' && `type ${event.type}`,
      fields.event !== event.method && `SSE event "${fields.event}" is not the method "${event.method}"`,
      fields.id !== event.event_id && `SSE id "${fields.id}" is not the event_id "${event.event_id}"`,
      (typeof event.event_id !== 'string' || event.event_id === '') && 'no event_id',
      !Number.isInteger(event.seq) && 'seq not an integer',
      previous && !(event.seq > previous.seq) && `seq ${event.seq} after ${previous.seq}`,
      typeof event.params?.timestamp !== 'number' && 'no timestamp',
    ].filter(Boolean);
    if (problems.length) this.failure ??= new Error(`bad event envelope (${problems.join('; ')}): ${fields.data}`);
    this.events.push(event);
    this.notify();
  }

  private notify(): void {
    for (const waiter of this.waiters) waiter();
  }

  /** Resolves with the first event (received or to come) after index `from` that `match`es. */
  until(match: (event: WireEvent) => boolean, from: number, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const index = this.events.findIndex((event, i) => i >= from && match(event));
        if (index >= 0) return finish(() => resolve(index));
        const why = this.failure?.message ?? (this.ended ? 'the stream ended' : undefined);
        if (why) finish(() => reject(new Error(`${why}; received:\n${this.events.map((e) => JSON.stringify(e)).join('\n')}`)));
      };
      const timer = setTimeout(
        () => finish(() => reject(new Error(`no matching event within ${timeoutMs} ms; received:\n${this.events.map((e) => JSON.stringify(e)).join('\n')}`))),
        timeoutMs,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  close(): void {
    this.abort.abort();
  }

  check(): void {
    if (this.failure) throw this.failure;
  }
}

const rootEnd = (statuses: string[]) => (event: WireEvent) =>
  event.method === 'lifecycle' && event.params.namespace.length === 0 && statuses.includes((event.params.data as { event: string }).event);

/**
 * Runs `scenario` on a new thread of the server at `baseUrl` and records it. The filter must let
 * the root's lifecycle through: its `completed`/`failed` (and `interrupted`, to respond) ends it.
 */
export async function recordScenario(baseUrl: string, scenario: Scenario, timeoutMs = 30_000): Promise<Recording> {
  const threadId = randomUUID();
  const post = async (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${baseUrl}/threads/${threadId}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });

  const { channels, namespaces, depth } = scenario;
  const open = async (since?: number) => {
    const abort = new AbortController();
    const filter = { channels, ...(namespaces ? { namespaces } : {}), ...(depth !== undefined ? { depth } : {}), ...(since !== undefined ? { since } : {}) };
    const response = await post('/stream/events', filter, abort.signal);
    if (response.status !== 200 || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
      throw new Error(`stream/events answered ${response.status} ${response.headers.get('content-type')}: ${await response.text()}`);
    }
    const stream = new EventStream(abort);
    return { stream, consumed: stream.consume(response.body!) };
  };
  const { stream, consumed } = await open();

  const ids = new IdNormaliser();
  const responses: unknown[] = [];
  let commandId = 0;
  const command = async (method: string, params: Record<string, unknown>) => {
    const answer = await post('/commands', { id: ++commandId, method, params });
    const body = (await answer.json()) as { meta?: { applied_through_seq?: unknown } };
    if (body.meta && typeof body.meta.applied_through_seq === 'number') body.meta.applied_through_seq = '<seq>';
    responses.push({ status: answer.status, body });
  };

  let replay: WireEvent[] | undefined;
  try {
    await command('run.start', { assistant_id: scenario.assistant_id, input: scenario.input });
    let from = 0;
    if (scenario.respond !== undefined) {
      const paused = await stream.until(rootEnd(['interrupted', 'completed', 'failed']), 0, timeoutMs);
      const request = stream.events.find((event) => event.method === 'input.requested');
      await command('input.respond', { interrupt_id: (request?.params.data as { interrupt_id?: string } | undefined)?.interrupt_id, response: scenario.respond });
      from = paused + 1;
    }
    await stream.until(rootEnd(['completed', 'failed']), from, timeoutMs);
    stream.check();
    // The first stream stays open meanwhile: a server may forget a thread's events once no one listens.
    if (scenario.replayAfter !== undefined) replay = await replayed(open, stream.events[scenario.replayAfter]!.seq, timeoutMs);
  } finally {
    stream.close();
    await consumed;
  }
  // Normalised in order (events first), so the same id gets the same N on both servers.
  const record = ({ method, params: { namespace, node, data } }: WireEvent): RecordedEvent => ({
    method,
    namespace: namespace.map(namespaceSegment),
    ...(node !== undefined ? { node } : {}),
    data: ids.normalise(data),
  });
  return { events: stream.events.map(record), responses: responses.map((r) => ids.normalise(r)), ...(replay ? { replayed: replay.map(record) } : {}) };
}

/** What a stream opened with `since` sends, until the root's end. */
async function replayed(open: (since: number) => Promise<{ stream: EventStream; consumed: Promise<void> }>, since: number, timeoutMs: number): Promise<WireEvent[]> {
  const { stream, consumed } = await open(since);
  try {
    await stream.until(rootEnd(['completed', 'failed']), 0, timeoutMs);
    stream.check();
    return stream.events;
  } finally {
    stream.close();
    await consumed;
  }
}
