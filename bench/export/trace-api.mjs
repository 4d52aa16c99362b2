#!/usr/bin/env node
/**
 * bench/export trace-api: what the console's trace screens ask of the trace API, on a project of N
 * runs (default 100,000). Starts a fresh Postgres, the export-worker and the gateway as processes
 * of their own, loads the runs straight into the store (bench/export/load-runs.mjs: one project of
 * N runs, 9 more of N/50 each, and as many runs again in another tenant's project over the same
 * days), then times through HTTP, each call repeated: project statistics (POST /sessions/stats and
 * GET /sessions?include_stats), the runs table's first page with and without a column choice,
 * paging through every run with the cursor, a filtered page and a filter check. Writes its figures
 * to docs/benchmarks.md (section bench:trace-api).
 *
 * Usage (after `make build`): node bench/export/trace-api.mjs [--runs 100000] [--days 7] [--repeat 10] [--no-write] [--keep-logs]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { AuthStore } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { TRACE_STORE_SCHEMA } from '@berth/export-worker';
import { PostgresServer } from '@berth/local-stack';
import { loadRuns } from './load-runs.mjs';
import { startTraceServices, writeSection } from './services.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const DOC = join(ROOT, 'docs/benchmarks.md');
const BEGIN = '<!-- bench:trace-api:begin -->';
const END = '<!-- bench:trace-api:end -->';
const FIRST_DAY = '2026-03-01';
const SMALL_PROJECTS = 9;

const { values: opts } = parseArgs({
  options: {
    runs: { type: 'string', default: '100000' },
    days: { type: 'string', default: '7' },
    repeat: { type: 'string', default: '10' },
    'no-write': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
  },
});
const RUNS = Number(opts.runs);
const DAYS = Number(opts.days);
const REPEAT = Number(opts.repeat);
for (const [name, value] of Object.entries({ runs: RUNS, days: DAYS, repeat: REPEAT })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a positive integer`);
}

const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-trace-api-'));
const log = (line) => console.log(line);
const days = Array.from({ length: DAYS }, (_, i) => new Date(Date.parse(`${FIRST_DAY}T00:00:00Z`) + i * 86_400_000).toISOString().slice(0, 10));
const rangeStart = `${FIRST_DAY}T00:00:00.000Z`;
const rangeEnd = new Date(Date.parse(rangeStart) + DAYS * 86_400_000).toISOString();
const lastDay = new Date(Date.parse(rangeEnd) - 86_400_000).toISOString();

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];

async function main(url, keys) {
  const call = async (path, json, key = keys.a) => {
    const started = performance.now();
    const res = await fetch(`${url}${path}`, {
      method: json === undefined ? 'GET' : 'POST',
      headers: { 'x-api-key': key, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    const text = await res.text();
    const ms = performance.now() - started;
    if (!res.ok) throw new Error(`${path}: ${res.status} ${text.slice(0, 500)}`);
    return { ms, bytes: Buffer.byteLength(text), body: JSON.parse(text) };
  };
  /** Times `make` REPEAT times after one warm-up; answers the median and the slowest, in ms. */
  const time = async (what, make) => {
    await make();
    const samples = [];
    let last;
    for (let i = 0; i < REPEAT; i++) {
      last = await make();
      samples.push(last.ms);
    }
    samples.sort((x, y) => x - y);
    const row = { what, median: quantile(samples, 0.5), max: samples.at(-1), bytes: last.bytes, body: last.body };
    log(`  ${what}: median ${row.median.toFixed(1)} ms, max ${row.max.toFixed(1)} ms, ${row.bytes} bytes`);
    return row;
  };

  const projects = (await call('/sessions?limit=100')).body;
  const big = projects.find((p) => p.name === 'big').id;
  const all = projects.map((p) => p.id);
  const table = ['name', 'run_type', 'start_time', 'end_time', 'status', 'error', 'total_tokens', 'total_cost', 'tags'];
  const rows = [];
  rows.push(await time(`POST /sessions/stats: 1 project, ${DAYS} days, default buckets`, () => call('/sessions/stats', { session: [big], start_time: rangeStart, end_time: rangeEnd })));
  const statsBody = rows.at(-1).body;
  if (statsBody.projects[0].stats.run_count !== RUNS) throw new Error(`stats counted ${statsBody.projects[0].stats.run_count} runs, expected ${RUNS}`);
  rows.at(-1).what += ` (${statsBody.projects[0].buckets.length} of ${statsBody.bucket_seconds} s)`;
  rows.push(await time('POST /sessions/stats: 1 project, its last day', () => call('/sessions/stats', { session: [big], start_time: lastDay, end_time: rangeEnd })));
  rows.at(-1).what += ` (${rows.at(-1).body.projects[0].buckets.length} buckets of ${rows.at(-1).body.bucket_seconds} s)`;
  rows.push(
    await time(`POST /sessions/stats: the ${all.length} projects of the list, ${DAYS} days`, () => call('/sessions/stats', { session: all, start_time: rangeStart, end_time: rangeEnd })),
  );
  rows.push(
    await time(`GET /sessions?include_stats=true over ${DAYS} days (${all.length} projects, totals)`, () =>
      call(`/sessions?include_stats=true&stats_start_time=${rangeStart}&stats_end_time=${rangeEnd}`),
    ),
  );
  rows.push(await time(`POST /runs/query: first page of 100, ${table.length} columns`, () => call('/runs/query', { session: [big], limit: 100, select: table })));
  rows.push(await time('POST /runs/query: first page of 100, every field', () => call('/runs/query', { session: [big], limit: 100 })));
  rows.push(
    await time('POST /runs/query: first page of errors slower than 2 s (filter)', () =>
      call('/runs/query', { session: [big], limit: 100, select: table, filter: 'and(eq(status, "error"), gt(latency, 2))' }),
    ),
  );
  rows.push(await time('POST /runs/filter/validate', () => call('/runs/filter/validate', { filter: 'and(eq(status, "error"), gt(latency, 2))' })));

  log(`paging through the ${RUNS} runs of the project, 100 at a time…`);
  const pages = [];
  const seen = new Set();
  let cursor = null;
  const started = performance.now();
  do {
    const page = await call('/runs/query', { session: [big], limit: 100, select: table, ...(cursor ? { cursor } : {}) });
    pages.push(page.ms);
    for (const run of page.body.runs) seen.add(run.id);
    cursor = page.body.cursors.next;
  } while (cursor);
  const seconds = (performance.now() - started) / 1000;
  if (seen.size !== RUNS) throw new Error(`paging returned ${seen.size} distinct runs, expected ${RUNS}`);
  pages.sort((x, y) => x - y);
  const paging = { pages: pages.length, seconds, median: quantile(pages, 0.5), p99: quantile(pages, 0.99), max: pages.at(-1) };
  log(`  ${pages.length} pages in ${seconds.toFixed(1)} s; per page median ${paging.median.toFixed(1)} ms, p99 ${paging.p99.toFixed(1)} ms`);
  return { rows, paging };
}

