/**
 * Crons through the official SDK (`client.crons`) against real Postgres (and Redis for the queue):
 * CRUD, search and count, bad input, and ticks — a one-minute schedule fires within its minute
 * exactly once across two agent-server processes; paused and deleted crons do not fire; a tick
 * missed while no worker ran fires once when one comes up.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { Client, type Cron } from '@langchain/langgraph-sdk';
import { ManualClock } from '@berth/clock';
import { createTestDatabase, testRedisUrl, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import type { RunningAgentServer } from './index.js';
import { spawnAgentServer, startTestServer } from './__tests__/fixtures.js';

let db: TestDatabase;
let server: RunningAgentServer;
let client: Client;
const children: ChildProcess[] = [];
const servers: RunningAgentServer[] = [];

beforeAll(async () => {
  db = await createTestDatabase('agentcron');
  server = await startTestServer(db.url, { schema: 'crons' });
  client = new Client({ apiUrl: server.url });
}, 60_000);
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const s of [server, ...servers]) await s?.close();
  await db?.drop();
});

const json = { 'content-type': 'application/json' };
async function call(method: string, path: string, body?: unknown, url = server.url) {
  const response = await fetch(`${url}${path}`, { method, headers: json, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: (await response.json().catch(() => null)) as Record<string, unknown> & { detail?: unknown } };
}

async function sql<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    return (await c.query<T>(text, params)).rows;
  } finally {
    await c.end();
  }
}

/** Runs the ticks of a cron made, by the `cron_id` in their metadata. */
const runsOf = (schema: string, cronId: string) =>
  sql<{ created_at: Date }>(`SELECT created_at FROM ${schema}.runs WHERE metadata @> $1::jsonb ORDER BY created_at`, [JSON.stringify({ cron_id: cronId })]);

