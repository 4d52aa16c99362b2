/**
 * `GET /threads/{thread_id}/stream`: the thread's classic event stream across runs, as the
 * LangGraph API's "join thread stream" (the SDK's `threads.joinStream`). It joins the thread's
 * current run (the oldest unfinished one; without one, the next run created) and then each next
 * run in queue order, and stays open until the client leaves or the thread is deleted.
 *
 * `stream_mode` (one or several): `run_modes` (default) — every event of each run as its own
 * stream sends it (`metadata` first), then `run_done` `{run_id, status}` when it ended;
 * `lifecycle` — only each run's `metadata` and `run_done`; `state_update` — only `values` events
 * (runs stream them with the default stream mode).
 *
 * Event ids are `<run_id>:<id in the run's stream>` (`<run_id>:done` for run_done), so
 * `Last-Event-ID` resumes after any event, across runs; `-` (or `-1`) replays the thread from its
 * first run whose events are still kept. The current run is joined from its start when it was
 * created with `stream_resumable`, else from now, as `GET …/runs/{run_id}/stream` does.
 *
 * Authorization (custom auth): `threads:read` on the thread; a thread outside its filter is a 404.
 */
import type { BrokerEvent, SubscribeFrom } from '@berth/broker';
import { RequestValidationError } from '@berth/errors';
import { SseWriter } from '@berth/http';
import { z } from 'zod';
import type { Run, RunCursor } from '../storage/runs.js';
import type { MetadataFilter } from '../storage/sql.js';
import type { ServerContext } from './context.js';
import { ThreadPath } from './schemas.js';
import type { AgentApi } from './access.js';

const ThreadStreamMode = z.enum(['run_modes', 'lifecycle', 'state_update']);
type Mode = z.output<typeof ThreadStreamMode>;

/** Longest wait between two looks for the thread's next run while none is running. */
const MAX_POLL_MS = 1000;

/** Where a thread stream begins: a run to stream (from `from`), then the runs after `cursor`. */
interface Start {
  run?: { run: Run; cursor: RunCursor; from: SubscribeFrom };
  cursor: RunCursor | null;
}

type ThreadEvent = { run: Run; event: BrokerEvent } | { run: Run; done: string };

function lastEventIdError(msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['header', 'last-event-id'], msg, type: 'value_error' }]);
}

/** Where to begin, from the request's Last-Event-ID. */
async function startOf(ctx: ServerContext, threadId: string, lastEventId: string | undefined): Promise<Start> {
  if (lastEventId === '-' || lastEventId === '-1') return { cursor: null };
  if (lastEventId) {
    const match = /^([0-9a-f-]{36}):(\d+|done)$/i.exec(lastEventId);
    if (!match) throw lastEventIdError('expected an event id of this stream (<run_id>:<n>), or "-" to replay the thread');
    const [, runId, after] = match as unknown as [string, string, string];
    const cursor = await ctx.runs.cursor(threadId, runId);
    const run = cursor && after !== 'done' ? await ctx.runs.getById(runId) : undefined;
    if (run) return { run: { run, cursor: cursor!, from: { after } }, cursor: null };
    // A run that is gone (deleted, rolled back) no longer tells where it was: go on from now.
    if (cursor) return { cursor };
  }
  const current = await ctx.runs.nextAfter(threadId, null, true);
  if (current) return { run: { run: current, cursor: current.cursor, from: current.kwargs.stream_resumable ? 'start' : 'now' }, cursor: null };
  return { cursor: (await ctx.runs.cursor(threadId)) ?? null };
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** The events of the thread's runs from `start` on, until `signal` aborts or the thread is gone. */
async function* threadEvents(
  ctx: ServerContext,
  threadId: string,
  filter: MetadataFilter | undefined,
  start: Start,
  signal: AbortSignal,
): AsyncGenerator<ThreadEvent> {
  let next = start.run;
  let cursor = start.cursor;
  for (let idleMs = 25; !signal.aborted;) {
    if (!next) {
      const run = await ctx.runs.nextAfter(threadId, cursor);
      if (!run) {
        if (!(await ctx.threads.find(threadId, filter))) return;
        await pause(idleMs, signal);
        idleMs = Math.min(idleMs * 2, MAX_POLL_MS);
        continue;
      }
      next = { run, cursor: run.cursor, from: 'start' };
    }
    idleMs = 25;
    const { run, from } = next;
    if (await ctx.runService.eventsRetained(run)) {
      for await (const event of ctx.runService.events(run.run_id, from, signal)) yield { run, event };
    }
    if (signal.aborted) return;
    // A run whose row is gone was rolled back.
    yield { run, done: (await ctx.runs.getById(run.run_id))?.status ?? 'rollback' };
    cursor = next.cursor;
    next = undefined;
  }
}

/** Whether a run's event `name` goes to a stream of `modes`. */
function wanted(modes: ReadonlySet<Mode>, name: string): boolean {
  return modes.has('run_modes') || (modes.has('lifecycle') && (name === 'metadata' || name === 'run_done')) || (modes.has('state_update') && name === 'values');
}

export function threadStreamRoutes(api: AgentApi, ctx: ServerContext): void {
  api.route({
    method: 'get',
    path: '/threads/{thread_id}/stream',
    access: ['custom_auth'],
    summary: "Join the thread's stream: the current run's events and each next run's, until the client leaves",
    tags: ['threads'],
    params: ThreadPath,
    query: z.strictObject({ stream_mode: z.union([ThreadStreamMode, z.array(ThreadStreamMode)]).optional() }),
    events:
      'Server-sent events of each run on the thread in turn (as its run stream sends them), each followed by `run_done` {run_id, status}; ' +
      'stream_mode `lifecycle` sends only `metadata` and `run_done`, `state_update` only `values`. Ids are `<run_id>:<n>`: send the last one as ' +
      'Last-Event-ID to resume, or `-` to replay the thread',
    errors: [404],
    handler: async ({ params, query, req, res, auth }) => {
      const { filter } = await ctx.authz.authorize(auth, 'threads:read', { thread_id: params.thread_id });
      await ctx.threads.get(params.thread_id, filter);
      const modes = new Set<Mode>(query.stream_mode === undefined ? ['run_modes'] : [query.stream_mode].flat());
      const lastEventId = req.headers['last-event-id'];
      const start = await startOf(ctx, params.thread_id, typeof lastEventId === 'string' ? lastEventId.trim() : undefined);
      const abort = new AbortController();
      // Location: the SDK reconnects there with Last-Event-ID when the connection breaks.
      const sse = new SseWriter(res, { headers: { Location: `/threads/${params.thread_id}/stream` } });
      sse.onClose(() => abort.abort());
      try {
        for await (const item of threadEvents(ctx, params.thread_id, filter, start, abort.signal)) {
          if ('done' in item) {
            if (wanted(modes, 'run_done')) sse.send({ event: 'run_done', data: { run_id: item.run.run_id, status: item.done }, id: `${item.run.run_id}:done` });
          } else if (wanted(modes, item.event.event)) {
            sse.send({ event: item.event.event, data: item.event.data, id: `${item.run.run_id}:${item.event.id}` });
          }
        }
      } catch (error) {
        if (!abort.signal.aborted) sse.send({ event: 'error', data: { error: (error as Error).name, message: (error as Error).message } });
      }
      sse.end();
    },
  });
}
