/**
 * The export writer on real Postgres and a real S3 server: what a user reads back with DuckDB from
 * the bucket (values, types, folders), and resuming after a crash at any point without losing or
 * repeating a run.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { createDatabase, migrate, type Database } from '@berth/db';
import { createTestBucket, createTestDatabase, testS3, type TestDatabase } from '@berth/testing';
import { parseFilter } from '../filter/parse.js';
import { exportWorkerMigrationsDir } from '../index.js';
import { TRACE_STORE_SCHEMA, TraceStore, type TraceTables } from '../traces/trace-store.js';
import type { RunWrite } from '../traces/run-fields.js';
import { EXPORT_FIELDS, emptyCheckpoint, exportPartition, partitionFolder, type ExportPartitionOptions, type PartitionCheckpoint } from './export-partition.js';
import { listObjects, readExport } from './__tests__/exported.js';

let testDb: TestDatabase;
let database: Database<TraceTables>;
let traces: TraceStore;
let client: S3Client;
let bucket: string;
const tenant = randomUUID();
const DAY = '2026-05-01';
const dayStart = new Date(`${DAY}T00:00:00Z`);
const dayEnd = new Date(`2026-05-02T00:00:00Z`);

/** S3 commands sent by the test client, by name (to tell an upload from a commit without one). */
const commands: string[] = [];

beforeAll(async () => {
  testDb = await createTestDatabase('ew_writer');
  await migrate({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA, directory: exportWorkerMigrationsDir });
  database = createDatabase<TraceTables>({ connectionString: testDb.url, schema: TRACE_STORE_SCHEMA });
  traces = new TraceStore(database);
  bucket = await createTestBucket('exports');
  client = testS3().client();
  client.middlewareStack.add(
    (next, context) => (args) => {
      commands.push(context.commandName!);
      return next(args);
    },
    { step: 'initialize' },
  );
});
afterAll(async () => {
  client?.destroy();
  await database?.close();
  await testDb?.drop();
});

async function newSession(): Promise<string> {
  return (await traces.createSession(tenant, { name: `p-${randomUUID()}` })).id;
}

function dotted(time: string, id: string): string {
  return `${time.replace(/[-:]/g, '').replace('.', '').replace('Z', '000Z')}${id}`;
}

/** `n` plain runs of `session`, one second apart from 01:00 on DAY. */
async function seedRuns(session: string, n: number, extra: (i: number) => Partial<RunWrite> = () => ({})): Promise<string[]> {
  const writes: RunWrite[] = Array.from({ length: n }, (_, i) => ({
    op: 'create',
    id: randomUUID(),
    session_id: session,
    name: `run ${i}`,
    run_type: 'chain',
    start_time: new Date(Date.parse(`${DAY}T01:00:00Z`) + i * 1000).toISOString(),
    inputs: { i },
    ...extra(i),
  }));
  const result = await traces.upsertRuns(tenant, writes);
  expect(result.rejected).toEqual([]);
  return writes.map((w) => w.id);
}

interface Run {
  prefix: string;
  session: string;
  saved: PartitionCheckpoint[];
  result: PartitionCheckpoint;
}

/** Exports DAY of `session` under a fresh prefix; every saved checkpoint is kept. */
async function exportDay(session: string, options: Partial<ExportPartitionOptions> & { prefix?: string } = {}, tuning = {}): Promise<Run> {
  const prefix = options.prefix ?? `e-${randomUUID().slice(0, 8)}`;
  const saved: PartitionCheckpoint[] = [];
  const result = await exportPartition(
    {
      traces,
      tenantId: tenant,
      sessionId: session,
      start: dayStart,
      end: dayEnd,
      target: { client, bucket, folder: partitionFolder({ prefix, exportId: 'x1', tenantId: tenant, sessionId: session, day: DAY }) },
      checkpoint: emptyCheckpoint(),
      save: async (c) => {
        saved.push(structuredClone(c));
      },
      ...options,
    },
    tuning,
  );
  return { prefix, session, saved, result };
}

