/**
 * Trace roll-ups in the store on a real Postgres: the root stays exact when many batches of one
 * trace are written at once; an operator's price table (first match, provider) prices llm runs and
 * a table Postgres cannot read is refused at start; the root's rolled-up columns reach the Parquet
 * export, read back with DuckDB as a user would; migration 0009 rolls up the traces stored before.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDatabase, migrate, sql, type Database } from '@berth/db';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { exportRuns } from '../exports/__tests__/export-runs.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { loadModelPrices } from './model-prices.js';
import type { RunWrite } from './run-fields.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from './trace-store.js';

let testDb: TestDatabase;
let database: Database<TraceTables>;
let traces: TraceStore;
const tenant = randomUUID();
let session: string;

beforeAll(async () => {
  testDb = await createTestDatabase('ew_rollups');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  traces = new TraceStore(database);
  session = (await traces.createSession(tenant, { name: 'agent' })).id;
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

const stamp = (iso: string) => iso.replace(/[-:]/g, '').replace(/\.(\d{3})Z$/, '$1000Z');

function root(start: string): RunWrite {
  const id = randomUUID();
  return { op: 'create', id, session_id: session, trace_id: id, dotted_order: `${stamp(start)}${id}`, name: 'agent', run_type: 'chain', start_time: start };
}

function llm(parent: RunWrite, start: string, fields: Partial<RunWrite> = {}): RunWrite {
  const id = randomUUID();
  return {
    op: 'create',
    id,
    session_id: session,
    trace_id: parent.trace_id!,
    parent_run_id: parent.id,
    dotted_order: `${parent.dotted_order}.${stamp(start)}${id}`,
    name: 'llm',
    run_type: 'llm',
    start_time: start,
    ...fields,
  };
}

describe('the roll-up', () => {
  it('is exact when the root and its llm runs arrive in many batches at once', async () => {
    const top = root('2026-06-01T10:00:00.000Z');
    const children = Array.from({ length: 24 }, (_, i) =>
      llm(top, `2026-06-01T10:00:0${i % 10}.${String(i).padStart(3, '0')}Z`, {
        prompt_tokens: 10 + i,
        completion_tokens: 1,
        total_tokens: 11 + i,
        total_cost: '0.01',
        first_token_time: `2026-06-01T10:00:30.${String(100 + i).padStart(3, '0')}Z`,
      }),
    );
    // Each child in a batch of its own, the root among them, all at once.
    const results = await Promise.all([top, ...children].map((write) => traces.upsertRuns(tenant, [write])));
    expect(results.flatMap((r) => r.rejected)).toEqual([]);
    const stored = await traces.getRun(tenant, top.id);
    expect(stored).toMatchObject({ prompt_tokens: String(24 * 10 + 276), completion_tokens: '24', total_tokens: String(24 * 11 + 276) });
    expect(Number(stored.total_cost)).toBeCloseTo(0.24, 10);
    expect(stored.first_token_time).toEqual(new Date('2026-06-01T10:00:30.100Z'));
  });
});

describe('an operator’s price table', () => {
  it('prices by the first entry matching the model (and the provider when the entry names one)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'berth-prices-'));
    try {
      const file = join(dir, 'prices.json');
      await writeFile(
        file,
        JSON.stringify([
          { name: 'ours on azure', match_pattern: '^our-model$', provider: 'azure', prompt_per_million: 1, completion_per_million: 1 },
          { name: 'ours', match_pattern: '^our-model', prompt_per_million: 2, completion_per_million: 4 },
          { name: 'ours again', match_pattern: '^our', prompt_per_million: 100, completion_per_million: 100 },
        ]),
      );
      const store = new TraceStore(database, { modelPrices: loadModelPrices(file) });
      await store.check();
      const top = root('2026-06-02T10:00:00.000Z');
      const openai = llm(top, '2026-06-02T10:00:01.000Z', {
        extra: { metadata: { ls_provider: 'openai' }, invocation_params: { model_name: 'our-model' } },
        prompt_tokens: 1_000_000,
        completion_tokens: 500_000,
      });
      const azure = llm(top, '2026-06-02T10:00:02.000Z', {
        extra: { metadata: { ls_provider: 'azure', ls_model_name: 'our-model' } },
        prompt_tokens: 1_000_000,
      });
      const unknown = llm(top, '2026-06-02T10:00:03.000Z', { extra: { metadata: { ls_model_name: 'gpt-4o' } }, prompt_tokens: 1_000_000 });
      await store.upsertRuns(tenant, [top, openai, azure, unknown]);
      expect(await store.getRun(tenant, openai.id)).toMatchObject({ prompt_cost: '2', completion_cost: '2', total_cost: '4' });
      expect(await store.getRun(tenant, azure.id)).toMatchObject({ prompt_cost: '1', completion_cost: null, total_cost: '1' });
      // The operator's table replaces the shipped one: gpt-4o is not in it.
      expect(await store.getRun(tenant, unknown.id)).toMatchObject({ total_cost: null });
      expect(await store.getRun(tenant, top.id)).toMatchObject({ prompt_tokens: '3000000', total_cost: '5' });

      await writeFile(file, JSON.stringify([{ name: 'x', match_pattern: '^x', prompt_per_million: -1, completion_per_million: 0 }]));
      expect(() => loadModelPrices(file)).toThrow(/TRACE_MODEL_PRICES_FILE: .* is invalid at 0\.prompt_per_million/);
      // A pattern JavaScript reads but Postgres does not: refused at start, not at every batch.
      const bad = new TraceStore(database, { modelPrices: [{ name: 'x', match_pattern: '(?<name>x)', prompt_per_million: 1, completion_per_million: 1 }] });
      await expect(bad.check()).rejects.toMatchObject({ name: 'ConfigError' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a bulk export', () => {
  it('writes the root’s rolled-up tokens, costs and first token time into its Parquet columns', async () => {
    const top = root('2026-06-03T10:00:00.000Z');
    const first = llm(top, '2026-06-03T10:00:01.000Z', {
      extra: { metadata: { ls_model_name: 'gpt-4o-mini' } },
      prompt_tokens: 1000,
      completion_tokens: 2000,
      total_tokens: 3000,
      first_token_time: '2026-06-03T10:00:01.500Z',
    });
    const second = llm(top, '2026-06-03T10:00:02.000Z', {
      prompt_tokens: 100,
      completion_tokens: 20,
      total_tokens: 120,
      prompt_cost: '0.001',
      completion_cost: '0.002',
      total_cost: '0.003',
      first_token_time: '2026-06-03T10:00:02.500Z',
    });
    // The children first, the root last, in batches of their own.
    for (const write of [second, first, { ...top, end_time: '2026-06-03T10:00:03.000Z' }])
      expect((await traces.upsertRuns(tenant, [write])).rejected).toEqual([]);

    const read = await exportRuns(
      { database, databaseUrl: testDb.url, traces, tenant, session, start: new Date('2026-06-03T00:00:00Z'), end: new Date('2026-06-04T00:00:00Z') },
      `SELECT prompt_tokens, completion_tokens, total_tokens, prompt_cost::VARCHAR AS prompt_cost, total_cost::VARCHAR AS total_cost,
        epoch_ms(first_token_time) AS first_token_time FROM {runs} WHERE is_root`,
    );
    expect(read.rows).toEqual([
      {
        prompt_tokens: 1100n,
        completion_tokens: 2020n,
        total_tokens: 3120n,
        prompt_cost: '0.001150000000',
        total_cost: '0.004350000000',
        first_token_time: BigInt(Date.parse('2026-06-03T10:00:01.500Z')),
      },
    ]);
  });
});

describe('migration 0009', () => {
  it('rolls up the traces stored before it', async () => {
    const old = await createTestDatabase('ew_rollups_0009');
    const dir = await mkdtemp(join(tmpdir(), 'berth-migrations-'));
    try {
      for (const file of await readdir(exportWorkerMigrationsDir)) {
        if (file < '0009') await copyFile(join(exportWorkerMigrationsDir, file), join(dir, file));
      }
      await migrate({ connectionString: old.url, schema: TRACE_STORE_SCHEMA, directory: dir });
      const before = createDatabase<TraceTables>({ connectionString: old.url, schema: TRACE_STORE_SCHEMA });
      try {
        const project = randomUUID();
        const [top, a, b] = [randomUUID(), randomUUID(), randomUUID()];
        await sql`INSERT INTO sessions (id, tenant_id, name) VALUES (${project}::uuid, ${tenant}::uuid, 'old')`.execute(before.db);
        await sql`CREATE TABLE runs_20260604 PARTITION OF runs FOR VALUES FROM ('2026-06-04T00:00:00Z') TO ('2026-06-05T00:00:00Z')`.execute(before.db);
        await sql`INSERT INTO run_keys (id, tenant_id, start_time) VALUES (${top}::uuid, ${tenant}::uuid, '2026-06-04T10:00:00Z'),
          (${a}::uuid, ${tenant}::uuid, '2026-06-04T10:00:01Z'), (${b}::uuid, ${tenant}::uuid, '2026-06-04T10:00:03Z')`.execute(before.db);
        await sql`INSERT INTO runs (id, tenant_id, session_id, trace_id, parent_run_id, name, run_type, start_time, total_tokens, total_cost, first_token_time)
          VALUES (${top}::uuid, ${tenant}::uuid, ${project}::uuid, ${top}::uuid, NULL, 'agent', 'chain', '2026-06-04T10:00:00Z', NULL, NULL, NULL),
            (${a}::uuid, ${tenant}::uuid, ${project}::uuid, ${top}::uuid, ${top}::uuid, 'llm', 'llm', '2026-06-04T10:00:01Z', 30, 0.5, '2026-06-04T10:00:02Z'),
            (${b}::uuid, ${tenant}::uuid, ${project}::uuid, ${top}::uuid, ${top}::uuid, 'llm', 'llm', '2026-06-04T10:00:03Z', 12, 0.25, NULL)`.execute(
          before.db,
        );
        await migrate({ connectionString: old.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
        const { rows } = await sql<Record<string, unknown>>`SELECT total_tokens, total_cost, first_token_time FROM runs WHERE id = ${top}::uuid`.execute(
          before.db,
        );
        expect(rows).toEqual([{ total_tokens: '42', total_cost: '0.75', first_token_time: new Date('2026-06-04T10:00:02Z') }]);
      } finally {
        await before.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
      await old.drop();
    }
  });
});
