#!/usr/bin/env node
/**
 * bench/export: bulk export of runs to Parquet. Loads N runs (inputs and outputs of a few KB each)
 * into a fresh Postgres, then in the same run measures
 *   1. Berth's exportPartition over the whole range, once per --partitions setting (days at a time), from
 *      Postgres into a local S3 server (s3rver), each in a child process (bench/export/berth-export.mjs): rows/s and its peak RSS;
 *   2. DuckDB writing the same rows to one zstd Parquet file from a CSV dump of them
 *      (bench/export/duckdb-copy.mjs, which says exactly what its timing covers): rows/s and peak RSS.
 * Writes the figures to docs/benchmarks.md (section bench:export).
 *
 * Ingest (runs/s through the langsmith client into the gateway) is a separate measurement with its
 * own script (bench/export/ingest.mjs) and section (bench:ingest); this script does not touch it.
 *
 * Usage (after `make build`): node bench/export/run.mjs [--runs 1000000] [--days 10] [--partitions 1,2] [--page-rows 1000]
 *   [--file-rows 100000] [--no-write] [--keep]
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { PostgresServer, S3Server } from '@berth/local-stack';
import { createDatabase, sql } from '@berth/db';
import { TRACE_STORE_SCHEMA, TraceStore, migrateExportWorker } from '@berth/export-worker';
import { loadRuns } from './load-runs.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const DOC = join(ROOT, 'docs/benchmarks.md');
const BEGIN = '<!-- bench:export:begin -->';
const END = '<!-- bench:export:end -->';
const FIRST_DAY = '2026-03-01';
const TARGET = { rateShare: 0.5, rssMiB: 500 };

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '1000000' },
    days: { type: 'string', default: '10' },
    partitions: { type: 'string', default: '1,2' },
    'page-rows': { type: 'string', default: '1000' },
    'file-rows': { type: 'string', default: '100000' },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const RUNS = Number(opts.runs);
const DAYS = Number(opts.days);
const PARTITIONS = opts.partitions.split(',').map(Number);
const PAGE_ROWS = Number(opts['page-rows']);
const FILE_ROWS = Number(opts['file-rows']);
for (const [name, value] of Object.entries({ runs: RUNS, days: DAYS, ...Object.fromEntries(PARTITIONS.map((p, i) => [`partitions[${i}]`, p])), 'page-rows': PAGE_ROWS, 'file-rows': FILE_ROWS })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a positive integer`);
}
if (!existsSync(join(ROOT, 'services/export-worker/dist/index.js'))) throw new Error('services/export-worker/dist is missing: run `make build` first');

const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-export-'));
// As root, Postgres runs as the postgres user, which must enter this folder and write the CSV dump.
chmodSync(temp, 0o755);
const dumpDir = join(temp, 'dump');
mkdirSync(dumpDir);
chmodSync(dumpDir, 0o777);

const log = (line) => console.log(line);
const secondsSince = (t) => (performance.now() - t) / 1000;
const days = Array.from({ length: DAYS }, (_, i) => new Date(Date.parse(`${FIRST_DAY}T00:00:00Z`) + i * 86_400_000).toISOString().slice(0, 10));

/** Runs `node script arg…`; resolves with its last stdout line as JSON. */
function child(script, args) {
  return new Promise((done, fail) => {
    const proc = spawn(process.execPath, [...(process.env.BENCH_CHILD_NODE_OPTIONS ?? '').split(' ').filter(Boolean), join(HERE, script), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.on('exit', (code) => {
      if (code !== 0) fail(new Error(`${script} failed (exit ${code}):\n${out}`));
      else done(JSON.parse(out.trim().split('\n').at(-1)));
    });
  });
}

/** The 29 exported columns as text, for DuckDB's CSV (JSON columns and lists as JSON text, as Berth writes them). */
const DUMP_QUERY = `SELECT id, tenant_id, session_id, trace_id, parent_run_id, to_jsonb(parent_run_ids)::text AS parent_run_ids,
  reference_example_id, name, run_type, start_time, end_time, status, is_root, dotted_order, trace_tier, inputs::text AS inputs,
  outputs::text AS outputs, error, extra::text AS extra, events::text AS events, to_jsonb(tags)::text AS tags,
  feedback_stats::text AS feedback_stats, total_tokens, prompt_tokens, completion_tokens, total_cost, prompt_cost, completion_cost,
  first_token_time FROM berth_export.runs ORDER BY start_time, id`;

const postgres = new PostgresServer({ baseDir: join(temp, 'postgres'), port: 0, mode: 'fast', database: 'bench' });
const s3 = new S3Server({ directory: join(temp, 's3'), buckets: ['bench-export'] });
let database;
try {
  log(`temp folder ${temp}`);
  log('starting Postgres and the S3 server…');
  const [{ connectionString }, { endpoint }] = await Promise.all([postgres.start(), s3.start()]);
  await migrateExportWorker(connectionString);
  database = createDatabase({ connectionString, schema: TRACE_STORE_SCHEMA });
  const tenantId = randomUUID();
  const session = await new TraceStore(database).createSession(tenantId, { name: 'bench' });

  log(`loading ${RUNS} runs over ${DAYS} days…`);
  let t = performance.now();
  const tableSize = await loadRuns(database, { tenantId, sessionId: session.id, runs: RUNS, days, log });
  const loadSeconds = secondsSince(t);
  log(`  loaded in ${loadSeconds.toFixed(1)} s (runs partitions: ${tableSize})`);
  await database.close();
  database = undefined;

  // Each setting of --partitions (days exported at once, as the runner's `concurrency` runs them)
  // in a child of its own, into a folder of its own, over the same rows.
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: S3Server.accessKeyId, secretAccessKey: S3Server.secretAccessKey } });
  const berths = [];
  for (const partitions of PARTITIONS) {
    log(`Berth: exportPartition, ${partitions} day(s) at a time, into s3rver…`);
    const exportId = `berth-p${partitions}`;
    const berth = await child('berth-export.mjs', [
      JSON.stringify({
        databaseUrl: connectionString,
        s3: { endpoint, accessKeyId: S3Server.accessKeyId, secretAccessKey: S3Server.secretAccessKey },
        bucket: 'bench-export',
        exportId,
        tenantId,
        sessionId: session.id,
        days,
        partitions,
        pageRows: PAGE_ROWS,
        fileRows: FILE_ROWS,
      }),
    ]);
    if (berth.rows !== RUNS) throw new Error(`Berth exported ${berth.rows} runs, expected ${RUNS}`);
    berth.partitions = partitions;
    berth.bytes = 0;
    let token;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: 'bench-export', Prefix: `bench/export_id=${exportId}/`, ContinuationToken: token }));
      for (const o of page.Contents ?? []) berth.bytes += o.Size ?? 0;
      token = page.NextContinuationToken;
    } while (token);
    log(`  ${berth.rows} runs in ${berth.seconds.toFixed(1)} s = ${Math.round(berth.rows / berth.seconds)} runs/s, peak RSS ${berth.maxRssMiB.toFixed(0)} MiB`);
    berths.push(berth);
  }
  client.destroy();

  log('dumping the runs to CSV for DuckDB…');
  t = performance.now();
  const csv = join(dumpDir, 'runs.csv');
  const admin = createDatabase({ connectionString, schema: TRACE_STORE_SCHEMA, max: 1 });
  try {
    await sql.raw(`COPY (${DUMP_QUERY}) TO '${csv}' WITH (FORMAT csv, HEADER)`).execute(admin.db);
  } finally {
    await admin.close();
  }
  const dumpSeconds = secondsSince(t);
  const csvBytes = statSync(csv).size;
  log(`  ${(csvBytes / 2 ** 20).toFixed(0)} MiB in ${dumpSeconds.toFixed(1)} s`);

  log('DuckDB: COPY … TO parquet (zstd) from the CSV…');
  const duck = await child('duckdb-copy.mjs', [csv, join(temp, 'duckdb.parquet')]);
  if (duck.rows !== RUNS) throw new Error(`DuckDB wrote ${duck.rows} runs, expected ${RUNS}`);
  log(`  ${duck.rows} runs in ${duck.seconds.toFixed(1)} s = ${Math.round(duck.rows / duck.seconds)} runs/s, peak RSS ${duck.maxRssMiB.toFixed(0)} MiB`);

  const result = { berths, duck, loadSeconds, tableSize, dumpSeconds, csvBytes };
  const section = render(result);
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    const doc = readFileSync(DOC, 'utf8');
    const block = `${BEGIN}\n${section}\n${END}`;
    const next = doc.includes(BEGIN) ? doc.replace(new RegExp(`${BEGIN}[\\s\\S]*?${END}`), block) : `${doc.trimEnd()}\n\n${block}\n`;
    writeFileSync(DOC, next);
    log(`wrote ${DOC}`);
  }
} finally {
  await database?.close();
  await s3.stop().catch(() => undefined);
  await postgres.stop().catch((error) => console.error(`could not stop Postgres: ${error.message}`));
  if (opts.keep) log(`kept ${temp}`);
  else rmSync(temp, { recursive: true, force: true });
}