async function countAndDistinct(prefix: string): Promise<{ n: number; distinct: number }> {
  const { rows } = await readExport(client, bucket, prefix, 'SELECT count(*)::INT AS n, count(DISTINCT id)::INT AS distinct FROM {runs}');
  return rows[0] as { n: number; distinct: number };
}

describe('partitionFolder', () => {
  it('lays files out as LangSmith does, without a leading slash for an empty prefix', () => {
    const p = { exportId: 'e', tenantId: 't', sessionId: 's', day: '2026-01-09' };
    expect(partitionFolder({ ...p, prefix: 'exports/prod' })).toBe('exports/prod/export_id=e/tenant_id=t/session_id=s/runs/year=2026/month=01/day=09');
    expect(partitionFolder({ ...p, prefix: '' })).toBe('export_id=e/tenant_id=t/session_id=s/runs/year=2026/month=01/day=09');
    expect(() => partitionFolder({ ...p, prefix: '', day: '2026-1-9' })).toThrow('YYYY-MM-DD');
  });
});

describe('what a user reads back', () => {
  const bigInputs = { messages: Array.from({ length: 400 }, (_, i) => ({ role: 'user', content: `message ${i}: naïve café ✓ 日本語 🚀 "quoted" \\ back` })) };
  let run: Run;
  let root: string;
  let child: string;
  let bare: string;

  beforeAll(async () => {
    const session = await newSession();
    root = randomUUID();
    child = randomUUID();
    bare = randomUUID();
    const rootStart = `${DAY}T10:00:00.123Z`;
    const childStart = `${DAY}T10:00:00.456Z`;
    const result = await traces.upsertRuns(tenant, [
      {
        op: 'create',
        id: root,
        session_id: session,
        name: 'agent ✓',
        run_type: 'chain',
        start_time: rootStart,
        end_time: `${DAY}T10:00:02.5Z`,
        first_token_time: `${DAY}T10:00:01.001Z`,
        dotted_order: dotted(rootStart, root),
        reference_example_id: '7f1d6c3e-2f0a-4a57-9c1e-0d6f3b1b2a11',
        inputs: bigInputs,
        outputs: { answer: 'ünïcødé 🎉', n: 1.5, nested: { list: [1, null, true] } },
        extra: { metadata: { user: 'a' } },
        events: [{ name: 'start', time: rootStart }],
        tags: ['prod', 'ü'],
        feedback_stats: { correctness: { n: 2, avg: 0.5 } },
        prompt_tokens: 1200,
        completion_tokens: 34,
        total_tokens: 1234,
        prompt_cost: '0.000123456789',
        completion_cost: '12.5',
        total_cost: '12.500123456789',
        trace_tier: 'longlived',
      },
      {
        op: 'create',
        id: child,
        session_id: session,
        name: 'llm',
        run_type: 'llm',
        start_time: childStart,
        parent_run_id: root,
        trace_id: root,
        dotted_order: `${dotted(rootStart, root)}.${dotted(childStart, child)}`,
        error: 'boom ❌',
        end_time: `${DAY}T10:00:01Z`,
      },
      { op: 'create', id: bare, session_id: session, name: 'bare', run_type: 'tool', start_time: `${DAY}T23:59:59.999Z` },
      // Outside the partition's day: never exported with it.
      { op: 'create', id: randomUUID(), session_id: session, name: 'tomorrow', run_type: 'tool', start_time: '2026-05-02T00:00:00Z' },
    ]);
    expect(result.rejected).toEqual([]);
    run = await exportDay(session);
  });

  it('one file in the partition folder; the checkpoint counts it', async () => {
    const folder = partitionFolder({ prefix: run.prefix, exportId: 'x1', tenantId: tenant, sessionId: run.session, day: DAY });
    const objects = await listObjects(client, bucket, run.prefix);
    expect(objects.map((o) => o.key)).toEqual([`${folder}/part-00000.parquet`]);
    expect(run.result).toEqual({
      cursor: { start_time: `${DAY}T23:59:59.999Z`, id: bare },
      rows_written: 3,
      exported_files: [`${folder}/part-00000.parquet`],
      pending_upload: null,
    });
  });

  it('every field has its value and type, in the interface order, plus the Hive partition columns', async () => {
    const { rows, types } = await readExport(
      client,
      bucket,
      run.prefix,
      `SELECT *, epoch_ms(start_time) AS start_ms, epoch_ms(end_time) AS end_ms, epoch_ms(first_token_time) AS ftt_ms,
         total_cost::VARCHAR AS total_cost_text, prompt_cost::VARCHAR AS prompt_cost_text, completion_cost::VARCHAR AS completion_cost_text
       FROM {runs} ORDER BY start_time`,
    );
    expect(Object.keys(types).slice(0, EXPORT_FIELDS.length)).toEqual([...EXPORT_FIELDS]);
    const timestamp = 'TIMESTAMP WITH TIME ZONE';
    expect(types).toMatchObject({
      id: 'VARCHAR',
      tenant_id: 'VARCHAR',
      session_id: 'VARCHAR',
      trace_id: 'VARCHAR',
      parent_run_id: 'VARCHAR',
      parent_run_ids: 'VARCHAR',
      reference_example_id: 'VARCHAR',
      name: 'VARCHAR',
      run_type: 'VARCHAR',
      start_time: timestamp,
      end_time: timestamp,
      status: 'VARCHAR',
      is_root: 'BOOLEAN',
      dotted_order: 'VARCHAR',
      trace_tier: 'VARCHAR',
      inputs: 'VARCHAR',
      outputs: 'VARCHAR',
      error: 'VARCHAR',
      extra: 'VARCHAR',
      events: 'VARCHAR',
      tags: 'VARCHAR',
      feedback_stats: 'VARCHAR',
      total_tokens: 'BIGINT',
      prompt_tokens: 'BIGINT',
      completion_tokens: 'BIGINT',
      total_cost: 'DECIMAL(38,12)',
      prompt_cost: 'DECIMAL(38,12)',
      completion_cost: 'DECIMAL(38,12)',
      // month and day are zero-padded as the layout says, so DuckDB keeps them as text
      first_token_time: timestamp,
      export_id: 'VARCHAR',
      year: 'BIGINT',
      month: 'VARCHAR',
      day: 'VARCHAR',
    });
    expect(rows.map((r) => r.id)).toEqual([root, child, bare]);
    const [r, c, b] = rows as Record<string, unknown>[];
    const rootStart = `${DAY}T10:00:00.123Z`;
    expect(r).toMatchObject({
      tenant_id: tenant,
      session_id: run.session,
      trace_id: root,
      parent_run_id: null,
      reference_example_id: '7f1d6c3e-2f0a-4a57-9c1e-0d6f3b1b2a11',
      name: 'agent ✓',
      run_type: 'chain',
      status: 'success',
      is_root: true,
      dotted_order: dotted(rootStart, root),
      trace_tier: 'longlived',
      error: null,
      total_tokens: 1234n,
      prompt_tokens: 1200n,
      completion_tokens: 34n,
      total_cost_text: '12.500123456789',
      prompt_cost_text: '0.000123456789',
      completion_cost_text: '12.500000000000',
      start_ms: BigInt(Date.parse(rootStart)),
      end_ms: BigInt(Date.parse(`${DAY}T10:00:02.5Z`)),
      ftt_ms: BigInt(Date.parse(`${DAY}T10:00:01.001Z`)),
      export_id: 'x1',
      year: 2026n,
      month: '05',
      day: '01',
    });
    expect(JSON.parse(r!.inputs as string)).toEqual(bigInputs);
    expect(JSON.parse(r!.outputs as string)).toEqual({ answer: 'ünïcødé 🎉', n: 1.5, nested: { list: [1, null, true] } });
    expect(JSON.parse(r!.extra as string)).toEqual({ metadata: { user: 'a' } });
    expect(JSON.parse(r!.events as string)).toEqual([{ name: 'start', time: rootStart }]);
    expect(JSON.parse(r!.tags as string)).toEqual(['prod', 'ü']);
    expect(JSON.parse(r!.feedback_stats as string)).toEqual({ correctness: { n: 2, avg: 0.5 } });
    expect(JSON.parse(r!.parent_run_ids as string)).toEqual([]);

    expect(c).toMatchObject({
      parent_run_id: root,
      trace_id: root,
      status: 'error',
      is_root: false,
      error: 'boom ❌',
      inputs: null,
      total_cost: null,
      total_tokens: null,
      ftt_ms: null,
    });
    expect(JSON.parse(c!.parent_run_ids as string)).toEqual([root]);

    expect(b).toMatchObject({
      trace_id: bare,
      status: 'pending',
      is_root: true,
      end_time: null,
      dotted_order: null,
      trace_tier: null,
      reference_example_id: null,
      inputs: null,
      outputs: null,
      extra: null,
      events: null,
      feedback_stats: null,
      tags: '[]',
      total_tokens: null,
      prompt_tokens: null,
      completion_tokens: null,
      total_cost: null,
      prompt_cost: null,
      completion_cost: null,
      first_token_time: null,
    });
  });
});

