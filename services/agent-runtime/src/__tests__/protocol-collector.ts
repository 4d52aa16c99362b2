/**
 * Drives a protocol v2 scenario on a server as `client.threads.stream()` of the SDK does — over raw
 * HTTP (`POST /threads/{id}/stream/events` as SSE, then `POST /threads/{id}/commands`) or over the
 * WebSocket on `GET /threads/{id}/stream/events` — and records what it sends in a form two servers
 * can be compared in: the envelope checked (strictly increasing `seq`, an `event_id`, on SSE the
 * frame's `event` and `id` matching them, a timestamp), then dropped; namespace segments
 * `name:<task id>` reduced to `name:*`; ids (runs, messages, interrupts, checkpoints, subscriptions)
 * replaced by `<id N>` in order of first appearance, so that two sequences are equal exactly when
 * they are the same but for those.
 */
import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import { sseFrames } from '@berth/testing';

/** What `POST /threads/{id}/stream/events` takes. */
export interface EventFilter {
  channels: string[];
  namespaces?: string[][];
  depth?: number;
}

export interface Scenario extends EventFilter {
  assistant_id: string;
  input: unknown;
  /**
   * Once the run is interrupted, send `input.respond` with these params (given the interrupts the
   * `input.requested` events named, in order), then record until the run after it ends.
   */
  respond?: (requested: { interrupt_id: string; payload: unknown }[]) => Record<string, unknown>;
  /**
   * Once the run ended, start another on the thread (same stream) with these `run.start` params (given
   * the events so far, e.g. to fork from a checkpoint they named) and record until it ends.
   */
  again?: (events: RecordedEvent[]) => Record<string, unknown>;
  /** Commands sent once the recording ended (their answers recorded too), e.g. `state.get`. */
  after?: { method: string; params: Record<string, unknown> }[];
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
  /** Over a WebSocket: answers sent again for a command already answered, if any. */
  repeated?: unknown[];
}

interface WireEvent {
  type: string;
  seq: number;
  event_id: string;
  method: string;
  params: { namespace: string[]; timestamp: number; node?: string; data: unknown };
}

/** Keys whose values are generated ids (or lists of them). */
const ID_KEYS = new Set([
  'id',
  'subscription_id',
  'interrupt_ids',
  'parent_id',
  'run_id',
  'thread_id',
  'interrupt_id',
  'checkpoint_id',
  'parent_checkpoint_id',
  'message_id',
  'task_id',
]);

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

/** The events a connection received, as they arrive, their envelopes checked. */
class EventLog {
  readonly events: WireEvent[] = [];
  private readonly waiters = new Set<() => void>();
  private failure: Error | undefined;
  private endedWhy: string | undefined;

  /** One event; `frame` says what the transport's framing said about it (SSE's `event` and `id`). */
  push(text: string, frame?: { event?: string | undefined; id?: string | undefined }): void {
    const event = JSON.parse(text) as WireEvent;
    const previous = this.events.at(-1);
    const problems = [
      event.type !== 'event' && `type ${event.type}`,
      frame && frame.event !== event.method && `SSE event "${frame.event}" is not the method "${event.method}"`,
      frame && frame.id !== event.event_id && `SSE id "${frame.id}" is not the event_id "${event.event_id}"`,
      (typeof event.event_id !== 'string' || event.event_id === '') && 'no event_id',
      !Number.isInteger(event.seq) && 'seq not an integer',
      previous && !(event.seq > previous.seq) && `seq ${event.seq} after ${previous.seq}`,
      typeof event.params?.timestamp !== 'number' && 'no timestamp',
    ].filter(Boolean);
    if (problems.length) this.fail(new Error(`bad event envelope (${problems.join('; ')}): ${text}`));
    this.events.push(event);
    this.notify();
  }

  fail(error: Error): void {
    this.failure ??= error;
    this.notify();
  }

  end(why: string): void {
    this.endedWhy ??= why;
    this.notify();
  }

  private notify(): void {
    for (const waiter of this.waiters) waiter();
  }

