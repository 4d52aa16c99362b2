/**
 * A run of one thread, streamed as it happens with the SDK's `runs.stream`, in the stream modes
 * chosen: `values` (the state after each step: the state view and the chat follow it),
 * `messages-tuple` (a chat model's tokens as they come, shown until the step's values replace
 * them), `updates` (where an interrupt shows), and any other the SDK takes; every event is kept for
 * the event log. A run started while one streams is queued on the server (`enqueue`) and followed
 * in turn once the one before it ends.
 */
import type { Client, Command, StreamMode } from '@langchain/langgraph-sdk';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useRef, useState } from 'react';
import { asMessage } from '../../components/chat';
import { useStudio } from '../context';

/** The stream modes a run can be started with (the SDK's `streamMode`), in the order the form offers them. */
export const STREAM_MODES = [
  'values',
  'updates',
  'messages-tuple',
  'messages',
  'custom',
  'tasks',
  'checkpoints',
  'debug',
  'events',
] as const satisfies readonly StreamMode[];
/** What the chat and state views need. */
export const DEFAULT_STREAM_MODES: StreamMode[] = ['values', 'messages-tuple', 'updates'];
/** Events the log keeps per run followed (a run in `events` or `debug` mode sends many); the count says how many came. */
export const MAX_LOGGED_EVENTS = 500;

/** One event of the stream as the server sent it: its SSE event name (`<mode>` or `<mode>|<namespace>`) and data. */
export interface StreamedEvent {
  seq: number;
  runId?: string;
  event: string;
  data: unknown;
}

/** A message being written: its text so far, by message id. */
export interface PartialMessage {
  id: string;
  role: string;
  text: string;
}

export interface LiveRun {
  /** `running` from the request until the server ends the stream. */
  status: 'idle' | 'running' | 'done' | 'error';
  runId?: string;
  /** The latest `values` event (undefined before the first). */
  values?: unknown;
  /** Messages whose tokens came after the latest `values` event. */
  partial: PartialMessage[];
  /** The latest {@link MAX_LOGGED_EVENTS} events, of every run followed since the form started one. */
  events: StreamedEvent[];
  /** How many events came in all. */
  eventCount: number;
  error?: string;
}

/** A run's input (null: go on from the checkpoint, `checkpointId` an earlier one to fork from), or a command. */
export type RunRequest = { input: Record<string, unknown> | null; checkpointId?: string } | { command: Command };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A message's id (plain or serialized form), '' without one. */
export function messageId(message: unknown): string {
  if (!isObj(message)) return '';
  const fields = isObj(message.kwargs) ? message.kwargs : message;
  return typeof fields.id === 'string' ? fields.id : '';
}

/** A streamed message chunk as a piece of a message: its id, role and text (a string, or text blocks). */
function chunkPiece(chunk: unknown): PartialMessage | undefined {
  const message = asMessage(chunk);
  if (!message) return undefined;
  const { content } = message;
  const text = Array.isArray(content)
    ? content.map((b) => (isObj(b) && typeof b.text === 'string' ? b.text : typeof b === 'string' ? b : '')).join('')
    : typeof content === 'string'
      ? content
      : '';
  return { id: messageId(chunk), role: message.role, text };
}

/** The query keys a thread's views read (refetched when a run ends). */
export const threadKeys = (key: string, threadId: string) => ({
  state: ['studio', key, 'thread', threadId, 'state'],
  runs: ['studio', key, 'thread', threadId, 'runs'],
  list: ['studio', key, 'threads'],
});

type Stream = AsyncIterable<{ event: string; data: unknown }>;

export function useRunStream(client: Client, threadId: string) {
  const { target } = useStudio();
  const queries = useQueryClient();
  const [live, setLive] = useState<LiveRun>({ status: 'idle', partial: [], events: [], eventCount: 0 });
  const running = useRef(false);
  /** Runs queued from here while one streamed, followed in turn (oldest first). */
  const queued = useRef<{ runId: string; modes: StreamMode[] }[]>([]);

  const start = useCallback(
    async (assistantId: string, request: RunRequest, modes: StreamMode[] = DEFAULT_STREAM_MODES) => {
      const keys = threadKeys(target.key, threadId);
      if (running.current) {
        // The server queues it behind the thread's run; resumable, so it is followed from its first event when its turn comes.
        const created = await client.runs.create(threadId, assistantId, { ...request, streamMode: modes, streamResumable: true, multitaskStrategy: 'enqueue' });
        queued.current.push({ runId: created.run_id, modes });
        await queries.invalidateQueries({ queryKey: keys.runs });
        return;
      }
      running.current = true;
      const run: LiveRun = { status: 'running', partial: [], events: [], eventCount: 0 };
      const show = () => setLive({ ...run, partial: [...run.partial], events: [...run.events] });
      show();
      const follow = async (stream: Stream) => {
        for await (const part of stream) {
          run.events.push({ seq: run.eventCount++, runId: run.runId, event: part.event, data: part.data });
          if (run.events.length > MAX_LOGGED_EVENTS) run.events.shift();
          if (part.event === 'values') {
            // The `{__interrupt__}` chunk is not the state: the interrupts come from the thread's state.
            if (!(isObj(part.data) && '__interrupt__' in part.data)) {
              run.values = part.data;
              run.partial = [];
            }
          } else if (part.event === 'messages') {
            const [chunk] = part.data as [unknown, unknown];
            const piece = chunkPiece(chunk);
            const at = piece && run.partial.find((m) => m.id === piece.id);
            if (at) at.text += piece.text;
            else if (piece) run.partial.push(piece);
          } else if (part.event === 'metadata') {
            run.runId ??= (part.data as { run_id?: string }).run_id;
          } else if (part.event === 'updates') {
            if (isObj(part.data) && '__interrupt__' in part.data) void queries.invalidateQueries({ queryKey: keys.state });
          } else if (part.event === 'error') {
            const data = part.data as { message?: unknown } | undefined;
            throw new Error(String(data?.message ?? JSON.stringify(part.data)));
          }
          show();
        }
      };
      try {
        await follow(
          client.runs.stream(threadId, assistantId, {
            ...request,
            streamMode: modes,
            onRunCreated: ({ run_id }) => {
              run.runId = run_id;
              // The run is on the server now: the runs list shows it (and its Cancel) at once.
              void queries.invalidateQueries({ queryKey: keys.runs });
              show();
            },
          }),
        );
        for (let next = queued.current.shift(); next; next = queued.current.shift()) {
          // One cancelled while it waited is not followed.
          const { status } = await client.runs.get(threadId, next.runId);
          if (status !== 'pending' && status !== 'running') continue;
          run.runId = next.runId;
          run.values = undefined;
          await Promise.all([keys.state, keys.runs].map((queryKey) => queries.invalidateQueries({ queryKey })));
          show();
          await follow(client.runs.joinStream(threadId, next.runId, { lastEventId: '-1', streamMode: next.modes }));
        }
        run.status = 'done';
      } catch (error) {
        run.status = 'error';
        run.error = error instanceof Error ? error.message : String(error);
        queued.current = [];
      } finally {
        // The views show the thread as the server has it now, then stop showing the stream's.
        await Promise.all([keys.state, keys.runs, keys.list].map((queryKey) => queries.invalidateQueries({ queryKey })));
        running.current = false;
        run.partial = [];
        show();
      }
    },
    [client, threadId, target.key, queries],
  );

  return { live, start };
}