describe('options', () => {
  it('fields choose and order the columns; a filter chooses the runs', async () => {
    const session = await newSession();
    await seedRuns(session, 6, (i) => ({ run_type: i % 2 === 0 ? 'llm' : 'chain', total_tokens: i }));
    const run = await exportDay(session, { fields: ['name', 'total_tokens', 'id'], filter: parseFilter('eq(run_type, "llm")') });
    const { rows, types } = await readExport(client, bucket, run.prefix, 'SELECT * FROM {runs} ORDER BY total_tokens');
    expect(Object.keys(types).slice(0, 3)).toEqual(['name', 'total_tokens', 'id']);
    expect(Object.keys(types).slice(3).sort()).toEqual(['day', 'export_id', 'month', 'session_id', 'tenant_id', 'year']);
    expect(rows.map((r) => [r.name, r.total_tokens])).toEqual([
      ['run 0', 0n],
      ['run 2', 2n],
      ['run 4', 4n],
    ]);
    expect(run.result.rows_written).toBe(3);
  });

  it('a cost Postgres holds as NaN is written as null instead of failing the export', async () => {
    const session = await newSession();
    await seedRuns(session, 2, (i) => ({ total_cost: i === 0 ? 'NaN' : '0.5' }));
    const run = await exportDay(session, { fields: ['id', 'total_cost'] });
    const { rows } = await readExport(client, bucket, run.prefix, 'SELECT total_cost::VARCHAR AS cost FROM {runs} ORDER BY cost NULLS FIRST');
    expect(rows.map((r) => r.cost)).toEqual([null, '0.500000000000']);
  });

  it('JSON fields are written as the text the run was sent with: its key order, no added spaces', async () => {
    const session = await newSession();
    const inputs = { zeta: 'last key first', a: [1.5, { y: true, b: null }], messages: [{ role: 'user', content: 'hi' }] };
    await seedRuns(session, 1, () => ({ inputs, extra: { metadata: { z: 1, a: 2 } } }));
    const run = await exportDay(session, { fields: ['inputs', 'extra'] });
    const { rows } = await readExport(client, bucket, run.prefix, 'SELECT inputs, extra FROM {runs}');
    expect(rows).toEqual([{ inputs: JSON.stringify(inputs), extra: '{"metadata":{"z":1,"a":2}}' }]);
  });

  it('unknown fields are refused before anything is written', async () => {
    const session = await newSession();
    await expect(exportDay(session, { fields: ['id', 'secret' as never] })).rejects.toMatchObject({
      code: 'invalid_argument',
      message: expect.stringContaining('secret'),
    });
  });

  it('an empty partition writes no file', async () => {
    const session = await newSession();
    const run = await exportDay(session);
    expect(run.result).toEqual(emptyCheckpoint());
    expect(run.saved).toEqual([]);
    expect(await listObjects(client, bucket, run.prefix)).toEqual([]);
  });

  it('fileRows splits the partition into numbered files, each row in exactly one', async () => {
    const session = await newSession();
    const ids = await seedRuns(session, 23);
    const run = await exportDay(session, { fileRows: 10, pageRows: 4 });
    const keys = (await listObjects(client, bucket, run.prefix)).map((o) => o.key.split('/').at(-1));
    expect(keys).toEqual(['part-00000.parquet', 'part-00001.parquet', 'part-00002.parquet']);
    expect(run.result.rows_written).toBe(23);
    expect(run.result.exported_files.map((k) => k.split('/').at(-1))).toEqual(keys);
    const { rows } = await readExport(client, bucket, run.prefix, 'SELECT id, filename FROM {runs} ORDER BY start_time');
    expect(rows.map((r) => r.id)).toEqual(ids);
    const perFile = rows.reduce<Record<string, number>>(
      (n, r) => ({ ...n, [String(r.filename).split('/').at(-1)!]: (n[String(r.filename).split('/').at(-1)!] ?? 0) + 1 }),
      {},
    );
    expect(perFile).toEqual({ 'part-00000.parquet': 10, 'part-00001.parquet': 10, 'part-00002.parquet': 3 });
  });

  it('a file larger than a part goes up as a multipart upload', async () => {
    const session = await newSession();
    // Incompressible payloads, so the file really is larger than a 5 MiB part.
    await seedRuns(session, 8, () => ({ inputs: { blob: randomBytes(900_000).toString('base64') } }));
    commands.length = 0;
    const run = await exportDay(session, {}, { partBytes: 5 * 1024 * 1024, rowGroupRows: 2 });
    expect(commands).toEqual(expect.arrayContaining(['CreateMultipartUploadCommand', 'UploadPartCommand', 'CompleteMultipartUploadCommand']));
    expect(commands.filter((c) => c === 'UploadPartCommand').length).toBeGreaterThanOrEqual(2);
    expect(await countAndDistinct(run.prefix)).toEqual({ n: 8, distinct: 8 });
  });

  it('S3 errors come through unchanged, also when the multipart upload cannot be aborted', async () => {
    const session = await newSession();
    await seedRuns(session, 3);
    await expect(exportDay(session, { target: { client, bucket: 'no-such-bucket-here', folder: 'x' } })).rejects.toMatchObject({ name: 'NoSuchBucket' });

    const big = await newSession();
    await seedRuns(big, 8, () => ({ inputs: { blob: randomBytes(900_000).toString('base64') } }));
    commands.length = 0;
    const failingSave = async () => {
      throw new Error('the export record could not be saved');
    };
    // s3rver refuses AbortMultipartUpload: the error that stopped the export is still the one seen.
    await expect(exportDay(big, { save: failingSave }, { partBytes: 5 * 1024 * 1024, rowGroupRows: 2 })).rejects.toThrow(
      'the export record could not be saved',
    );
    expect(commands).toContain('AbortMultipartUploadCommand');
    expect(commands).not.toContain('CompleteMultipartUploadCommand');
  });

  it('an aborted signal stops the export; it resumes from what was saved', async () => {
    const session = await newSession();
    await seedRuns(session, 12);
    const controller = new AbortController();
    const saved: PartitionCheckpoint[] = [];
    const prefix = `e-${randomUUID().slice(0, 8)}`;
    const save = async (c: PartitionCheckpoint) => {
      saved.push(structuredClone(c));
      if (c.pending_upload === null) controller.abort(new Error('shutting down'));
    };
    await expect(exportDay(session, { prefix, fileRows: 5, save, signal: controller.signal })).rejects.toThrow('shutting down');
    expect(saved.at(-1)!.rows_written).toBe(5);
    const run = await exportDay(session, { prefix, fileRows: 5, checkpoint: saved.at(-1)! });
    expect(run.result.rows_written).toBe(12);
    expect(await countAndDistinct(prefix)).toEqual({ n: 12, distinct: 12 });
  });
});