describe('cron CRUD through the SDK', () => {
  it('creates a stateless cron without a thread, with its next run in its time zone', async () => {
    const cron = await client.crons.create('echo', {
      schedule: '30 9 * * 1-5',
      timezone: 'America/New_York',
      input: { messages: [{ role: 'user', content: 'standup' }] },
      metadata: { team: 'a' },
    });
    expect(cron).toMatchObject({ assistant_id: expect.any(String), thread_id: null, schedule: '30 9 * * 1-5', metadata: { team: 'a' }, enabled: true });
    expect(cron.payload).toEqual({ input: { messages: [{ role: 'user', content: 'standup' }] } });
    const next = new Date(cron.next_run_date);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    // 9:30 in New York is 13:30 or 14:30 UTC, on a weekday.
    expect(`${next.getUTCHours()}:${next.getUTCMinutes()}`).toMatch(/^1[34]:30$/);
    const got = await call('GET', `/runs/crons/${cron.cron_id}`);
    expect(got.body).toMatchObject({ cron_id: cron.cron_id, timezone: 'America/New_York', on_run_completed: 'delete', user_id: null, end_time: null });
  });

  it('creates thread crons, and searches, sorts, selects, pages and counts', async () => {
    const thread = await client.threads.create();
    const a = await client.crons.createForThread(thread.thread_id, 'echo', { schedule: '0 * * * *', metadata: { team: 'b' } });
    const b = await client.crons.createForThread(thread.thread_id, 'echo', { schedule: '0 0 1 1 *', metadata: { team: 'b' }, enabled: false });
    expect(a.thread_id).toBe(thread.thread_id);
    expect((b as Cron).next_run_date).toBeNull();

    const onThread = await client.crons.search({ threadId: thread.thread_id, sortBy: 'created_at', sortOrder: 'asc' });
    expect(onThread.map((c) => c.cron_id)).toEqual([a.cron_id, b.cron_id]);
    expect((await client.crons.search({ threadId: thread.thread_id, enabled: false })).map((c) => c.cron_id)).toEqual([b.cron_id]);
    expect((await client.crons.search({ metadata: { team: 'b' }, limit: 1, offset: 1, sortBy: 'created_at', sortOrder: 'asc' })).map((c) => c.cron_id)).toEqual(
      [b.cron_id],
    );
    const selected = await client.crons.search({ threadId: thread.thread_id, select: ['cron_id', 'schedule'], sortBy: 'created_at', sortOrder: 'desc' });
    expect(selected).toEqual([
      { cron_id: b.cron_id, schedule: '0 0 1 1 *' },
      { cron_id: a.cron_id, schedule: '0 * * * *' },
    ]);
    // A graph name stands for its system assistant.
    const byGraph = await client.crons.search({ assistantId: 'echo', limit: 100 });
    expect(byGraph.map((c) => c.cron_id)).toEqual(expect.arrayContaining([a.cron_id, b.cron_id]));
    expect(await client.crons.search({ assistantId: 'slow' })).toEqual([]);
    expect(await client.crons.count({ threadId: thread.thread_id })).toBe(2);
    expect(await client.crons.count({ metadata: { team: 'b' }, assistantId: 'echo' })).toBe(2);
  });

  it('updates: a new schedule moves next_run_date, enabled:false clears it, end_time:null clears the end', async () => {
    const cron = await client.crons.create('echo', { schedule: '0 0 * * *', endTime: '2999-01-01T00:00:00Z', metadata: { a: 1 } });
    const hourly = await client.crons.update(cron.cron_id, { schedule: '0 * * * *', metadata: { b: 2 }, input: { messages: [] } });
    expect(hourly).toMatchObject({
      schedule: '0 * * * *',
      metadata: { a: 1, b: 2 },
      payload: { input: { messages: [] } },
      end_time: '2999-01-01T00:00:00.000Z',
    });
    expect(new Date(hourly.next_run_date!).getTime() - Date.now()).toBeLessThanOrEqual(3_600_000);
    const paused = await client.crons.update(cron.cron_id, { enabled: false, endTime: null });
    expect(paused).toMatchObject({ enabled: false, next_run_date: null, end_time: null });
    const resumed = await client.crons.update(cron.cron_id, { enabled: true });
    expect(resumed.next_run_date).toBe(hourly.next_run_date);
    // An end_time before the next tick: no more ticks.
    const ended = await client.crons.update(cron.cron_id, { endTime: new Date(Date.now() - 1000).toISOString() });
    expect(ended.next_run_date).toBeNull();
  });

  it('deletes: the cron is gone (404 after), and deleting a thread removes its crons', async () => {
    const cron = await client.crons.create('echo', { schedule: '* * * * *' });
    await client.crons.delete(cron.cron_id);
    expect((await call('GET', `/runs/crons/${cron.cron_id}`)).status).toBe(404);
    expect((await call('DELETE', `/runs/crons/${cron.cron_id}`)).status).toBe(404);
    const thread = await client.threads.create();
    const onThread = await client.crons.createForThread(thread.thread_id, 'echo', { schedule: '* * * * *' });
    await client.threads.delete(thread.thread_id);
    expect((await call('GET', `/runs/crons/${onThread.cron_id}`)).status).toBe(404);
  });

  it('answers 422 for a bad schedule, time zone or field, and 404 for what does not exist', async () => {
    const bad = async (body: Record<string, unknown>) =>
      (await call('POST', '/runs/crons', { assistant_id: 'echo', schedule: '* * * * *', ...body })).body.detail;
    expect(await bad({ schedule: '*/10 * * * * *' })).toEqual([expect.objectContaining({ loc: ['body', 'schedule'], msg: expect.stringMatching(/5 fields/) })]);
    expect(await bad({ schedule: '61 * * * *' })).toEqual([expect.objectContaining({ loc: ['body', 'schedule'] })]);
    for (const schedule of ['every minute', 'H * * * *', '@DAILY', '@secondly', '0 0 30 2 *']) {
      expect({ schedule, detail: await bad({ schedule }) }).toEqual({ schedule, detail: [expect.objectContaining({ loc: ['body', 'schedule'] })] });
    }
    expect((await call('POST', '/runs/crons', { assistant_id: 'echo', schedule: '0 9 * * THU', timezone: 'Etc/GMT+5' })).status).toBe(200);
    expect(await bad({ timezone: 'Mars/Olympus_Mons' })).toEqual([
      expect.objectContaining({ loc: ['body', 'timezone'], msg: expect.stringMatching(/time zone/) }),
    ]);
    expect(await bad({ every: 'minute' })).toEqual([{ loc: ['body', 'every'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' }]);
    expect(await bad({ end_time: 'tomorrow' })).toEqual([expect.objectContaining({ loc: ['body', 'end_time'] })]);
    expect((await call('POST', '/runs/crons', { assistant_id: 'echo' })).body.detail).toEqual([
      { loc: ['body', 'schedule'], msg: 'Field required', type: 'missing' },
    ]);
    const cron = await client.crons.create('echo', { schedule: '* * * * *' });
    expect((await call('PATCH', `/runs/crons/${cron.cron_id}`, { timezone: 'Nowhere' })).status).toBe(422);

    expect((await call('POST', '/runs/crons', { assistant_id: 'no-such-graph', schedule: '* * * * *' })).status).toBe(404);
    const missingThread = await call('POST', `/threads/${crypto.randomUUID()}/runs/crons`, { assistant_id: 'echo', schedule: '* * * * *' });
    expect(missingThread).toMatchObject({ status: 404, body: { detail: expect.stringMatching(/Thread with ID .* not found/) } });
    expect((await call('PATCH', `/runs/crons/${crypto.randomUUID()}`, { enabled: false })).status).toBe(404);
    expect((await call('GET', '/runs/crons/not-a-uuid')).status).toBe(422);
  });
});

describe('ticks', () => {
  /**
   * A clock `msBefore` a minute boundary at least a minute past the real time (the overdue sweep
   * and other processes go by the real time: this keeps the minute's ticks theirs only when due).
   * Servers on it queue a tick due at `minute` to run `msBefore` from now.
   */
  function beforeMinute(msBefore: number): { clock: ManualClock; minute: number } {
    const minute = Math.ceil(Date.now() / 60_000) * 60_000 + 60_000;
    return { clock: new ManualClock(minute - msBefore), minute };
  }
  const nextRun = async (schema: string, cronId: string) =>
    (await sql<{ next: Date | null }>(`SELECT next_run_date AS next FROM ${schema}.crons WHERE cron_id = $1`, [cronId]))[0]?.next?.getTime();
  /** Waits until the cron's tick ran and it moved on to `next` (its run is made before it moves). */
  const movedOn = (schema: string, cronId: string, next: number) =>
    until(`cron ${cronId} to move on`, async () => ((await nextRun(schema, cronId)) === next ? true : undefined), 15_000, 50);

  it('fires a tick missed while no worker ran once when a worker comes up, then goes on from now', async () => {
    const { clock, minute } = beforeMinute(30_000);
    const api = await startTestServer(db.url, { schema: 'missed', workers: 0, clock });
    let worker: RunningAgentServer | undefined;
    try {
      const apiClient = new Client({ apiUrl: api.url });
      const cron = await apiClient.crons.create('echo', {
        schedule: '* * * * *',
        onRunCompleted: 'keep',
        input: { messages: [{ role: 'user', content: 'tick' }] },
      });
      expect(new Date(cron.next_run_date).getTime()).toBe(minute);
      // Ten ticks missed: the cron's next tick lies ten minutes back.
      await sql('UPDATE missed.crons SET next_run_date = $2 WHERE cron_id = $1', [cron.cron_id, new Date(minute - 600_000)]);
      expect(await runsOf('missed', cron.cron_id)).toHaveLength(0);

      worker = await startTestServer(db.url, { schema: 'missed', workers: 2, clock });
      // One run for the ten missed ticks; the next tick is the schedule's first after now, not after the missed one.
      await movedOn('missed', cron.cron_id, minute);
      expect(await runsOf('missed', cron.cron_id)).toHaveLength(1);
    } finally {
      await worker?.close();
      await api.close();
    }
  }, 60_000);

  it('fires a one-minute schedule exactly once across two processes (Postgres and Redis queues); paused and deleted crons do not fire', async () => {
    // Each queue backend: API-only servers make the crons (on the clock) and pause or delete some
    // (another server). No worker runs yet: the ticks' jobs wait in the queue, so none can fire
    // before its cron is paused or deleted, however long that takes. Then the workers start: one in
    // this process on the clock and one in a child process, competing for the ticks.
    const { clock, minute } = beforeMinute(1_000);
    const redis = { schema: 'crons_redis', redisUrl: testRedisUrl() };
    const apiOnly = await Promise.all([
      startTestServer(db.url, { schema: 'crons', clock, workers: 0 }),
      startTestServer(db.url, { ...redis, clock, workers: 0 }),
      startTestServer(db.url, { schema: 'crons', workers: 0 }),
      startTestServer(db.url, { ...redis, workers: 0 }),
    ]);
    servers.push(...apiOnly);
    const [pgHere, redisHere, pgThere, redisThere] = apiOnly.map((s) => new Client({ apiUrl: s.url }));

    const here = pgHere!;
    const thread = await here.threads.create();
    const setups = [
      { schema: 'crons', here, there: pgThere! },
      { schema: 'crons_redis', here: redisHere!, there: redisThere! },
    ];
    const made = await Promise.all(
      setups.map(async ({ schema, here, there }) => {
        // Made on the clock's server first, so their ticks are queued for the same instant ahead of the others'.
        const paused = await here.crons.create('echo', { schedule: '* * * * *' });
        await there.crons.update(paused.cron_id, { enabled: false });
        const deleted = await here.crons.create('echo', { schedule: '* * * * *' });
        await there.crons.delete(deleted.cron_id);
        const stateless = await here.crons.create('echo', {
          schedule: '* * * * *',
          onRunCompleted: 'keep',
          input: { messages: [{ role: 'user', content: 'tick' }] },
        });
        expect(new Date(stateless.next_run_date).getTime()).toBe(minute);
        return { schema, stateless, paused, deleted };
      }),
    );
    const onThread = await here.crons.createForThread(thread.thread_id, 'echo', {
      schedule: '* * * * *',
      input: { messages: [{ role: 'user', content: 'tick' }] },
    });

    const [workers, spawned] = await Promise.all([
      Promise.all([startTestServer(db.url, { schema: 'crons', clock }), startTestServer(db.url, { ...redis, clock })]),
      Promise.all([spawnAgentServer(db.url, { config: { schema: 'crons' } }), spawnAgentServer(db.url, { config: redis })]),
    ]);
    servers.push(...workers);
    children.push(...spawned.map((s) => s.child));

    // The ticks fell due a second after the clock's now; each fires once and its cron moves on a minute.
    for (const { schema, stateless, paused, deleted } of made) {
      await movedOn(schema, stateless.cron_id, minute + 60_000);
      expect({ schema, runs: (await runsOf(schema, stateless.cron_id)).length }).toEqual({ schema, runs: 1 });
      expect(await runsOf(schema, paused.cron_id)).toHaveLength(0);
      expect(await runsOf(schema, deleted.cron_id)).toHaveLength(0);
    }
    await movedOn('crons', onThread.cron_id, minute + 60_000);
    const threadRuns = await here.runs.list(thread.thread_id);
    expect(threadRuns).toHaveLength(1);
    expect(threadRuns[0]).toMatchObject({ multitask_strategy: 'enqueue', metadata: { cron_id: onThread.cron_id } });
    await until(
      "the tick's run on the thread to succeed",
      async () => ((await here.runs.get(thread.thread_id, threadRuns[0]!.run_id)).status === 'success' ? true : undefined),
      10_000,
      20,
    );
    expect((await here.threads.getState<{ messages: { content: string }[] }>(thread.thread_id)).values.messages.at(-1)?.content).toBe('echo: tick');
  }, 120_000);
});
