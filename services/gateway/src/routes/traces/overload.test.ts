/**
 * Ingest faster than the store drains: the store is stalled (a real Postgres lock on run_keys,
 * held by the test) while batches arrive. Batches beyond what the export-worker may have in flight
 * are answered 503 with Retry-After (the langsmith client retries 503; it drops a batch on a 500),
 * and every run of a batch answered 202 is stored once the store moves again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createDatabase, sql, type Database } from '@berth/db';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { Client } from 'langsmith';
import type { RunningServer } from '@berth/http';
import { rootRun, startTraceStack, traceServer, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

let stack: TraceStack;
let database: Database<never>;

beforeAll(async () => {
  stack = await startTraceStack('gw_traces_overload', { worker: { traceIngestMaxBatchesInFlight: 2 } });
  database = createDatabase<never>({ connectionString: stack.databaseUrl, schema: 'berth_export', max: 3 });
}, 60_000);
afterAll(async () => {
  await database?.close();
  await stack?.close();
});

function run(project: string): Json {
  const start = new Date().toISOString();
  return rootRun({ end_time: start, outputs: { a: 2 }, session_name: project });
}

function multipart(runs: Json[]): { body: string; type: string } {
  const boundary = `----berth${randomUUID()}`;
  const parts = runs.map(
    (r) => `--${boundary}\r\nContent-Disposition: form-data; name="post.${r.id}"\r\nContent-Type: application/json\r\n\r\n${JSON.stringify(r)}\r\n`,
  );
  return { body: `${parts.join('')}--${boundary}--\r\n`, type: `multipart/form-data; boundary=${boundary}` };
}

async function post(runs: Json[], base = stack.gateway.url): Promise<{ status: number; retryAfter: string | null; body: Json }> {
  const { body, type } = multipart(runs);
  const res = await fetch(`${base}/runs/multipart`, { method: 'POST', headers: { 'x-api-key': stack.keyA, 'content-type': type }, body });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Json };
}

async function storedIds(ids: string[]): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`SELECT id::text FROM runs WHERE id = ANY(${ids}::uuid[]) AND end_time IS NOT NULL`.execute(database.db);
  return rows.map((r) => r.id).sort();
}

/** Until `count` statements wait for a lock (the batches in flight at the stalled store). */
async function waitingOnLocks(count: number): Promise<void> {
  for (;;) {
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(database.db);
    if (rows[0]!.n >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Stalls the store's writes until the returned function is called (a transaction holding run_keys). */
async function stallStore(): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holding = database.db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE run_keys IN ACCESS EXCLUSIVE MODE`.execute(trx);
    locked();
    await released;
  });
  await isLocked;
  return async () => {
    release();
    await holding;
  };
}

describe('ingest while the store cannot keep up', () => {
  it('answers 503 with Retry-After beyond the batches in flight, and stores every run it answered 202 for', async () => {
    const resume = await stallStore();
    const first = [run('overload'), run('overload')];
    const second = [run('overload')];
    const held = [post(first), post(second)];
    await waitingOnLocks(2);
    // The backlog as an operator sees it: both batches the store may have are in flight.
    const inFlight = async () => sampleSum(parseMetrics((await scrape()).body), 'berth_trace_ingest_batches_in_flight');
    expect(await inFlight()).toBe(2);

    const refused = await Promise.all([post([run('overload')]), post([run('overload')]), post([run('overload')])]);
    expect(refused.map((r) => r.status)).toEqual([503, 503, 503]);
    expect(refused.every((r) => Number(r.retryAfter) > 0)).toBe(true);
    expect(refused[0]!.body.detail).toMatch(/busy/);

    await resume();
    const answered = await Promise.all(held);
    expect(answered.map((r) => [r.status, r.body.stored])).toEqual([
      [202, 2],
      [202, 1],
    ]);
    expect(await inFlight()).toBe(0);
    const acknowledged = [...first, ...second].map((r) => r.id).sort();
    expect(await storedIds(acknowledged)).toEqual(acknowledged);
  });

  it("the langsmith client's batches refused meanwhile are retried: no run is lost and no batch sees a 500", async () => {
    const statuses: number[] = [];
    const client = new Client({
      apiUrl: stack.gateway.url,
      apiKey: stack.keyA,
      fetchImplementation: (async (input: any, init?: any) => {
        const res = await fetch(input, init);
        if (String(input).endsWith('/runs/multipart')) statuses.push(res.status);
        return res;
      }) as typeof fetch,
    });
    const batches = Array.from({ length: 6 }, () => Array.from({ length: 5 }, () => run('overload-sdk')));
    const resume = await stallStore();
    const sending = Promise.all(batches.map((runCreates) => client.multipartIngestRuns({ runCreates: runCreates as never[] })));
    // The client sends up to 5 batches at once: 2 wait at the store, the others are refused.
    await waitingOnLocks(2);
    while (!statuses.includes(503)) await new Promise((resolve) => setTimeout(resolve, 20));
    await resume();
    await sending;
    await client.awaitPendingTraceBatches();

    const ids = batches
      .flat()
      .map((r) => r.id as string)
      .sort();
    expect(await storedIds(ids)).toEqual(ids);
    expect(statuses).toContain(503);
    expect(statuses.filter((s) => s !== 202 && s !== 503)).toEqual([]);
  }, 60_000);

  it('a gateway forwarding as many batches as it may answers 503 with Retry-After before reading more', async () => {
    const server: RunningServer = await traceServer(stack, { traceLimits: { maxIngestsInFlight: 1 } });
    try {
      const resume = await stallStore();
      const held = [run('overload-gateway')];
      const first = post(held, server.url);
      await waitingOnLocks(1);
      const refused = await post([run('overload-gateway')], server.url);
      expect(refused.status).toBe(503);
      expect(Number(refused.retryAfter)).toBeGreaterThan(0);
      expect(refused.body.detail).toMatch(/gateway/);
      await resume();
      expect((await first).status).toBe(202);
      expect(await storedIds([held[0]!.id])).toEqual([held[0]!.id]);
      // Once the first is answered, the next is taken.
      expect((await post([run('overload-gateway')], server.url)).status).toBe(202);
    } finally {
      await server.close();
    }
  });
});