describe('resume', () => {
  const fileRows = 4;

  it('a pending upload whose object exists is committed without writing it again', async () => {
    const session = await newSession();
    await seedRuns(session, 10);
    const first = await exportDay(session, { fileRows, pageRows: 3 });
    // The worker died after the second file's upload completed, before its commit was saved.
    const crashed = first.saved.find((c) => c.pending_upload?.file_path.endsWith('part-00001.parquet'))!;
    commands.length = 0;
    const resumed = await exportDay(session, { prefix: first.prefix, fileRows, pageRows: 3, checkpoint: crashed });
    expect(resumed.saved[0]).toMatchObject({ rows_written: 8, pending_upload: null });
    expect(resumed.result).toEqual(first.result);
    expect(commands.filter((c) => c === 'HeadObjectCommand')).toHaveLength(1);
    expect(commands.filter((c) => c === 'PutObjectCommand')).toHaveLength(1); // the third file only
    expect(await countAndDistinct(first.prefix)).toEqual({ n: 10, distinct: 10 });
  });

  it('a pending upload whose object is missing is written again from the cursor', async () => {
    const session = await newSession();
    await seedRuns(session, 10);
    const first = await exportDay(session, { fileRows, pageRows: 3 });
    // The worker died during the second file's upload: the object never appeared.
    const crashed = first.saved.find((c) => c.pending_upload?.file_path.endsWith('part-00001.parquet'))!;
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: crashed.pending_upload!.file_path }));
    await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: first.result.exported_files[2]! }));
    const resumed = await exportDay(session, { prefix: first.prefix, fileRows, pageRows: 3, checkpoint: crashed });
    expect(resumed.saved[0]).toMatchObject({ rows_written: 4, pending_upload: null, exported_files: [first.result.exported_files[0]] });
    expect(resumed.result).toEqual(first.result);
    expect(await countAndDistinct(first.prefix)).toEqual({ n: 10, distinct: 10 });
  });

  it('a crash at any save, then a resume from the last saved checkpoint, exports every run exactly once', async () => {
    const session = await newSession();
    await seedRuns(session, 10);
    const reference = await exportDay(session, { fileRows, pageRows: 3 });
    const saves = reference.saved.length;
    expect(saves).toBe(6); // three files, each saved as pending then committed
    for (let k = 1; k <= saves; k += 1) {
      const saved: PartitionCheckpoint[] = [];
      let calls = 0;
      const crashingSave = async (c: PartitionCheckpoint) => {
        calls += 1;
        if (calls === k) throw new Error(`worker killed at save ${k}`);
        saved.push(structuredClone(c));
      };
      const prefix = `crash-${k}-${randomUUID().slice(0, 8)}`;
      await expect(exportDay(session, { prefix, fileRows, pageRows: 3, save: crashingSave })).rejects.toThrow(`worker killed at save ${k}`);
      const resumed = await exportDay(session, { prefix, fileRows, pageRows: 3, checkpoint: saved.at(-1) ?? emptyCheckpoint() });
      expect({ k, result: resumed.result.rows_written, files: resumed.result.exported_files.length }).toEqual({ k, result: 10, files: 3 });
      expect({ k, ...(await countAndDistinct(prefix)) }).toEqual({ k, n: 10, distinct: 10 });
    }
  });
});
