/**
 * Metrics of a gateway with a real export-worker (gRPC) and a real agent server behind it, scraped
 * from their metrics listeners while requests and runs go through: the series move as the work
 * does, no label carries an id, and neither listener is reachable through the public port — a
 * tenant's key asking the gateway's `/metrics` or a deployment's `/d/{id}/metrics` gets no metrics.
 * (One process here: both listeners answer the process's one registry, as in `berth up`.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { Client } from '@langchain/langgraph-sdk';
import { parseMetrics, sampleSum, type Sample } from '@berth/metrics';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let db: TestDatabase;
let stack: AgentStack;
const credential = randomUUID();

beforeAll(async () => {
  db = await createTestDatabase('gw_metrics');
  const metrics = { host: '127.0.0.1', port: 0 };
  stack = await startAgentStack(db.url, { agent: { metrics, deploymentCredential: `cred-${credential}` }, gateway: { metrics } });
}, 90_000);
afterAll(async () => {
  await stack?.close();
  await db?.drop();
});

async function scrape(base: string | undefined): Promise<Sample[]> {
  const response = await fetch(`${base!}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseMetrics(await response.text());
}

const client = () => new Client({ apiUrl: stack.deploymentUrl, apiKey: stack.key });
const get = (path: string, key = stack.key) => fetch(`${stack.gateway.url}${path}`, { headers: { 'x-api-key': key } });
const HTTP = 'berth_http_request_duration_seconds_count';
const GRPC = 'berth_grpc_server_handling_seconds_count';

describe('metrics', () => {
  it('counts HTTP requests by route template and status, and the gRPC calls they make by method and code', async () => {
    const before = await scrape(stack.gateway.metricsUrl);
    for (let i = 0; i < 3; i++) expect((await get('/sessions')).status).toBe(200);
    const missing = randomUUID();
    expect((await get(`/sessions/${missing}`)).status).toBe(404);
    const after = await scrape(stack.gateway.metricsUrl);

    const moved = (samples: Sample[], name: string, labels: Record<string, string>) => sampleSum(samples, name, labels) - sampleSum(before, name, labels);
    expect(moved(after, HTTP, { method: 'GET', route: '/sessions', status: '200' })).toBe(3);
    expect(moved(after, HTTP, { method: 'GET', route: '/sessions/{session_id}', status: '404' })).toBe(1);
    expect(moved(after, 'berth_http_request_duration_seconds_bucket', { route: '/sessions', status: '200', le: '+Inf' })).toBe(3);
    expect(moved(after, GRPC, { grpc_method: 'ListSessions', grpc_code: 'OK' })).toBe(3);
    expect(moved(after, GRPC, { grpc_method: 'GetSession', grpc_code: 'NOT_FOUND' })).toBe(1);
    // The process's own metrics are there too, and its Postgres pools'.
    expect(sampleSum(after, 'berth_process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(sampleSum(after, 'berth_postgres_pool_connections', { state: 'max' })).toBeGreaterThan(0);
    expect(sampleSum(after, 'berth_postgres_pool_connections', { state: 'idle' })).toBeGreaterThan(0);
    expect(after.some((s) => s.name === 'berth_postgres_pool_waiting_requests')).toBe(true);
  });

  it('counts trace ingest: batches, and runs by what became of them', async () => {
    const before = await scrape(stack.gateway.metricsUrl);
    const start = new Date();
    const runOf = (fields: Record<string, unknown>) => {
      const id = randomUUID();
      const stamp = start.toISOString().replace(/[-:.]/g, '');
      return {
        id,
        name: 'step',
        session_name: 'metrics',
        trace_id: id,
        dotted_order: `${stamp}${id}`,
        run_type: 'chain',
        start_time: start.toISOString(),
        ...fields,
      };
    };
    const response = await fetch(`${stack.gateway.url}/runs/batch`, {
      method: 'POST',
      headers: { 'x-api-key': stack.key, 'content-type': 'application/json' },
      // Three good runs, and one whose start is not a time (refused by the store, the rest stored).
      body: JSON.stringify({ post: [runOf({}), runOf({}), runOf({}), runOf({ start_time: 'yesterday' })] }),
    });
    expect(response.status).toBeLessThan(300);
    expect(await response.json()).toMatchObject({ stored: 3, pending: 0 });
    const after = await scrape(stack.gateway.metricsUrl);
    const moved = (name: string, labels: Record<string, string> = {}) => sampleSum(after, name, labels) - sampleSum(before, name, labels);
    expect(moved('berth_trace_ingest_batches_total')).toBe(1);
    expect(moved('berth_trace_ingest_runs_total', { result: 'stored' })).toBe(3);
    expect(moved('berth_trace_ingest_runs_total', { result: 'refused' })).toBe(1);
    expect(moved(HTTP, { method: 'POST', route: '/runs/batch' })).toBe(1);
  });

  it("counts an agent server's runs by status, their durations and first events, its queue and its stream subscribers", async () => {
    const sdk = client();
    const before = await scrape(stack.agent.metricsUrl);
    const finished = (samples: Sample[], status: string) =>
      sampleSum(samples, 'berth_agent_runs_finished_total', { status }) - sampleSum(before, 'berth_agent_runs_finished_total', { status });

    const thread = await sdk.threads.create();
    for (let i = 0; i < 2; i++) {
      await sdk.runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: `hi ${i}` }] } });
    }
    const afterEcho = await scrape(stack.agent.metricsUrl);
    expect(finished(afterEcho, 'success')).toBe(2);
    expect(
      sampleSum(afterEcho, 'berth_agent_run_duration_seconds_count', { status: 'success' }) -
        sampleSum(before, 'berth_agent_run_duration_seconds_count', { status: 'success' }),
    ).toBe(2);
    expect(sampleSum(afterEcho, 'berth_agent_run_first_event_seconds_count') - sampleSum(before, 'berth_agent_run_first_event_seconds_count')).toBe(2);
    // Their checkpoints were written (in batches: at least one statement per run).
    expect(
      sampleSum(afterEcho, 'berth_agent_checkpoint_write_seconds_count') - sampleSum(before, 'berth_agent_checkpoint_write_seconds_count'),
    ).toBeGreaterThanOrEqual(2);

    // A run that waits (until cancelled) holds the one worker; the next one on its thread queues behind it.
    const slow = await sdk.threads.create();
    const running = await sdk.runs.create(slow.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 } });
    const queued = await sdk.runs.create(slow.thread_id, 'slow', { input: {}, context: { delay_ms: 600_000 }, multitaskStrategy: 'enqueue' });
    const busy = await until(
      'the run running and the next one pending',
      async () => {
        const samples = await scrape(stack.agent.metricsUrl);
        const ok = sampleSum(samples, 'berth_agent_runs', { status: 'running' }) === 1 && sampleSum(samples, 'berth_agent_runs', { status: 'pending' }) === 1;
        return ok ? samples : undefined;
      },
      20_000,
      50,
    );
    expect(sampleSum(busy, 'berth_agent_oldest_pending_run_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(busy.some((s) => s.name === 'berth_agent_oldest_pending_run_age_seconds')).toBe(true);

    // A client following the running run's stream is a subscriber while it follows.
    const subscribersBefore = sampleSum(busy, 'berth_agent_stream_subscribers');
    const follow = new AbortController();
    const stream = sdk.runs.joinStream(slow.thread_id, running.run_id, { signal: follow.signal });
    const first = stream[Symbol.asyncIterator]().next();
    await until(
      'a subscriber counted',
      async () => sampleSum(await scrape(stack.agent.metricsUrl), 'berth_agent_stream_subscribers') === subscribersBefore + 1 || undefined,
      20_000,
      50,
    );
    follow.abort();
    await first.catch(() => undefined);

    await sdk.runs.cancel(slow.thread_id, queued.run_id);
    await sdk.runs.cancel(slow.thread_id, running.run_id, true);
    const idle = await until(
      'the queue empty again',
      async () => {
        const samples = await scrape(stack.agent.metricsUrl);
        return sampleSum(samples, 'berth_agent_runs') === 0 && finished(samples, 'interrupted') >= 1 ? samples : undefined;
      },
      20_000,
      50,
    );
    expect(sampleSum(idle, 'berth_agent_oldest_pending_run_age_seconds')).toBe(0);
    // Only the run that a worker executed ends here (the pending one is interrupted by the API).
    expect(finished(idle, 'interrupted')).toBe(1);
    expect(finished(idle, 'success')).toBe(2);
  }, 60_000);

  it('never puts an id in a label: routes are templates, whatever URLs callers choose', async () => {
    const ids = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of ids) {
      await get(`/sessions/${id}`);
      await get(`/no/such/${id}`);
      await fetch(`${stack.deploymentUrl}/threads/${id}`, { headers: { 'x-api-key': stack.key } });
      await fetch(`${stack.gateway.url}/d/${id}/threads`, { headers: { 'x-api-key': stack.key } });
    }
    const samples = await scrape(stack.gateway.metricsUrl);
    const values = new Set(samples.flatMap((s) => Object.values(s.labels)));
    for (const id of [...ids, stack.deploymentId, stack.tenantId, stack.otherTenantId]) {
      expect([...values].filter((v) => v.toLowerCase().includes(id.toLowerCase()))).toEqual([]);
    }
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
    expect([...values].filter((v) => uuid.test(v))).toEqual([]);
    const routes = new Set(samples.filter((s) => s.name === HTTP).map((s) => s.labels.route));
    expect(routes).toContain('unmatched');
    expect(routes).toContain('/d/{deployment_id}/{path}');
    expect(routes).toContain('/sessions/{session_id}');
  });

  it("is out of a tenant's reach: the public port has no /metrics, for the gateway or through a deployment's URL", async () => {
    expect(new URL(stack.gateway.metricsUrl!).port).not.toBe(String(stack.gateway.port));
    for (const key of [stack.key, stack.otherTenantKey]) {
      for (const path of [
        '/metrics',
        `/d/${stack.deploymentId}/metrics`,
        `/d/${stack.deploymentId}/metrics?format=text`,
        `/d/${stack.deploymentId}//metrics`,
      ]) {
        const response = await get(path, key);
        const body = await response.text();
        expect({ path, status: response.status }).toEqual({ path, status: 404 });
        expect(body).not.toMatch(/berth_|# HELP|# TYPE/);
      }
    }
    // Nor by a graph's own route table: the agent server's public port answers none of it either.
    const direct = await fetch(`${stack.agent.url}/metrics`, { headers: { 'x-berth-deployment-credential': `cred-${credential}` } });
    expect(direct.status).toBe(404);
    expect(await direct.text()).not.toMatch(/berth_|# HELP/);
  });
});
