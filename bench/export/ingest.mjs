#!/usr/bin/env node
/**
 * bench/export ingest: runs/s through the official `langsmith` client (0.12.0) into Berth's
 * gateway, and the gateway's peak RSS. Starts a fresh Postgres, the export-worker and the gateway
 * each as its own process (their `dist/main.js`, as in Kubernetes), creates a tenant and an API key,
 * then sends N traces of a root chain and a child LLM run with few-KB inputs and outputs through
 * `traceable` with the client's defaults (auto-batching, gzip multipart), waits for
 * `awaitPendingTraceBatches` and counts the finished runs in the store. Writes its figures to
 * docs/benchmarks.md (section bench:ingest).
 *
 * Usage (after `make build`): node bench/export/ingest.mjs [--traces 10000] [--concurrency 50] [--no-write] [--keep-logs]
 * `BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR"` profiles the gateway and the export-worker.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client } from 'langsmith';
import { traceable } from 'langsmith/traceable';
import { AuthStore } from '@berth/auth';
import { createDatabase, sql } from '@berth/db';
import { PostgresServer } from '@berth/local-stack';
import { texts } from './payloads.mjs';
import { cpuSeconds, peakRssMiB, startTraceServices, until, writeSection } from './services.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const DOC = join(ROOT, 'docs/benchmarks.md');
const BEGIN = '<!-- bench:ingest:begin -->';
const END = '<!-- bench:ingest:end -->';

const { values: opts } = parseArgs({
  options: {
    traces: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '50' },
    'no-write': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
  },
});
const TRACES = Number(opts.traces);
const CONCURRENCY = Number(opts.concurrency);
for (const [name, value] of Object.entries({ traces: TRACES, concurrency: CONCURRENCY })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} takes a positive integer`);
}
const RUNS = TRACES * 2;

const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-ingest-'));
const log = (line) => console.log(line);

const postgres = new PostgresServer({ baseDir: join(temp, 'postgres'), port: 0, mode: 'fast', database: 'bench' });
let services;
let database;
try {
  log(`temp folder ${temp}`);
  const { connectionString } = await postgres.start();
  log('starting the export-worker and the gateway…');
  services = await startTraceServices({ root: ROOT, temp, connectionString });
  const { url, worker, gateway } = services;

  database = createDatabase({ connectionString, schema: 'gateway', max: 2 });
  const auth = new AuthStore(database.db);
  const tenant = await auth.createTenant({ name: 'bench' });
  const { key } = await auth.createApiKey({ tenantId: tenant.id, name: 'bench', role: 'admin' });

  // Few-KB payloads, as an LLM call's: a system prompt and a question in, a generation out.
  const pool = texts(1000);
  const client = new Client({ apiUrl: url, apiKey: key });
  const traced = { client, project_name: 'bench', tracingEnabled: true };
  const llm = traceable(async (messages) => ({ generations: [{ text: pool[(messages.length * 7 + messages[1].content.length) % 1000], finish_reason: 'stop' }] }), {
    name: 'ChatOpenAI',
    run_type: 'llm',
    ...traced,
  });
  const agent = traceable(
    async (question, i) => {
      const out = await llm([
        { role: 'system', content: pool[i % 1000] },
        { role: 'user', content: question },
      ]);
      return { answer: out.generations[0].text };
    },
    { name: 'agent', run_type: 'chain', metadata: { bench: true }, ...traced },
  );

  log(`sending ${TRACES} traces (${RUNS} runs), ${CONCURRENCY} at a time…`);
  const clientCpu = process.cpuUsage();
  const serviceCpu = { gateway: cpuSeconds(gateway.pid), worker: cpuSeconds(worker.pid) };
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < TRACES; i = next++) await agent(`question ${i}: ${pool[(i * 13) % 1000].slice(0, 200)}`, i);
    }),
  );
  const calledSeconds = (performance.now() - started) / 1000;
  await client.awaitPendingTraceBatches();
  const sentSeconds = (performance.now() - started) / 1000;
  // Stored means: the run exists and its end (the patch) was applied.
  const store = createDatabase({ connectionString, schema: 'berth_export', max: 1 });
  let stored = 0;
  try {
    await until(async () => {
      stored = Number((await sql`SELECT count(*) AS n FROM runs WHERE end_time IS NOT NULL AND outputs IS NOT NULL`.execute(store.db)).rows[0].n);
      return stored >= RUNS;
    }, `${RUNS} finished runs in the store (have ${stored})`, 120_000);
  } finally {
    await store.close();
  }
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(clientCpu);
  const result = {
    traces: TRACES,
    runs: stored,
    seconds,
    calledSeconds,
    sentSeconds,
    gatewayCpuSeconds: cpuSeconds(gateway.pid) - serviceCpu.gateway,
    workerCpuSeconds: cpuSeconds(worker.pid) - serviceCpu.worker,
    gatewayRssMiB: peakRssMiB(gateway.pid),
    workerRssMiB: peakRssMiB(worker.pid),
    clientCpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
  log(`  ${stored} runs stored in ${seconds.toFixed(1)} s = ${Math.round(stored / seconds)} runs/s; gateway peak RSS ${result.gatewayRssMiB.toFixed(0)} MiB`);
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

function render(r) {
  const revision = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const cpus = os.cpus();
  return `## Trace ingest: the langsmith client into the gateway (\`bench/export/ingest.mjs\`)

**What:** ${r.traces.toLocaleString('en-US')} traces of two runs each (a root \`chain\` and a child \`llm\`; inputs ~1.7 KB — a system
prompt of ~1.5 KB of pseudo-words and a question —, outputs ~1.5 KB, metadata) sent with the official \`langsmith\` client
0.12.0 through \`traceable\` with its defaults (auto-batching, gzip multipart \`/runs/multipart\`), ${CONCURRENCY} traces in flight,
then \`client.awaitPendingTraceBatches()\`. The gateway and the export-worker run as processes of their own
(\`services/*/dist/main.js\`) on a fresh Postgres (fast mode); the client runs in the benchmark's process on the same machine.
**Timed** from the first call until every run is in the store with its end applied (\`count(*)\` of runs with \`end_time\` and
\`outputs\`). Peak RSS is each process's \`VmHWM\`.

**Machine:** ${cpus.length} CPUs (${cpus[0]?.model ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}. **Revision:** ${revision}.

**Command:** \`node bench/export/ingest.mjs --traces ${r.traces} --concurrency ${CONCURRENCY}\`, run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.

| runs stored | seconds | runs/s | gateway peak RSS | export-worker peak RSS | CPU s: gateway / export-worker / client |
|---:|---:|---:|---:|---:|---:|
| ${r.runs.toLocaleString('en-US')} | ${r.seconds.toFixed(1)} | ${Math.round(r.runs / r.seconds).toLocaleString('en-US')} | ${r.gatewayRssMiB.toFixed(0)} MiB | ${r.workerRssMiB.toFixed(0)} MiB | ${r.gatewayCpuSeconds.toFixed(1)} / ${r.workerCpuSeconds.toFixed(1)} / ${r.clientCpuSeconds.toFixed(1)} |

The traced functions returned after ${r.calledSeconds.toFixed(1)} s, the client's last batch was answered after ${r.sentSeconds.toFixed(1)} s.`;
}