const postgres = new PostgresServer({ baseDir: join(temp, 'postgres'), port: 0, mode: 'fast', database: 'bench' });
let services;
let database;
try {
  log(`temp folder ${temp}`);
  const { connectionString } = await postgres.start();
  log('starting the export-worker and the gateway…');
  services = await startTraceServices({ root: ROOT, temp, connectionString });
  database = createDatabase({ connectionString, schema: 'gateway', max: 2 });
  const auth = new AuthStore(database.db);
  const keys = {};
  const tenants = {};
  for (const name of ['a', 'b']) {
    tenants[name] = await auth.createTenant({ name: `bench-${name}` });
    keys[name] = (await auth.createApiKey({ tenantId: tenants[name].id, name: 'bench', role: 'admin' })).key;
  }
  const create = async (key, name) => {
    const res = await fetch(`${services.url}/sessions`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
    if (res.status !== 201) throw new Error(`creating project ${name}: ${res.status}`);
    return (await res.json()).id;
  };
  const store = createDatabase({ connectionString, schema: TRACE_STORE_SCHEMA, max: 2 });
  const t = performance.now();
  try {
    log(`loading ${RUNS} runs into one project, ${SMALL_PROJECTS} × ${Math.ceil(RUNS / 50)} into others, ${RUNS} into another tenant's…`);
    await loadRuns(store, { tenantId: tenants.a.id, sessionId: await create(keys.a, 'big'), runs: RUNS, days });
    for (let i = 0; i < SMALL_PROJECTS; i++) await loadRuns(store, { tenantId: tenants.a.id, sessionId: await create(keys.a, `small-${i}`), runs: Math.ceil(RUNS / 50), days });
    await loadRuns(store, { tenantId: tenants.b.id, sessionId: await create(keys.b, 'big'), runs: RUNS, days });
  } finally {
    await store.close();
  }
  log(`  loaded in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  const result = await main(services.url, keys);
  const section = render(result);
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(DOC, BEGIN, END, section);
    log(`wrote ${DOC}`);
  }
} finally {
  await database?.close();
  await services?.stop();
  await postgres.stop().catch((error) => console.error(`could not stop Postgres: ${error.message}`));
  if (opts['keep-logs']) log(`kept ${temp}`);
  else rmSync(temp, { recursive: true, force: true });
}

function render({ rows, paging }) {
  const revision = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cpus = os.cpus();
  const ms = (value) => value.toFixed(1);
  return `## Trace API for the console: project statistics and the runs table (\`bench/export/trace-api.mjs\`)

**Data:** a project of ${RUNS.toLocaleString('en-US')} LLM runs over ${DAYS} days (inputs and outputs of a few KB, latencies 0.2–5 s,
every 50th an error; \`bench/export/load-runs.mjs\`), ${SMALL_PROJECTS} more projects of ${Math.ceil(RUNS / 50).toLocaleString('en-US')} runs, and
${RUNS.toLocaleString('en-US')} runs of another tenant in the same day partitions. Loaded straight into the store, then \`VACUUM ANALYZE\`.
The gateway and the export-worker run as processes of their own on a fresh Postgres (fast mode); each call goes through
HTTP from the benchmark's process (time to the whole body read), is made once to warm up and then ${REPEAT} times.

**Machine:** ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}. **Revision:** ${revision}.

**Command:** \`node bench/export/trace-api.mjs --runs ${RUNS} --days ${DAYS} --repeat ${REPEAT}\`, run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.

| call | median ms | max ms | body bytes |
|---|---:|---:|---:|
${rows.map((r) => `| ${r.what} | ${ms(r.median)} | ${ms(r.max)} | ${r.bytes.toLocaleString('en-US')} |`).join('\n')}

**Paging** through all ${RUNS.toLocaleString('en-US')} runs of the project with \`cursors.next\`, 100 a page with the table's columns: ${paging.pages.toLocaleString('en-US')} pages in
${paging.seconds.toFixed(1)} s, per page median ${ms(paging.median)} ms, p99 ${ms(paging.p99)} ms, slowest ${ms(paging.max)} ms (every run once).`;
}