function render({ berths, duck, loadSeconds, tableSize, dumpSeconds, csvBytes }) {
  const rate = (r) => Math.round(r.rows / r.seconds).toLocaleString('en-US');
  const share = (berth) => berth.rows / berth.seconds / (duck.rows / duck.seconds);
  const mib = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  const met = (ok) => (ok ? 'met' : '**missed**');
  const revision = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cpus = os.cpus();
  return `## Bulk export: runs to Parquet (\`bench/export\`)

**Data:** ${RUNS.toLocaleString('en-US')} runs of one project over ${DAYS} days, loaded with one \`INSERT … SELECT generate_series\` per day
into the trace store's day partitions (${loadSeconds.toFixed(0)} s; ${tableSize} in Postgres). Each run has every exported field
set as an LLM run would: inputs (system prompt of ~1.5 KB of pseudo-words + a question) and outputs (~1.5 KB) as
JSON, extra, events, tags, tokens, costs, times; every 50th has an error and every 10th feedback.

**Berth:** \`exportPartition\` (services/export-worker/src/writer) over the whole range, one day partition at a time, then
again two at a time (as the export runner runs export runs: its \`concurrency\`, default 2), ${PAGE_ROWS} rows per Postgres page,
files of up to ${FILE_ROWS.toLocaleString('en-US')} rows, zstd (encoded on a thread of its own per partition), into a local s3rver (the same
machine, its own process is the benchmark's parent; objects on disk); checkpoints kept in memory. Each timed from the first
page read to the last object completed, in a child process of its own whose peak RSS is
\`process.resourceUsage().maxRSS\` (all of its threads).
**DuckDB:** ${'`'}@duckdb/node-api${'`'} 1.5.6, ${duck.threads} threads, one statement \`COPY (SELECT * FROM read_csv('runs.csv', columns = {…the
same 29 column types…})) TO 'runs.parquet' (FORMAT parquet, COMPRESSION zstd)\`: its timing covers reading and parsing a CSV
dump of the same rows from local disk, encoding, and writing one file to local disk — not reading Postgres (the dump
took ${dumpSeconds.toFixed(0)} s and is not counted) and no upload. Peak RSS of its own child process likewise.

**Machine:** ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}. **Revision:** ${revision}.

**Command:** \`node bench/export/run.mjs --runs ${RUNS} --days ${DAYS}\`, run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.

**Targets (issue):** Berth ≥ ${TARGET.rateShare * 100} % of DuckDB's rows/s; Berth's peak RSS < ${TARGET.rssMiB} MB.

| writer | rows | seconds | rows/s | peak RSS | CPU s | output | target |
|---|---:|---:|---:|---:|---:|---:|---|
${berths.map((berth) => `| Berth \`exportPartition\`, ${berth.partitions} day(s) at a time (Postgres → Parquet → S3) | ${berth.rows.toLocaleString('en-US')} | ${berth.seconds.toFixed(1)} | ${rate(berth)} | ${berth.maxRssMiB.toFixed(0)} MiB | ${berth.cpuSeconds.toFixed(0)} | ${mib(berth.bytes)} in ${berth.files} files | ${(share(berth) * 100).toFixed(0)} % of DuckDB: ${met(share(berth) >= TARGET.rateShare)}; RSS: ${met(berth.maxRssMiB * 2 ** 20 < TARGET.rssMiB * 1e6)} |`).join('\n')}
| DuckDB \`COPY … TO parquet\` (CSV → Parquet) | ${duck.rows.toLocaleString('en-US')} | ${duck.seconds.toFixed(1)} | ${rate(duck)} | ${duck.maxRssMiB.toFixed(0)} MiB | ${duck.cpuSeconds.toFixed(0)} | ${mib(duck.parquetBytes)} in 1 file (CSV ${mib(csvBytes)}) | |

Berth's time, awaited (overlapping: the next page is read while the current one is converted and earlier ones are encoded on
the encoder's thread; with several days at a time their waits add up): ${berths.map((b) => `${b.partitions} day(s) at a time: Postgres pages ${b.awaitedScanSeconds.toFixed(1)} s over ${b.scans} queries, S3 requests ${b.awaitedS3Seconds.toFixed(1)} s over ${b.s3Requests} requests`).join('; ')}.

Ingest (runs/s through the langsmith client into the gateway) is measured separately (\`bench/export/ingest.mjs\`, section
\`bench:ingest\`); it is not part of this figure.`;
}
