/**
 * The thread lifecycle: thread TTLs (`ttl` on create and update, langgraph.json
 * checkpointer.ttl) swept by a sweeper whose clock the test moves, `POST /threads/prune`, bulk
 * `POST /runs/cancel` and the thread's stream across runs (`GET /threads/{id}/stream`) — driven by
 * the official SDK against real Postgres, under the custom auth of test-projects/auth (users
 * `user-a` and `user-b`, each seeing only the threads they created).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Client } from '@langchain/langgraph-sdk';
import { createPool } from '@berth/db';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { ManualClock } from '@berth/clock';
import { human, until } from './__tests__/fixtures.js';
import { startAgentServer, type RunningAgentServer } from './index.js';
import { ThreadSweeper } from './storage/thread-ttl.js';
import { ThreadStore } from './storage/threads.js';

const project = fileURLToPath(new URL('../test-projects/auth/langgraph.lifecycle.json', import.meta.url));
const MINUTE = 60_000;
let db: TestDatabase;
let server: RunningAgentServer;
/** The clock of the server's own sweeper (langgraph.json: every 60 minutes). */
const serverClock = new ManualClock(Date.now());
let sql: pg.Pool;
let a: Client;
let b: Client;
const as = (token: string) => new Client({ apiUrl: server.url, defaultHeaders: { Authorization: `Bearer ${token}` } });

