/**
 * Protocol v2 events of a thread: what a run executed for protocol v2 publishes, and how a stored
 * event becomes the wire envelope `{type:"event", seq, event_id, method, params}`.
 *
 * Every thread has one broker stream (`threadStreamKey`), shared by all its protocol runs, so a
 * subscription stays open across runs and replays after `since` from any process: an event's
 * `seq` is its position in that stream (the broker's gap-free id + 1, so `since: 0` means "from
 * the first") and its `event_id` is `<seq>.<nonce>`: stable across replays. The broker forgets an
 * idle thread's stream after its retention; the end of every protocol run records the next number
 * on the thread (`threads.event_seq`) and the next run starts a forgotten stream there, so `seq`
 * strictly increases for the life of the thread and a client's `since` stays meaningful.
 * Classic runs publish nothing here (they cost nothing more than before).
 */
import { randomBytes } from 'node:crypto';
import type { BrokerEvent, EventBroker } from '@berth/broker';
import { matchesSubscription } from '@langchain/langgraph/stream';
import { toWire } from '../runs/serialize.js';
import { EventPipe } from '../runs/event-pipe.js';
import type { ProtocolRun } from '../storage/runs.js';

export type Namespace = string[];

/** What a subscription (SSE body, `subscription.subscribe`) selects. */
export interface EventFilter {
  channels: string[];
  namespaces?: Namespace[] | undefined;
  depth?: number | undefined;
}

/** What is stored per event (the broker's event name is the method). */
interface StoredEvent {
  /** Nonce of the event id. */
  n: string;
  params: { namespace: Namespace; timestamp: number; node?: string; data: unknown };
}

export interface ProtocolEvent {
  type: 'event';
  seq: number;
  event_id: string;
  method: string;
  params: StoredEvent['params'];
}

/** The broker stream of a thread's protocol events (a name no run id takes: run ids are UUIDs). */
export const threadStreamKey = (threadId: string): string => `thread-events:${threadId}`;

/** The wire form of a stored event. */
export function toProtocolEvent(event: BrokerEvent): ProtocolEvent {
  const seq = Number(event.id) + 1;
  const stored = event.data as StoredEvent;
  return { type: 'event', seq, event_id: `${seq}.${stored.n}`, method: event.event, params: stored.params };
}

/** The seq of an event id of ours (`<seq>.<nonce>`), undefined for anything else. */
export function seqOfEventId(eventId: string): number | undefined {
  const match = /^(\d+)\.[0-9a-f]+$/.exec(eventId);
  return match ? Number(match[1]) : undefined;
}

/** Where a broker subscription starts to deliver the events after `since` (all retained ones without). */
export function fromSince(since: number | undefined): 'start' | { after: string } {
  return since === undefined || since <= 0 ? 'start' : { after: String(since - 1) };
}

export function matches(event: ProtocolEvent, filter: EventFilter): boolean {
  return matchesSubscription(event, {
    channels: filter.channels as never,
    ...(filter.namespaces ? { namespaces: filter.namespaces } : {}),
    ...(filter.depth !== undefined ? { depth: filter.depth } : {}),
  });
}

/** A protocol event as LangGraph's `streamEvents(…, {version: "v3"})` yields it. */
export interface GraphProtocolEvent {
  method: string;
  params: { namespace: Namespace; node?: string; data: unknown };
}

type Record_ = Record<string, unknown>;
const isRecord = (value: unknown): value is Record_ => typeof value === 'object' && value !== null && !Array.isArray(value);

const MESSAGE_TYPES: Record<string, string> = {
  human: 'human',
  user: 'human',
  ai: 'ai',
  assistant: 'ai',
  tool: 'tool',
  system: 'system',
  function: 'function',
  remove: 'remove',
};

/** A message in state as protocol clients read it (as the JS server sends it): only the fields they use. */
function protocolMessage(message: Record_): Record_ {
  const type = MESSAGE_TYPES[String(message.type)];
  if (!type) return message;
  const out: Record_ = { type, content: message.content ?? '' };
  for (const key of ['id', 'name', 'tool_call_id', 'status', 'artifact'] as const)
    if (message[key] !== undefined && message[key] !== null) out[key] = message[key];
  if (isRecord(message.response_metadata) && Object.keys(message.response_metadata).length) out.response_metadata = message.response_metadata;
  if (type === 'ai') {
    const calls = Array.isArray(message.tool_calls) ? (message.tool_calls as Record_[]) : [];
    if (calls.length) out.tool_calls = calls.map(({ id, name, args }) => ({ id, name, args, type: 'tool_call' }));
    if (Array.isArray(message.invalid_tool_calls) && message.invalid_tool_calls.length) out.invalid_tool_calls = message.invalid_tool_calls;
  }
  return out;
}

