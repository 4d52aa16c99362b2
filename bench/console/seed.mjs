/**
 * What bench/console's scenarios stand on: the trace services on a fresh Postgres, a tenant with an
 * API key (what the console signs in with), and projects of many runs loaded straight into the
 * trace store (bench/export/load-runs.mjs: one `INSERT … SELECT generate_series` per day), so a
 * 100,000-run project is ready in seconds. Shared by run.mjs (projects and runs) and the trace
 * scenario.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AuthStore } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { TRACE_STORE_SCHEMA } from '@berth/export-worker';
import { PostgresServer } from '@berth/local-stack';
import { loadRuns } from '../export/load-runs.mjs';
import { startTraceServices } from '../export/services.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Starts Postgres (fast mode), the export-worker and the gateway (their `dist/`: `make build`
 * first) in a temp folder, and makes a tenant with an admin API key.
 * Answers `{ url, key, tenantId, connectionString, temp, stop() }`; `stop({ keep })` ends them all
 * and removes the temp folder unless `keep`.
 */
export async function startConsoleStack({ log = () => {} } = {}) {
  const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-console-'));
  const postgres = new PostgresServer({ baseDir: join(temp, 'postgres'), port: 0, mode: 'fast', database: 'bench' });
  let services;
  const stop = async ({ keep = false } = {}) => {
    await services?.stop();
    await postgres.stop().catch((error) => console.error(`could not stop Postgres: ${error.message}`));
    if (keep) log(`kept ${temp}`);
    else rmSync(temp, { recursive: true, force: true });
  };
  try {
    const { connectionString } = await postgres.start();
    log('starting the export-worker and the gateway…');
    services = await startTraceServices({ root: ROOT, temp, connectionString });
    const database = createDatabase({ connectionString, schema: 'gateway', max: 1 });
    try {
      const auth = new AuthStore(database.db);
      const tenant = await auth.createTenant({ name: 'bench-console' });
      const { key } = await auth.createApiKey({ tenantId: tenant.id, name: 'bench', role: 'admin' });
      return { url: services.url, key, tenantId: tenant.id, connectionString, temp, stop };
    } finally {
      await database.close();
    }
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Creates a tracing project named `name` through the API; answers its id. */
export async function createProject(stack, name) {
  const res = await fetch(`${stack.url}/sessions`, {
    method: 'POST',
    headers: { 'x-api-key': stack.key, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  if (res.status !== 201) throw new Error(`creating project ${name}: ${res.status} ${await res.text()}`);
  return (await res.json()).id;
}

/** Runs `work(store)` with a connection to the trace store (for loading runs straight into it). */
export async function withTraceStore(stack, work) {
  const store = createDatabase({ connectionString: stack.connectionString, schema: TRACE_STORE_SCHEMA, max: 2 });
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

/**
 * A project named `name` of `runs` root LLM runs spread evenly over `days` (`YYYY-MM-DD`; the 7
 * days from 2026-03-01 by default), as bench/export/load-runs.mjs writes them (every 50th an
 * error). Answers the project's id.
 */
export async function seedProject(stack, { name, runs, days = weekFrom('2026-03-01') }) {
  const sessionId = await createProject(stack, name);
  await withTraceStore(stack, (store) => loadRuns(store, { tenantId: stack.tenantId, sessionId, runs, days }));
  return sessionId;
}

/** The `count` days from `first` (`YYYY-MM-DD`). */
export function weekFrom(first, count = 7) {
  return Array.from({ length: count }, (_, i) => new Date(Date.parse(`${first}T00:00:00Z`) + i * 86_400_000).toISOString().slice(0, 10));
}