  /** Resolves with the index of the first event at or after `from` that `match`es, received or to come. */
  until(match: (event: WireEvent) => boolean, from: number, timeoutMs: number): Promise<number> {
    const received = () => `; received:\n${this.events.map((e) => JSON.stringify(e)).join('\n')}`;
    return new Promise((resolve, reject) => {
      const check = () => {
        const index = this.events.findIndex((event, i) => i >= from && match(event));
        if (index >= 0) return finish(() => resolve(index));
        const why = this.failure?.message ?? this.endedWhy;
        if (why) finish(() => reject(new Error(`${why}${received()}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`no matching event within ${timeoutMs} ms${received()}`))), timeoutMs);
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  check(): void {
    if (this.failure) throw this.failure;
  }
}

/** A command's answer: the HTTP status (none over a WebSocket) and the body. */
interface Answer {
  status?: number;
  body: { type: string; id: number | null; meta?: { applied_through_seq?: unknown } } & Record<string, unknown>;
}

/** A client's connection to one thread: its events, and commands sent on it. */
interface Connection {
  log: EventLog;
  /** The answer to the WebSocket's `subscription.subscribe`. */
  subscribed?: Promise<Answer>;
  /** Answers that came again for a command already answered (WebSocket). */
  repeated?: Answer[];
  command(id: number, method: string, params: Record<string, unknown>): Promise<Answer>;
  close(): Promise<void>;
}

const filterOf = ({ channels, namespaces, depth }: EventFilter, since?: number) => ({
  channels,
  ...(namespaces ? { namespaces } : {}),
  ...(depth !== undefined ? { depth } : {}),
  ...(since !== undefined ? { since } : {}),
});

/** `POST …/stream/events` (SSE), commands as `POST …/commands`. */
async function openSse(baseUrl: string, threadId: string, filter: EventFilter, since?: number): Promise<Connection> {
  const post = (path: string, body: unknown, signal?: AbortSignal) =>
    fetch(`${baseUrl}/threads/${threadId}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  const abort = new AbortController();
  const response = await post('/stream/events', filterOf(filter, since), abort.signal);
  if (response.status !== 200 || !response.headers.get('content-type')?.startsWith('text/event-stream')) {
    throw new Error(`stream/events answered ${response.status} ${response.headers.get('content-type')}: ${await response.text()}`);
  }
  const log = new EventLog();
  const consumed = (async () => {
    try {
      for await (const frame of sseFrames(response.body!)) log.push(frame.data, { event: frame.event, id: frame.id });
      log.end('the stream ended');
    } catch (error) {
      if (!abort.signal.aborted) log.fail(error as Error);
    }
  })();
  return {
    log,
    async command(id, method, params) {
      const answer = await post('/commands', { id, method, params });
      return { status: answer.status, body: (await answer.json()) as Answer['body'] };
    },
    async close() {
      abort.abort();
      await consumed;
    },
  };
}

/** The WebSocket on `GET …/stream/events`: `subscription.subscribe` with the filter, then commands on it. */
async function openWebSocket(baseUrl: string, threadId: string, filter: EventFilter, timeoutMs: number): Promise<Connection> {
  const ws = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/threads/${threadId}/stream/events`);
  const log = new EventLog();
  const pending = new Map<number, (answer: Answer) => void>();
  const sent = new Set<number>();
  const repeated: Answer[] = [];
  ws.on('message', (data) => {
    const text = String(data);
    const message = JSON.parse(text) as { type: string; id?: number | null };
    if (message.type === 'event') return log.push(text);
    const settle = typeof message.id === 'number' ? pending.get(message.id) : undefined;
    if (settle) settle({ body: message as Answer['body'] });
    else if (typeof message.id === 'number' && sent.has(message.id)) repeated.push({ body: message as Answer['body'] });
    else log.fail(new Error(`an answer to no command: ${text}`));
  });
  ws.on('close', (code) => log.end(`the socket closed (${code})`));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const command = (id: number, method: string, params: Record<string, unknown>) =>
    new Promise<Answer>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${method} within ${timeoutMs} ms`)), timeoutMs);
      pending.set(id, (answer) => {
        clearTimeout(timer);
        pending.delete(id);
        resolve(answer);
      });
      sent.add(id);
      ws.send(JSON.stringify({ id, method, params }));
    });
  // Not awaited: the JS server answers it only once a run started on the thread (as the SDK sends it).
  const subscribed = command(0, 'subscription.subscribe', filterOf(filter));
  subscribed.catch(() => undefined);
  return {
    log,
    subscribed,
    repeated,
    command,
    async close() {
      if (ws.readyState === ws.CLOSED) return;
      const closed = new Promise((resolve) => ws.once('close', resolve));
      ws.close();
      await closed;
    },
  };
}

const rootEnd = (statuses: string[]) => (event: WireEvent) =>
  event.method === 'lifecycle' && event.params.namespace.length === 0 && statuses.includes((event.params.data as { event: string }).event);

export type Transport = 'sse' | 'websocket';

/**
 * Runs `scenario` on a new thread of the server at `baseUrl` over `transport` and records it. The
 * filter must let the root's lifecycle through: its `completed`/`failed` (and `interrupted`, to
 * respond) ends the recording.
 */
export async function recordScenario(baseUrl: string, scenario: Scenario, transport: Transport = 'sse', timeoutMs = 30_000): Promise<Recording> {
  const threadId = randomUUID();
  const connection = transport === 'sse' ? await openSse(baseUrl, threadId, scenario) : await openWebSocket(baseUrl, threadId, scenario, timeoutMs);
  const { log } = connection;
  const answers: Answer[] = [];
  let commandId = 0;
  // Every command of a scenario is meant to succeed: an error ends the recording at once, with its answer.
  const command = async (method: string, params: Record<string, unknown>) => {
    const answer = await connection.command(++commandId, method, params);
    if (answer.body.type !== 'success') throw new Error(`${method} answered ${JSON.stringify(answer.body)}`);
    answers.push(answer);
  };

  let replay: WireEvent[] | undefined;
  try {
    await command('run.start', { assistant_id: scenario.assistant_id, input: scenario.input });
    if (connection.subscribed) answers.unshift(await connection.subscribed);
    let from = 0;
    if (scenario.respond !== undefined) {
      const paused = await log.until(rootEnd(['interrupted', 'completed', 'failed']), 0, timeoutMs);
      const requested = log.events
        .filter((event) => event.method === 'input.requested')
        .map((event) => event.params.data as { interrupt_id: string; payload: unknown });
      await command('input.respond', scenario.respond(requested));
      from = paused + 1;
    }
    const ended = await log.until(rootEnd(['completed', 'failed']), from, timeoutMs);
    if (scenario.again !== undefined) {
      // The raw events: ids as the server knows them.
      const raw = log.events.map(({ method, params: { namespace, node, data } }) => ({ method, namespace, ...(node !== undefined ? { node } : {}), data }));
      await command('run.start', { assistant_id: scenario.assistant_id, ...scenario.again(raw) });
      await log.until(rootEnd(['completed', 'failed']), ended + 1, timeoutMs);
    }
    log.check();
    for (const { method, params } of scenario.after ?? []) await command(method, params);
    // The first connection stays open meanwhile: a server may forget a thread's events once no one listens.
    if (scenario.replayAfter !== undefined) {
      const second = await openSse(baseUrl, threadId, scenario, log.events[scenario.replayAfter]!.seq);
      try {
        await second.log.until(rootEnd(['completed', 'failed']), 0, timeoutMs);
        second.log.check();
        replay = second.log.events;
      } finally {
        await second.close();
      }
    }
  } finally {
    await connection.close();
  }
  // Normalised in order (events first), so the same id gets the same N on both servers.
  const ids = new IdNormaliser();
  const record = ({ method, params: { namespace, node, data } }: WireEvent): RecordedEvent => ({
    method,
    namespace: namespace.map(namespaceSegment),
    ...(node !== undefined ? { node } : {}),
    data: ids.normalise(data),
  });
  const events = log.events.map(record);
  const answer = ({ status, body }: Answer) => {
    const meta = body.meta && typeof body.meta.applied_through_seq === 'number' ? { ...body.meta, applied_through_seq: '<seq>' } : body.meta;
    return ids.normalise({ ...(status !== undefined ? { status } : {}), body: { ...body, ...(meta ? { meta } : {}) } });
  };
  const responses = answers.map(answer);
  const repeated = connection.repeated?.map(answer) ?? [];
  return { events, responses, ...(replay ? { replayed: replay.map(record) } : {}), ...(repeated.length ? { repeated } : {}) };
}

/** Sends `commands` one by one to a new thread (`POST …/commands`) and returns their answers: status, type, id, error code. */
export async function commandAnswers(baseUrl: string, commands: { method: string; params?: Record<string, unknown> }[]): Promise<unknown[]> {
  const threadId = randomUUID();
  const answers: unknown[] = [];
  for (const [i, { method, params }] of commands.entries()) {
    const response = await fetch(`${baseUrl}/threads/${threadId}/commands`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: i + 1, method, ...(params ? { params } : {}) }),
    });
    const body = (await response.json()) as { type: string; id: number | null; error?: string };
    answers.push({ status: response.status, type: body.type, id: body.id, ...(body.error !== undefined ? { error: body.error } : {}) });
  }
  return answers;
}