/** Values or an update as JSON, messages in protocol form, `__interrupt__` left out (it goes to the input channel). */
function stateData(value: unknown): unknown {
  const json = toWire(value);
  if (!isRecord(json)) return json;
  const out: Record_ = {};
  for (const [key, entry] of Object.entries(json)) {
    if (key === '__interrupt__') continue;
    out[key] = key === 'messages' && Array.isArray(entry) ? entry.map((m) => (isRecord(m) ? protocolMessage(m) : m)) : entry;
  }
  return out;
}

/** The interrupts in a values chunk (`__interrupt__`) or a list of them, as `input.requested` data. */
export function interruptsIn(value: unknown): { interrupt_id: string; payload: unknown }[] {
  const list = Array.isArray(value) ? value : isRecord(value) && Array.isArray(value.__interrupt__) ? value.__interrupt__ : [];
  return (toWire(list) as unknown[]).flatMap((entry) =>
    isRecord(entry) && typeof entry.id === 'string' ? [{ interrupt_id: entry.id, payload: entry.value ?? null }] : [],
  );
}

/** How a protocol run ended, for its root `lifecycle` event. */
export type RunEnding = { event: 'completed' | 'interrupted' } | { event: 'failed'; error: string };

const nonce = () => randomBytes(6).toString('hex');

/**
 * The root `lifecycle` event that ends a run, published by its worker once the run's end is
 * recorded (so a client acting on it finds the thread idle, and a run taken over by another
 * worker does not end twice). `startAt`: the thread's recorded next number (used only when the
 * broker forgot its stream); returns the next number after this event, for the thread to record.
 */
export async function publishRunEnd(broker: EventBroker, threadId: string, run: ProtocolRun, ending: RunEnding, startAt: number): Promise<number> {
  const stored: StoredEvent = { n: nonce(), params: { namespace: [], timestamp: Date.now(), data: { ...ending, graph_name: run.graph } } };
  return Number(await broker.publish(threadStreamKey(threadId), 'lifecycle', stored, { startAt })) + 1;
}

/**
 * Publishes one run's protocol events to its thread's stream, in order (batched like the classic
 * events). The root `lifecycle` is not the graph's (dropped: it cannot know about cancels, or
 * interrupts found in the saved state): `running` here, the end by the worker (publishRunEnd);
 * `input.requested` comes once per interrupt.
 */
export class ProtocolPublisher {
  private readonly pipe: EventPipe;
  private readonly requested = new Set<string>();

  /** `startAt`: the thread's recorded next number, where a stream the broker forgot starts again. */
  constructor(
    broker: EventBroker,
    threadId: string,
    private readonly run: ProtocolRun,
    options: { retryMs?: number; signal?: AbortSignal; startAt: number },
  ) {
    this.pipe = new EventPipe(broker, threadStreamKey(threadId), options);
  }

  /** The run started. */
  start(): void {
    if (this.run.answered.length) this.push('input.answered', [], { interrupt_ids: this.run.answered });
    this.push('lifecycle', [], { event: 'running', graph_name: this.run.graph });
  }

  /** One event of the graph's v3 stream. */
  graphEvent(event: GraphProtocolEvent): void {
    const { method, params } = event;
    const namespace = params.namespace ?? [];
    switch (method) {
      case 'lifecycle':
        if (namespace.length) this.push(method, namespace, toWire(params.data));
        return;
      case 'values': {
        this.requestInput(namespace, interruptsIn(params.data));
        const values = stateData(params.data);
        if (!isRecord(values) || Object.keys(values).length) this.push(method, namespace, values);
        return;
      }
      case 'updates': {
        const data = params.data as { node?: string; values?: unknown };
        if (data?.node === '__interrupt__') return this.requestInput(namespace, interruptsIn(data.values));
        this.push(method, namespace, stateData(data?.values), data?.node);
        return;
      }
      default:
        // As the JS server: only updates name their node.
        this.push(method, namespace, toWire(params.data));
    }
  }

  /** `input.requested` for each interrupt not requested yet (from the stream, or the saved state at the run's end). */
  requestInput(namespace: Namespace, requests: { interrupt_id: string; payload: unknown }[]): void {
    for (const request of requests) {
      if (this.requested.has(request.interrupt_id)) continue;
      this.requested.add(request.interrupt_id);
      this.push('input.requested', namespace, request);
    }
  }

  flush(): Promise<void> {
    return this.pipe.flush();
  }

  private push(method: string, namespace: Namespace, data: unknown, node?: string): void {
    const stored: StoredEvent = { n: nonce(), params: { namespace, timestamp: Date.now(), ...(node ? { node } : {}), data } };
    this.pipe.push(method, stored);
  }
}
