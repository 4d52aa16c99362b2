/**
 * The run filter language: what it accepts, where it says a filter is wrong, and — on a real
 * Postgres with seeded runs — that each compiled filter selects exactly the right runs.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createDatabase, migrate, sql, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { exportWorkerMigrationsDir } from '../index.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from '../traces/trace-store.js';
import { compileFilter } from './compile.js';
import { FilterSyntaxError, parseFilter } from './parse.js';

describe('parser', () => {
  it.each([
    'eq(run_type, "llm")',
    "and(eq(run_type, 'llm'), gt(latency, 5))",
    'and(gt(start_time,"2023-07-15T12:34:56Z"), or(neq(error,null), and(eq(feedback_key,"Correctness"), eq(feedback_score,0.0))))',
    'has(tags, "prod")',
    'search(name, "chat")',
    'search("needle")',
    'in(run_type, ["llm", "chain"])',
    'gte(latency, "500ms")',
    'eq(is_root, true)',
    'and(eq(metadata_key, "user"), eq(metadata_value, "bob"))',
    'eq(thread_id, "6f1c")',
    '  OR ( eq(status,"error") , lt(total_tokens, 1e3) )  ',
  ])('accepts %s', (text) => {
    expect(() => parseFilter(text)).not.toThrow();
  });

  it('parses into a typed tree (times as dates, latency in seconds)', () => {
    expect(parseFilter('and(gt(latency, "2m"), lt(start_time, "2026-01-02"))')).toEqual({
      kind: 'and',
      args: [
        { kind: 'compare', op: 'gt', field: 'latency', value: 120 },
        { kind: 'compare', op: 'lt', field: 'start_time', value: new Date('2026-01-02T00:00:00Z') },
      ],
    });
  });

  it.each([
    ['', 0, 'a function'],
    ['eq(run_type, "llm"', 18, "')'"],
    ['eq(run_type "llm")', 12, "','"],
    ['foo(name, "x")', 0, 'a function'],
    ['eq(colour, "red")', 3, 'a field'],
    ['eq(name, "x") junk', 14, 'the end of the filter'],
    ['eq(name, "unterminated)', 9, 'a closing "'],
    ['gt(name, "x")', 3, 'a field that has an order'],
    ['eq(id, "not-a-uuid")', 7, 'a UUID string'],
    ['gt(start_time, "yesterday")', 15, 'an ISO 8601 time'],
    ['gt(latency, "fast")', 12, 'a duration'],
    ['eq(total_tokens, "many")', 17, 'a number'],
    ['eq(name, null)', 9, 'a value for name'],
    ['has(name, "x")', 4, "the field 'tags'"],
    ['and()', 4, 'a function'],
    ['eq(name, "x"); DROP TABLE runs', 13, 'a function, field, string or number'],
    [`${'and('.repeat(40)}eq(name,"x")${')'.repeat(40)}`, 132, 'at most 32 nested'],
  ])('refuses %j at position %i, expecting %s', (text, position, expected) => {
    let error: unknown;
    try {
      parseFilter(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(FilterSyntaxError);
    const syntax = error as FilterSyntaxError;
    expect({ position: syntax.position, expected: syntax.expected }).toEqual({ position, expected: expect.stringContaining(expected) });
    // what the gateway turns into a 422 detail
    expect(syntax.code).toBe('validation_failed');
    expect(syntax.issues[0]).toMatchObject({ loc: ['filter'], msg: expect.stringContaining(`at position ${position}`) });
  });
});

describe('compiled filters on Postgres', () => {
  let testDb: TestDatabase;
  let database: Database<TraceTables>;
  let session: string;
  const tenant = randomUUID();
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    testDb = await createTestDatabase('ew_filter');
    await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
    database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
    const store = new TraceStore(database);
    session = (await store.createSession(tenant, { name: 'filters' })).id;
    for (const name of ['chat', 'retrieve', 'quoted', 'agent']) ids[name] = randomUUID();
    const at = (s: number) => new Date(Date.UTC(2026, 4, 1, 10, 0, s)).toISOString();
    const result = await store.upsertRuns(tenant, [
      {
        op: 'create',
        id: ids.chat!,
        session_id: session,
        name: 'ChatOpenAI',
        run_type: 'llm',
        start_time: at(0),
        end_time: at(6),
        tags: ['prod'],
        total_tokens: 100,
        extra: { metadata: { user: 'bob', env: 'prod', thread_id: 't-1' } },
        feedback_stats: { Correctness: { n: 1, avg: 0 } },
      },
      {
        op: 'create',
        id: ids.retrieve!,
        session_id: session,
        trace_id: ids.chat!,
        parent_run_id: ids.chat!,
        name: 'retriever',
        run_type: 'retriever',
        start_time: at(1),
        end_time: at(2),
        error: 'boom',
        tags: ['dev'],
        extra: { metadata: { user: 'alice' } },
      },
      {
        op: 'create',
        id: ids.quoted!,
        session_id: session,
        name: `O'Brien "quoted"; DROP TABLE runs; --`,
        run_type: 'chain',
        start_time: at(3),
        inputs: { text: 'a needle at 100%' },
        extra: { metadata: { role: 'bob', thread_id: 't-2' } },
      },
      {
        op: 'create',
        id: ids.agent!,
        session_id: session,
        name: 'agent',
        run_type: 'chain',
        start_time: at(4),
        end_time: at(14),
        tags: ['prod', 'x'],
        total_tokens: 5,
        feedback_stats: { Correctness: { n: 2, avg: 1 } },
      },
    ]);
    expect(result.rejected).toEqual([]);
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
  });

  async function select(filter: string): Promise<string[]> {
    const rows = await sql<{ id: string }>`SELECT id FROM runs WHERE session_id = ${session}::uuid AND ${compileFilter(parseFilter(filter))}`.execute(
      database.db,
    );
    const names = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
    return rows.rows.map((r) => names[r.id]!).sort();
  }

  it.each([
    ['eq(run_type, "llm")', ['chat']],
    ['neq(run_type, "llm")', ['agent', 'quoted', 'retrieve']],
    ['in(run_type, ["llm", "retriever"])', ['chat', 'retrieve']],
    ['gt(latency, 5)', ['agent', 'chat']],
    ['and(gt(latency, "5s"), lt(latency, "8s"))', ['chat']],
    ['lte(latency, 1000ms)'.replace('1000ms', '"1000ms"'), ['retrieve']],
    ['neq(error, null)', ['retrieve']],
    ['eq(error, null)', ['agent', 'chat', 'quoted']],
    ['eq(end_time, null)', ['quoted']],
    ['eq(status, "pending")', ['quoted']],
    ['eq(status, "success")', ['agent', 'chat']],
    ['has(tags, "prod")', ['agent', 'chat']],
    ['and(has(tags, "prod"), has(tags, "x"))', ['agent']],
    ['search(name, "chat")', ['chat']],
    ['search("needle")', ['quoted']],
    ['search("100%")', ['quoted']],
    ['search("%")', ['quoted']],
    ['eq(is_root, false)', ['retrieve']],
    [`eq(trace_id, "TRACE")`, ['chat', 'retrieve']],
    ['gte(total_tokens, 50)', ['chat']],
    ['and(eq(metadata_key, "user"), eq(metadata_value, "bob"))', ['chat']],
    ['eq(metadata_value, "bob")', ['chat', 'quoted']],
    ['eq(metadata_key, "user")', ['chat', 'retrieve']],
    // The console's link to a thread's runs (metadata.thread_id, as LangGraph and the langsmith client set it).
    ['eq(thread_id, "t-1")', ['chat']],
    ['in(thread_id, ["t-1", "t-2"])', ['chat', 'quoted']],
    ['eq(thread_id, null)', ['agent', 'retrieve']],
    ['and(eq(feedback_key, "Correctness"), eq(feedback_score, 0.0))', ['chat']],
    ['gt(feedback_score, 0.5)', ['agent']],
    ['or(neq(error, null), and(eq(feedback_key, "Correctness"), eq(feedback_score, 0)))', ['chat', 'retrieve']],
    ['and(gte(start_time, "2026-05-01T10:00:01Z"), lt(start_time, "2026-05-01T10:00:04Z"))', ['quoted', 'retrieve']],
  ])('%s selects %j', async (filter, expected) => {
    expect(await select(filter.replace('TRACE', ids.chat!))).toEqual(expected);
  });

  it('hostile text is only a value: quotes and SQL in strings match literally and drop nothing', async () => {
    expect(await select(`eq(name, "O'Brien \\"quoted\\"; DROP TABLE runs; --")`)).toEqual(['quoted']);
    expect(await select(`eq(name, '\\'; DROP TABLE runs; --')`)).toEqual([]);
    expect(await select(`search(name, "'); DELETE FROM runs; --")`)).toEqual([]);
    expect(await select(`and(eq(metadata_key, "x') OR true --"), eq(metadata_value, "1"))`)).toEqual([]);
    const count = await sql<{ n: string }>`SELECT count(*) AS n FROM runs`.execute(database.db);
    expect(count.rows[0]!.n).toBe('4');
  });
});
