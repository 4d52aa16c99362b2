/**
 * The trace store on a real Postgres: its migrations, day partitions, and runs that converge
 * whatever order their create and patch arrive in.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createDatabase, migrate, sql, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { parseFilter } from '../filter/parse.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { TRACE_STORE_SCHEMA, TraceStore, runScanQuery, type RunRow, type TraceTables } from './trace-store.js';

let testDb: TestDatabase;
let database: Database<TraceTables>;
let store: TraceStore;
const tenant = randomUUID();
let session: string;

beforeAll(async () => {
  testDb = await createTestDatabase('ew_traces');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  store = new TraceStore(database);
  session = (await store.createSession(tenant, { name: 'my-agent' })).id;
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

function create(id: string, start: string, extra: Record<string, unknown> = {}) {
  return { op: 'create' as const, id, session_id: session, name: 'agent', run_type: 'chain', start_time: start, inputs: { q: 'hi' }, ...extra };
}

describe('migrations', () => {
  it('apply once; a second start applies nothing', async () => {
    expect(await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir })).toEqual([]);
  });

  it('a second project with the same name in one tenant is a conflict, in another tenant it is fine', async () => {
    await expect(store.createSession(tenant, { name: 'my-agent' })).rejects.toMatchObject({ code: 'conflict' });
    await expect(store.createSession(randomUUID(), { name: 'my-agent' })).resolves.toMatchObject({ name: 'my-agent' });
  });
});

describe('partitions', () => {
  it("runs of each day go to that day's partition, and a one-day scan reads only it", async () => {
    const days = ['2026-03-01', '2026-03-02', '2026-03-03'];
    const result = await store.upsertRuns(
      tenant,
      days.map((d) => create(randomUUID(), `${d}T12:00:00Z`)),
    );
    expect(result.rejected).toEqual([]);
    const partitions = await sql<{ name: string }>`
      SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'runs'::regclass ORDER BY 1`.execute(database.db);
    expect(partitions.rows.map((r) => r.name)).toEqual(expect.arrayContaining(['runs_20260301', 'runs_20260302', 'runs_20260303']));

    const plan = await sql<{ 'QUERY PLAN': string }>`EXPLAIN SELECT * FROM runs WHERE session_id = ${session}::uuid
      AND start_time >= '2026-03-02T00:00:00Z' AND start_time < '2026-03-03T00:00:00Z' ORDER BY start_time, id`.execute(database.db);
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toContain('runs_20260302');
    expect(text).not.toContain('runs_20260301');
    expect(text).not.toContain('runs_20260303');
  });
});

describe('create and patch converge', () => {
  const start = '2026-04-10T08:00:00.000Z';
  const end = '2026-04-10T08:00:05.000Z';

  async function fetchRun(id: string) {
    const run = await store.getRun(tenant, id);
    return { name: run.name, inputs: run.inputs, outputs: run.outputs, end_time: run.end_time, status: run.status, total_tokens: run.total_tokens };
  }

  const expected = { name: 'agent', inputs: { q: 'hi' }, outputs: { a: 'hello' }, end_time: new Date(end), status: 'success', total_tokens: '42' };

  it('create then patch', async () => {
    const id = randomUUID();
    await store.upsertRuns(tenant, [create(id, start)]);
    await store.upsertRuns(tenant, [{ op: 'patch', id, end_time: end, outputs: { a: 'hello' }, total_tokens: 42 }]);
    expect(await fetchRun(id)).toEqual(expected);
  });

  it('patch before create: the patch waits, then the run has every field', async () => {
    const id = randomUUID();
    const first = await store.upsertRuns(tenant, [{ op: 'patch', id, end_time: end, outputs: { a: 'hello' }, total_tokens: 42 }]);
    expect(first.pending).toEqual([id]);
    await expect(store.getRun(tenant, id)).rejects.toMatchObject({ code: 'not_found' });
    await store.upsertRuns(tenant, [create(id, start)]);
    expect(await fetchRun(id)).toEqual(expected);
    const left = await sql<{ n: string }>`SELECT count(*) AS n FROM pending_run_patches WHERE run_id = ${id}::uuid`.execute(database.db);
    expect(left.rows[0]!.n).toBe('0');
  });

  it('both arriving twice, in one batch or several, leaves one row with the same fields', async () => {
    const id = randomUUID();
    const patch = { op: 'patch' as const, id, end_time: end, outputs: { a: 'hello' }, total_tokens: 42 };
    await store.upsertRuns(tenant, [patch, create(id, start), patch]);
    await store.upsertRuns(tenant, [create(id, start), create(id, start, { outputs: { a: 'stale' } })]);
    expect(await fetchRun(id)).toEqual(expected);
    const rows = await sql<{ n: string }>`SELECT count(*) AS n FROM runs WHERE id = ${id}::uuid`.execute(database.db);
    expect(rows.rows[0]!.n).toBe('1');
  });

  it('a later patch wins per field; fields it does not carry stay', async () => {
    const id = randomUUID();
    await store.upsertRuns(tenant, [create(id, start), { op: 'patch', id, outputs: { a: 'first' }, total_tokens: 42 }]);
    await store.upsertRuns(tenant, [{ op: 'patch', id, outputs: { a: 'hello' }, end_time: end }]);
    expect(await fetchRun(id)).toEqual(expected);
  });

  it("patches that waited are applied right after their create, before the batch's later writes", async () => {
    const id = randomUUID();
    await store.upsertRuns(tenant, [{ op: 'patch', id, outputs: { a: 'waited' }, total_tokens: 7, tags: [] }]);
    const result = await store.upsertRuns(tenant, [
      { op: 'patch', id, end_time: end },
      create(id, start, { outputs: { a: 'from the create' } }),
      { op: 'patch', id, outputs: { a: 'hello' } },
      create(id, start, { total_tokens: 1, tags: ['created'] }),
      { op: 'patch', id, total_tokens: 42 },
    ]);
    expect(result).toEqual({ stored: [id, id, id, id], pending: [id], rejected: [] });
    expect(await fetchRun(id)).toEqual(expected);
    expect((await store.getRun(tenant, id)).tags).toEqual(['created']);
  });

  it('ids in capitals name the same run as in lower case', async () => {
    const id = randomUUID().toUpperCase();
    await store.upsertRuns(tenant, [create(id, start)]);
    const again = await store.upsertRuns(tenant, [create(id, start), { op: 'patch', id, end_time: end, outputs: { a: 'hello' }, total_tokens: 42 }]);
    expect(again).toEqual({ stored: [id.toLowerCase(), id.toLowerCase()], pending: [], rejected: [] });
    expect(await fetchRun(id.toLowerCase())).toEqual(expected);
  });

  it('an error makes the status error; a child gets trace and ancestors from its dotted order', async () => {
    const root = randomUUID();
    const child = randomUUID();
    const dotted = `20260410T080000000000Z${root}.20260410T080001000000Z${child}`;
    await store.upsertRuns(tenant, [
      create(root, start),
      create(child, '2026-04-10T08:00:01Z', { parent_run_id: root, dotted_order: dotted, run_type: 'llm' }),
      { op: 'patch', id: child, error: 'rate limited', end_time: end },
    ]);
    const run = await store.getRun(tenant, child);
    expect(run).toMatchObject({ status: 'error', is_root: false, trace_id: root, parent_run_ids: [root], error: 'rate limited' });
    expect(await store.getRun(tenant, root)).toMatchObject({ is_root: true, trace_id: root, status: 'pending' });
  });

  it('bad writes are refused with a reason; the rest of the batch is stored', async () => {
    const good = randomUUID();
    const result = await store.upsertRuns(tenant, [
      { op: 'create', id: 'not-a-uuid', session_id: session, name: 'x', run_type: 'chain', start_time: start },
      { op: 'create', id: randomUUID(), session_id: session, name: 'x', run_type: 'chain' },
      { op: 'create', id: randomUUID(), session_id: randomUUID(), name: 'x', run_type: 'chain', start_time: start },
      create(good, start),
    ]);
    expect(result.stored).toEqual([good]);
    expect(result.rejected.map((r) => [r.index, r.reason])).toEqual([
      [0, 'id must be a UUID'],
      [1, 'a new run needs start_time'],
      [2, expect.stringContaining('not found')],
    ]);
  });

  it('another tenant neither reads nor overwrites a run', async () => {
    const id = randomUUID();
    await store.upsertRuns(tenant, [create(id, start)]);
    const other = randomUUID();
    const otherSession = (await store.createSession(other, { name: 'theirs' })).id;
    const result = await store.upsertRuns(other, [{ op: 'create', id, session_id: otherSession, name: 'evil', run_type: 'chain', start_time: start }]);
    expect(result.rejected).toHaveLength(1);
    await expect(store.getRun(other, id)).rejects.toMatchObject({ code: 'not_found' });
    expect((await store.getRun(tenant, id)).name).toBe('agent');
  });
});

describe('keyset scan of one project', () => {
  it('pages through a time range in (start_time, id) order, every run once, with a filter', async () => {
    const scanned = (await store.createSession(tenant, { name: 'paging' })).id;
    const writes = Array.from({ length: 150 }, (_, i) => ({
      op: 'create' as const,
      id: randomUUID(),
      session_id: scanned,
      name: `run-${i}`,
      run_type: i % 3 === 0 ? 'llm' : 'chain',
      // 50 runs a day over three days, several sharing a start_time (the id breaks the tie)
      start_time: new Date(Date.UTC(2026, 5, 1 + Math.floor(i / 50), 1, Math.floor((i % 50) / 2))).toISOString(),
    }));
    expect((await store.upsertRuns(tenant, writes)).rejected).toEqual([]);
    const range = { sessionId: scanned, start: new Date('2026-06-01T00:00:00Z'), end: new Date('2026-06-03T00:00:00Z') };

    const seen: RunRow[] = [];
    for (let page = await store.scanRuns(tenant, { ...range, limit: 17 }); page.length > 0;) {
      seen.push(...page);
      const last = page.at(-1)!;
      page = await store.scanRuns(tenant, { ...range, limit: 17, after: { start_time: last.start_time, id: last.id } });
    }
    const expected = writes
      .slice(0, 100)
      .map((w) => [new Date(w.start_time).getTime(), w.id])
      .sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : String(a[1]) < String(b[1]) ? -1 : 1));
    expect(seen.map((r) => [r.start_time.getTime(), r.id])).toEqual(expected);

    const llm = await store.scanRuns(tenant, { ...range, limit: 1000, filter: parseFilter('eq(run_type, "llm")') });
    expect(llm.map((r) => r.name).sort()).toEqual(
      writes
        .slice(0, 100)
        .filter((w) => w.run_type === 'llm')
        .map((w) => w.name)
        .sort(),
    );
    expect(await store.scanRuns(randomUUID(), { ...range, limit: 1000 })).toEqual([]);

    // the scan itself, with its bound parameters, reads only the two days' partitions, by the paging index
    const plan = await sql<{
      'QUERY PLAN': string;
    }>`EXPLAIN ${runScanQuery(tenant, { ...range, limit: 17, after: { start_time: seen[20]!.start_time, id: seen[20]!.id } })}`.execute(database.db);
    const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/runs_20260601/);
    expect(text).toMatch(/runs_20260602/);
    expect(text).not.toMatch(/runs_20260603/);
    expect(text).toMatch(/Index Scan using runs_\d+_session_id_start_time_id_idx/);
  });
});
