/**
 * Retention through the official `langsmith` client against a real gateway, export-worker and
 * Postgres, the export-worker's clock 15 days ahead: a project's trace tier is set and read as
 * LangSmith's (`client.sessions.create/update`, `trace_tier`), a base-tier trace is gone after the
 * sweep (its reads answer 404 as for a trace that never was) while an extended-tier one stays.
 * (An export reaching back past the retention: services/export-worker/src/traces/retention.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { Client } from 'langsmith';
import { getCurrentRunTree, traceable } from 'langsmith/traceable';
import { startTraceStack, type TraceStack } from '../../__tests__/trace-stack.js';

type Json = Record<string, any>;

const DAY = 86_400_000;
let stack: TraceStack;
let client: Client;

beforeAll(async () => {
  stack = await startTraceStack('gw_trace_retention', { clock: new ManualClock(Date.now() + 15 * DAY) });
  client = new Client({ apiUrl: stack.gateway.url, apiKey: stack.keyA, autoBatchTracing: true });
});
afterAll(async () => {
  await stack?.close();
});

async function call(path: string, init: { method?: string; json?: unknown } = {}) {
  const res = await fetch(`${stack.gateway.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { 'x-api-key': stack.keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** Traces one run into `project`; answers its id. */
async function trace(project: string): Promise<string> {
  const id = await traceable(async () => getCurrentRunTree().id, { name: 'turn', client, project_name: project, tracingEnabled: true })();
  await client.awaitPendingTraceBatches();
  return id;
}

describe('retention', () => {
  it("client.sessions sets a project's trace tier; the answer says how long its traces are kept", async () => {
    const made = await client.sessions.create({ name: `tiers-${randomUUID()}` });
    expect(made).toMatchObject({ trace_tier: 'shortlived', retention_days: 14 });
    expect(await client.sessions.update(made.id, { trace_tier: 'longlived' })).toMatchObject({ trace_tier: 'longlived', retention_days: 400 });
    expect(await client.sessions.retrieve(made.id)).toMatchObject({ trace_tier: 'longlived' });
    const wrong = await call(`/api/v1/sessions/${made.id}`, { method: 'PATCH', json: { trace_tier: 'forever' } });
    expect(wrong.status).toBe(422);
    expect(wrong.body.detail[0].loc).toEqual(['body', 'trace_tier']);
  });

  it('a base-tier trace is gone once swept (its reads answer 404), an extended-tier one stays', async () => {
    const base = await client.sessions.create({ name: `base-${randomUUID()}`, trace_tier: 'shortlived' });
    const extended = await client.sessions.create({ name: `extended-${randomUUID()}`, trace_tier: 'longlived' });
    const gone = await trace(base.name!);
    const kept = await trace(extended.name!);
    expect(await client.runs.retrieve(gone, { project_id: base.id })).toMatchObject({ id: gone });

    // The export-worker's clock is 15 days ahead: the base tier's 14 days are up.
    await stack.worker.retention.sweep();
    await expect(client.runs.retrieve(gone, { project_id: base.id })).rejects.toMatchObject({ status: 404 });
    await expect(client.readRun(gone)).rejects.toThrow(/404/);
    expect(await client.runs.retrieve(kept, { project_id: extended.id })).toMatchObject({ id: kept });
  });
});