async function call(path: string, init: { method?: string; token?: string; body?: unknown } = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { authorization: `Bearer ${init.token ?? 'user-a'}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined };
}

const count = async (query: string, threadId: string) => (await sql.query<{ n: number }>(query, [threadId])).rows[0]!.n;
const checkpoints = (threadId: string) => count('SELECT count(*)::int AS n FROM checkpoints WHERE thread_id = $1', threadId);
const runsOf = (threadId: string) => count('SELECT count(*)::int AS n FROM runs WHERE thread_id = $1::uuid', threadId);
const exists = async (threadId: string) => (await call(`/threads/${threadId}`)).status === 200;

/** A thread of user-a with `turns` finished echo runs (several checkpoints each). */
async function threadWithRuns(turns: number, ttl?: { ttl: number; strategy: 'delete' | 'keep_latest' }): Promise<string> {
  const thread = await a.threads.create(ttl ? ({ ttl } as { ttl: { ttl: number; strategy: 'delete' } }) : {});
  for (let i = 0; i < turns; i++) await a.runs.wait(thread.thread_id, 'echo', { input: human(`turn ${i}`) });
  return thread.thread_id;
}

/** A sweeper of the server's threads on a clock the test moves, from now, every minute. */
function sweeperAt(): { clock: ManualClock; sweeper: ThreadSweeper; after(ms: number): Promise<void> } {
  const clock = new ManualClock(Date.now());
  const sweeper = new ThreadSweeper(new ThreadStore(sql), silentLogger(), { clock, intervalMs: MINUTE });
  sweeper.start();
  return {
    clock,
    sweeper,
    async after(ms: number) {
      await clock.advance(ms);
      await sweeper.idle();
    },
  };
}

beforeAll(async () => {
  db = await createTestDatabase('agent');
  server = await startAgentServer(
    { configPath: project, databaseUrl: db.url, host: '127.0.0.1', port: 0, workers: 2, leaseMs: 1000, clock: serverClock },
    silentLogger(),
  );
  sql = createPool({ connectionString: db.url, schema: 'agent', max: 4 });
  a = as('user-a');
  b = as('user-b');
}, 60_000);
afterAll(async () => {
  await server?.close();
  await sql?.end();
  await db?.drop();
});

describe('thread TTL', () => {
  it('gives threads the TTL of langgraph.json checkpointer.ttl, or the one they are created or updated with', async () => {
    const plain = await a.threads.create();
    const byDefault = (await call(`/threads/${plain.thread_id}?include=ttl`)).body!.ttl as { strategy: string; ttl: number; expires_at: string };
    expect(byDefault).toMatchObject({ strategy: 'delete', ttl: 43200 });
    expect(Date.parse(byDefault.expires_at) - Date.now()).toBeGreaterThan(43199 * MINUTE);
    // The SDK's number form, and the API's {strategy, ttl}.
    const short = await a.threads.create({ ttl: 5 });
    expect((await call(`/threads/${short.thread_id}?include=ttl`)).body!.ttl).toMatchObject({ strategy: 'delete', ttl: 5 });
    await a.threads.update(short.thread_id, { ttl: { ttl: 7, strategy: 'keep_latest' } as unknown as { ttl: number; strategy: 'delete' } });
    expect((await call(`/threads/${short.thread_id}?include=ttl`)).body!.ttl).toMatchObject({ strategy: 'keep_latest', ttl: 7 });
    // Without include, a thread reads as the LangGraph API answers it.
    expect((await call(`/threads/${short.thread_id}`)).body).not.toHaveProperty('ttl');
    for (const ttl of [0, -1, 1e12, { ttl: 5, strategy: 'forever' }, { ttl: 5, extra: 1 }, 'soon']) {
      expect((await call('/threads', { body: { ttl } })).status).toBe(422);
    }
  });

  it("is swept by the server's worker role every checkpointer.ttl.sweep_interval_minutes", async () => {
    const thread = await a.threads.create({ ttl: 30 });
    await serverClock.advance(59 * MINUTE);
    expect(await exists(thread.thread_id)).toBe(true);
    await serverClock.advance(MINUTE); // the sweep of minute 60
    expect(
      await until(
        () => exists(thread.thread_id),
        (e) => !e,
      ),
    ).toBe(false);
  });

  it('deletes a thread with strategy delete, with its runs and checkpoints, once its TTL passed and not before', async () => {
    const threadId = await threadWithRuns(1, { ttl: 2, strategy: 'delete' });
    expect(await checkpoints(threadId)).toBeGreaterThan(0);
    const { sweeper, after } = sweeperAt();
    try {
      await after(MINUTE); // a sweep one minute after the run ended: not due
      expect(await exists(threadId)).toBe(true);
      await after(MINUTE + 1000); // the next sweep, past two minutes
      expect(await exists(threadId)).toBe(false);
      expect(await runsOf(threadId)).toBe(0);
      expect(await checkpoints(threadId)).toBe(0);
    } finally {
      await sweeper.close();
    }
  });

  it('keeps only the latest checkpoint with strategy keep_latest, and the thread goes on from it', async () => {
    const threadId = await threadWithRuns(2, { ttl: 1, strategy: 'keep_latest' });
    const before = await a.threads.getState(threadId);
    expect((await a.threads.getHistory(threadId, { limit: 100 })).length).toBeGreaterThan(2);
    const { sweeper, after } = sweeperAt();
    try {
      await after(MINUTE + 1000);
      const history = await a.threads.getHistory(threadId, { limit: 100 });
      expect(history).toHaveLength(1);
      expect(history[0]!.values).toEqual(before.values);
      expect((await a.threads.getState(threadId)).values).toEqual(before.values);
      // The next turn starts from the kept state.
      const next = (await a.runs.wait(threadId, 'echo', { input: human('again') })) as { messages: unknown[] };
      expect(next.messages).toHaveLength((before.values as { messages: unknown[] }).messages.length + 2);
    } finally {
      await sweeper.close();
    }
  });

  it('does not sweep a thread while it has a running run; it expires that long after the run ended', async () => {
    const thread = await a.threads.create({ ttl: 1 });
    const run = await a.runs.create(thread.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 } });
    await until(
      async () => (await a.runs.get(thread.thread_id, run.run_id)).status,
      (s) => s === 'running',
    );
    const { sweeper, after } = sweeperAt();
    try {
      await after(3 * MINUTE);
      expect(await exists(thread.thread_id)).toBe(true);
      await a.runs.cancel(thread.thread_id, run.run_id, true);
      expect((await a.runs.get(thread.thread_id, run.run_id)).status).toBe('interrupted');
      // The run's end counts as activity: the TTL runs from it (the sweep of minute 4 is 3 minutes later by this clock).
      await after(MINUTE);
      expect(await exists(thread.thread_id)).toBe(false);
    } finally {
      await sweeper.close();
    }
  });
});

describe('POST /threads/prune', () => {
  it('prunes with keep_latest and delete, leaving out missing and busy threads', async () => {
    const [one, two] = [await threadWithRuns(2), await threadWithRuns(1)];
    const values = (await a.threads.getState(one)).values;
    expect(await a.threads.prune([one, two], { strategy: 'keep_latest' })).toEqual({ pruned_count: 2 });
    expect(await a.threads.getHistory(one, { limit: 100 })).toHaveLength(1);
    expect((await a.threads.getState(one)).values).toEqual(values);

    const busy = await a.threads.create();
    const run = await a.runs.create(busy.thread_id, 'echo', { input: human('later'), afterSeconds: 600 });
    expect(await a.threads.prune([one, randomUUID(), busy.thread_id])).toEqual({ pruned_count: 1 });
    expect(await exists(one)).toBe(false);
    expect(await runsOf(one)).toBe(0);
    expect(await checkpoints(one)).toBe(0);
    expect(await exists(busy.thread_id)).toBe(true);
    await a.runs.cancel(busy.thread_id, run.run_id);
  });

  it("never prunes another user's thread", async () => {
    const mine = await threadWithRuns(1);
    expect(await b.threads.prune([mine])).toEqual({ pruned_count: 0 });
    expect(await b.threads.prune([mine], { strategy: 'keep_latest' })).toEqual({ pruned_count: 0 });
    expect(await exists(mine)).toBe(true);
    expect((await a.threads.getHistory(mine, { limit: 100 })).length).toBeGreaterThan(1);
  });

  it('refuses more than 1000 ids, an empty list and unknown strategies (422)', async () => {
    const ids = Array.from({ length: 1001 }, () => randomUUID());
    for (const body of [{ thread_ids: ids }, { thread_ids: [] }, { thread_ids: [randomUUID()], strategy: 'shred' }, { thread_ids: ['nope'] }, {}]) {
      expect((await call('/threads/prune', { body })).status).toBe(422);
    }
    expect((await call('/threads/prune', { body: { thread_ids: ids.slice(0, 1000) } })).body).toEqual({ pruned_count: 0 });
  });
});

describe('POST /runs/cancel', () => {
  const status = (c: Client, threadId: string, runId: string) => c.runs.get(threadId, runId).then((r) => r.status);

  it('cancels the runs named by id: a running one and the one queued behind it end interrupted', async () => {
    const thread = await a.threads.create();
    const running = await a.runs.create(thread.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 } });
    const queued = await a.runs.create(thread.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 }, multitaskStrategy: 'enqueue' });
    await until(
      () => status(a, thread.thread_id, running.run_id),
      (s) => s === 'running',
    );
    await a.runs.cancelMany({ threadId: thread.thread_id, runIds: [running.run_id, queued.run_id] });
    expect(await status(a, thread.thread_id, queued.run_id)).toBe('interrupted');
    expect(
      await until(
        () => status(a, thread.thread_id, running.run_id),
        (s) => s === 'interrupted',
      ),
    ).toBe('interrupted');
    expect((await a.threads.get(thread.thread_id)).status).toBe('idle');
  });

  it("cancels by status only the caller's runs; another user's run ids are not found", async () => {
    const later = { input: human('later'), afterSeconds: 600 };
    const [ta, tb] = [await a.threads.create(), await b.threads.create()];
    const ofA = [await a.runs.create(ta.thread_id, 'echo', later), await a.runs.create(ta.thread_id, 'echo', later)];
    const ofB = await b.runs.create(tb.thread_id, 'echo', later);

    const stolen = await call('/runs/cancel', { token: 'user-b', body: { thread_id: ta.thread_id, run_ids: [ofA[0]!.run_id] } });
    expect(stolen.status).toBe(404);
    await b.runs.cancelMany({ status: 'pending' });
    expect(await status(b, tb.thread_id, ofB.run_id)).toBe('interrupted');
    for (const run of ofA) expect(await status(a, ta.thread_id, run.run_id)).toBe('pending');

    // rollback: the runs are gone rather than interrupted.
    await a.runs.cancelMany({ status: 'all', action: 'rollback' });
    for (const run of ofA) expect((await call(`/threads/${ta.thread_id}/runs/${run.run_id}`)).status).toBe(404);
    expect(await status(b, tb.thread_id, ofB.run_id)).toBe('interrupted');
  });

  it('refuses a body naming both or neither, too many ids, and an unknown action (422)', async () => {
    const id = randomUUID();
    for (const [path, body] of [
      ['/runs/cancel', {}],
      ['/runs/cancel', { run_ids: [id], status: 'all' }],
      ['/runs/cancel', { status: 'done' }],
      ['/runs/cancel', { run_ids: Array.from({ length: 1001 }, () => randomUUID()) }],
      ['/runs/cancel?action=explode', { status: 'all' }],
    ] as const) {
      expect((await call(path, { body })).status).toBe(422);
    }
    expect((await call('/runs/cancel', { body: { run_ids: [id] } })).status).toBe(404);
  });
});

describe('POST /runs/search (the queue across threads)', () => {
  type Row = { run_id: string; thread_id: string; status: string };
  async function search(body: unknown, token = 'user-a') {
    const res = await fetch(`${server.url}/runs/search`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return {
      status: res.status,
      total: res.headers.get('x-pagination-total'),
      next: res.headers.get('x-pagination-next'),
      body: (await res.json()) as unknown,
    };
  }
  const rows = (found: { body: unknown }) => (found.body as Row[]).map((r) => [r.run_id, r.status]);

  it("lists the caller's pending and running runs of every thread, oldest first, paged; never another user's", async () => {
    // What earlier tests left unfinished is no part of this queue (a running run leaves once its worker stopped it).
    await a.runs.cancelMany({ status: 'all' });
    await b.runs.cancelMany({ status: 'all' });
    for (const user of [undefined, 'user-b']) {
      await until(
        () => search({}, user),
        (found) => rows(found).length === 0,
      );
    }
    const [t1, t2, tb] = [await a.threads.create(), await a.threads.create(), await b.threads.create()];
    const running = await a.runs.create(t1.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 } });
    await until(
      () => a.runs.get(t1.thread_id, running.run_id).then((r) => r.status),
      (s) => s === 'running',
    );
    const queued = await a.runs.create(t1.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 }, multitaskStrategy: 'enqueue' });
    const later = await a.runs.create(t2.thread_id, 'echo', { input: human('later'), afterSeconds: 600 });
    const ofB = await b.runs.create(tb.thread_id, 'echo', { input: human('later'), afterSeconds: 600 });

    const all = await search({});
    expect(all.status).toBe(200);
    expect(rows(all)).toEqual([
      [running.run_id, 'running'],
      [queued.run_id, 'pending'],
      [later.run_id, 'pending'],
    ]);
    expect((all.body as Row[]).map((r) => r.thread_id)).toEqual([t1.thread_id, t1.thread_id, t2.thread_id]);
    expect(all.total).toBe('3');
    expect(rows(await search({ status: ['pending'] }))).toEqual([
      [queued.run_id, 'pending'],
      [later.run_id, 'pending'],
    ]);
    const page = await search({ limit: 1, offset: 1 });
    expect({ rows: rows(page), total: page.total, next: page.next }).toEqual({ rows: [[queued.run_id, 'pending']], total: '3', next: '2' });
    // Another user sees only their own run.
    expect(rows(await search({}, 'user-b'))).toEqual([[ofB.run_id, 'pending']]);

    // Cancelled from the queue (POST /runs/cancel), a run leaves it; the queue moves on.
    await a.runs.cancelMany({ runIds: [running.run_id] });
    // The cancelled run stays `running` until its worker has stopped it; then the queued one starts.
    const after = await until(
      () => search({}),
      (found) => rows(found)[0]?.[0] === queued.run_id && rows(found)[0]?.[1] === 'running',
    );
    expect(rows(after)).toEqual([
      [queued.run_id, 'running'],
      [later.run_id, 'pending'],
    ]);
    await a.runs.cancelMany({ status: 'all' });
    await b.runs.cancelMany({ status: 'all' });
    // Pending runs leave at once; the running one when its worker has stopped it (until fails if it never does).
    await until(
      () => search({}),
      (found) => rows(found).length === 0,
    );
  });

  it('refuses unknown fields, finished statuses and pages over 100 (422)', async () => {
    for (const body of [{ status: ['success'] }, { status: [] }, { limit: 101 }, { offset: -1 }, { thread: 'x' }, { status: 'pending' }]) {
      const found = await search(body);
      expect({ body, status: found.status, detail: Array.isArray((found.body as { detail?: unknown }).detail) }).toEqual({ body, status: 422, detail: true });
    }
  });
});

describe('GET /threads/{thread_id}/stream', () => {
  type Part = { id?: string; event: string; data: unknown };

  /** Collects a thread stream's parts until `enough` holds (then leaves) or the server ends it. */
  async function collect(
    stream: AsyncIterable<Part>,
    abort: AbortController,
    enough: (parts: Part[]) => boolean,
    onPart?: (part: Part, parts: Part[]) => Promise<void>,
  ) {
    const parts: Part[] = [];
    try {
      for await (const part of stream) {
        parts.push(part);
        await onPart?.(part, parts);
        if (enough(parts)) break;
      }
    } finally {
      abort.abort();
    }
    return parts;
  }
  const doneCount = (parts: Part[]) => parts.filter((p) => p.event === 'run_done').length;

  it('replays the thread from its first run ("-") across runs, and resumes after any event id', async () => {
    const thread = await a.threads.create();
    const runs = [
      await a.runs.create(thread.thread_id, 'echo', { input: human('one') }),
      await a.runs.create(thread.thread_id, 'echo', { input: human('two') }),
    ];
    await a.runs.join(thread.thread_id, runs[1]!.run_id);

    const abort = new AbortController();
    const all = await collect(a.threads.joinStream(thread.thread_id, { lastEventId: '-', signal: abort.signal }), abort, (p) => doneCount(p) === 2);
    expect(all.map((p) => p.event)).toEqual(['metadata', 'values', 'values', 'run_done', 'metadata', 'values', 'values', 'run_done']);
    expect(all[0]!.data).toMatchObject({ run_id: runs[0]!.run_id });
    expect(all[3]).toEqual({ id: `${runs[0]!.run_id}:done`, event: 'run_done', data: { run_id: runs[0]!.run_id, status: 'success' } });
    expect(all[4]!.data).toMatchObject({ run_id: runs[1]!.run_id });
    expect((all[6]!.data as { messages: unknown[] }).messages).toHaveLength(4);
    expect(all.map((p) => p.id)).toEqual([...new Set(all.map((p) => p.id))]);

    // Resuming after the first run's second event gives exactly what followed it.
    const again = new AbortController();
    const resumed = await collect(a.threads.joinStream(thread.thread_id, { lastEventId: all[1]!.id!, signal: again.signal }), again, (p) => doneCount(p) === 2);
    expect(resumed).toEqual(all.slice(2));
    // lifecycle: only where each run starts and ends.
    const life = new AbortController();
    const lifecycle = await collect(
      a.threads.joinStream(thread.thread_id, { lastEventId: '-', streamMode: 'lifecycle', signal: life.signal }),
      life,
      (p) => doneCount(p) === 2,
    );
    expect(lifecycle.map((p) => p.event)).toEqual(['metadata', 'run_done', 'metadata', 'run_done']);
    // Several modes: their union.
    const both = new AbortController();
    const union = await collect(
      a.threads.joinStream(thread.thread_id, { lastEventId: '-', streamMode: ['lifecycle', 'state_update'], signal: both.signal }),
      both,
      (p) => doneCount(p) === 2,
    );
    expect(union).toEqual(all);
  });

  it('joins the running run, follows the next one, and ends when the thread is deleted', async () => {
    const thread = await a.threads.create();
    const first = await a.runs.create(thread.thread_id, 'slow', {
      input: {},
      context: { delay_ms: 600_000 },
      streamResumable: true,
      streamMode: ['values', 'custom'],
    });
    const abort = new AbortController();
    let second: string | undefined;
    const parts = await collect(
      a.threads.joinStream(thread.thread_id, { signal: abort.signal }),
      abort,
      () => false,
      async (part, seen) => {
        // Joined: stop the first run; once it is done, start the next; once that is done, delete the thread.
        if (part.event === 'custom') await a.runs.cancel(thread.thread_id, first.run_id);
        if (part.event === 'run_done' && doneCount(seen) === 1) second = (await a.runs.create(thread.thread_id, 'echo', { input: human('next') })).run_id;
        if (part.event === 'run_done' && doneCount(seen) === 2) await a.threads.delete(thread.thread_id);
      },
    );
    expect(parts.filter((p) => p.event === 'metadata').map((p) => (p.data as { run_id: string }).run_id)).toEqual([first.run_id, second]);
    expect(parts.filter((p) => p.event === 'run_done').map((p) => p.data)).toEqual([
      { run_id: first.run_id, status: 'interrupted' },
      { run_id: second, status: 'success' },
    ]);
  });

  it("is a 404 for another user's thread, never shows another thread's run, and is a 422 for a Last-Event-ID it never sent", async () => {
    const thread = await a.threads.create();
    await expect(async () => {
      for await (const part of b.threads.joinStream(thread.thread_id)) void part;
    }).rejects.toThrow(/404/);
    // Another thread's event id leads nowhere: b's stream shows b's run only.
    const theirs = await a.runs.create(thread.thread_id, 'echo', { input: human('secret') });
    await a.runs.join(thread.thread_id, theirs.run_id);
    const own = await b.threads.create();
    const run = await b.runs.create(own.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 }, streamResumable: true });
    const abort = new AbortController();
    const parts = await collect(
      b.threads.joinStream(own.thread_id, { lastEventId: `${theirs.run_id}:0`, signal: abort.signal }),
      abort,
      (p) => doneCount(p) === 1,
      async (part) => {
        if (part.event === 'metadata') await b.runs.cancel(own.thread_id, run.run_id);
      },
    );
    expect(parts.filter((p) => p.event === 'metadata' || p.event === 'run_done').map((p) => (p.data as { run_id: string }).run_id)).toEqual([
      run.run_id,
      run.run_id,
    ]);

    const res = await fetch(`${server.url}/threads/${thread.thread_id}/stream`, { headers: { authorization: 'Bearer user-a', 'last-event-id': 'banana' } });
    expect(res.status).toBe(422);
    expect((await call(`/threads/${thread.thread_id}/stream?stream_mode=everything`)).status).toBe(422);
  });
});
