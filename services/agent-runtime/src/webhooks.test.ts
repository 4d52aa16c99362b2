/**
 * Run webhooks against a real receiver on 127.0.0.1 (allowed here as `berth dev` allows loopback):
 * the POSTed body, its Standard Webhooks signature (checked by a verifier written from the spec),
 * retries with backoff, the delivery records, and the refusal of private receivers.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@langchain/langgraph-sdk';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './index.js';
import { human, lastText, startTestServer, until } from './__tests__/fixtures.js';
import { Receiver, verify } from './__tests__/webhook-receiver.js';
import { generateWebhookSecret } from '@berth/agent-contract';

const secret = generateWebhookSecret();

let db: TestDatabase;
let server: RunningAgentServer;
let publicOnly: RunningAgentServer;
let noSecret: RunningAgentServer;
let client: Client;
const receiver = new Receiver();
const TIMEOUT_MS = 1000;
const BACKOFF_MS = 150;

beforeAll(async () => {
  db = await createTestDatabase('agentwh');
  await receiver.start();
  server = await startTestServer(db.url, {
    webhooks: { secret, privateEgress: ['127.0.0.0/8', '::1'], timeoutMs: TIMEOUT_MS, attempts: 4, backoffMs: BACKOFF_MS },
  });
  publicOnly = await startTestServer(db.url, { schema: 'agent_public', webhooks: { secret } });
  noSecret = await startTestServer(db.url, { schema: 'agent_nosecret' });
  client = new Client({ apiUrl: server.url });
}, 90_000);
afterAll(async () => {
  await server?.close();
  await publicOnly?.close();
  await noSecret?.close();
  await receiver.close();
  await db?.drop();
});

interface Delivery {
  state: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  url: string;
  delivered_at: string | null;
}

async function deliveries(threadId: string, runId: string, on: RunningAgentServer = server): Promise<Delivery[]> {
  const res = await fetch(`${on.url}/threads/${threadId}/runs/${runId}/webhooks`);
  expect(res.status).toBe(200);
  return (await res.json()) as Delivery[];
}

/** Waits until the run's webhook is no longer pending; returns its record. */
async function settled(threadId: string, runId: string): Promise<Delivery> {
  const list = await until(
    () => deliveries(threadId, runId),
    (l) => l.length === 1 && l[0]!.state !== 'pending',
    20_000,
  );
  expect(list).toHaveLength(1);
  return list[0]!;
}

describe('run webhooks', () => {
  it('POSTs the finished run, signed, to the URL with its query string', async () => {
    const url = `${receiver.script('/signed', [200])}?token=s3cr3t&team=a`;
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'echo', { input: human('hello'), webhook: url });
    await client.runs.join(thread.thread_id, run.run_id);
    const record = await settled(thread.thread_id, run.run_id);
    expect(record).toMatchObject({ state: 'delivered', attempts: 1, last_status_code: 200, last_error: null, url });

    const [request] = receiver.requests('/signed');
    expect(request!.url).toBe('/signed?token=s3cr3t&team=a');
    expect(request!.headers['content-type']).toBe('application/json');
    expect(verify(secret, request!.headers, request!.body)).toBe(true);
    // A signature made with another secret, or over another body, does not verify.
    expect(verify(generateWebhookSecret(), request!.headers, request!.body)).toBe(false);
    expect(verify(secret, request!.headers, request!.body.replace('hello', 'HELLO'))).toBe(false);

    const body = JSON.parse(request!.body) as Record<string, unknown>;
    expect(body).toMatchObject({
      run_id: run.run_id,
      thread_id: thread.thread_id,
      assistant_id: run.assistant_id,
      status: 'success',
      kwargs: expect.objectContaining({ webhook: url }),
    });
    expect(lastText(body.values)).toBe('echo: hello');
    expect(body).not.toHaveProperty('error');
    for (const field of ['created_at', 'run_started_at', 'run_ended_at', 'webhook_sent_at']) expect(Date.parse(body[field] as string)).not.toBeNaN();
    expect(Date.parse(body.run_ended_at as string)).toBeGreaterThanOrEqual(Date.parse(body.run_started_at as string));
  });

  it('retries a receiver that fails (500, then no answer) with growing waits, and records each attempt', async () => {
    const url = receiver.script('/flaky', [500, 'hold', 200]);
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'echo', { input: human('again'), webhook: url });
    await client.runs.join(thread.thread_id, run.run_id);
    const afterFirst = await until(
      () => deliveries(thread.thread_id, run.run_id),
      (l) => l[0]?.attempts === 1,
    );
    expect(afterFirst[0]).toMatchObject({ state: 'pending', attempts: 1, last_status_code: 500, last_error: 'the receiver answered 500' });
    const record = await settled(thread.thread_id, run.run_id);
    expect(record).toMatchObject({ state: 'delivered', attempts: 3, last_status_code: 200, last_error: null });

    const requests = receiver.requests('/flaky');
    expect(requests).toHaveLength(3);
    // The receiver that held the second request unanswered was given up on (after the timeout), then tried again.
    expect(requests.map((r) => r.abandoned ?? false)).toEqual([false, true, false]);
    // The same message each time (one webhook-id), signed anew with each attempt's timestamp.
    expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of requests) expect(verify(secret, r.headers, r.body)).toBe(true);
    // The waits between attempts grow exponentially (the job's backoff): the queue's contract suite measures them,
    // on its own clock-free terms; timing them here, across HTTP, would measure the machine's load.
  }, 30_000);

  it('stops after its attempts on 5xx, and does not retry a 4xx', async () => {
    const down = receiver.script('/down', [503]);
    const rejects = receiver.script('/rejects', [410]);
    const before = parseMetrics((await scrape()).body);
    const thread = await client.threads.create();
    const first = await client.runs.create(thread.thread_id, 'echo', { input: human('a'), webhook: down });
    const second = await client.runs.create(thread.thread_id, 'echo', { input: human('b'), webhook: rejects, multitaskStrategy: 'enqueue' });
    expect(await settled(thread.thread_id, first.run_id)).toMatchObject({
      state: 'failed',
      attempts: 4,
      last_status_code: 503,
      last_error: 'the receiver answered 503',
      delivered_at: null,
    });
    expect(receiver.requests('/down')).toHaveLength(4);
    // Failed after one attempt (a retried 4xx would be pending here, and fail only after four): no
    // retry is due, and a delivery of a record no longer pending sends nothing.
    expect(await settled(thread.thread_id, second.run_id)).toMatchObject({ state: 'failed', attempts: 1, last_status_code: 410 });
    expect(receiver.requests('/rejects')).toHaveLength(1);
    // The metrics count every attempt by its result: three retried and one failed, one failed at once.
    const after = parseMetrics((await scrape()).body);
    const moved = (result: string) =>
      sampleSum(after, 'berth_agent_webhook_attempts_total', { result }) - sampleSum(before, 'berth_agent_webhook_attempts_total', { result });
    expect({ retrying: moved('retrying'), failed: moved('failed'), delivered: moved('delivered') }).toEqual({ retrying: 3, failed: 2, delivered: 0 });
  }, 30_000);

  it("never fails a run or holds up its thread's next run", async () => {
    // A server that waits a minute for an answer, so that however slow this machine is, the first
    // delivery is still unanswered when both runs have ended.
    const patient = await startTestServer(db.url, {
      schema: 'agent_patient',
      webhooks: { secret, privateEgress: ['127.0.0.0/8'], timeoutMs: 60_000, attempts: 1, backoffMs: BACKOFF_MS },
    });
    try {
      const hanging = receiver.script('/hanging', ['hold']);
      const patientClient = new Client({ apiUrl: patient.url });
      const thread = await patientClient.threads.create();
      const first = await patientClient.runs.create(thread.thread_id, 'echo', { input: human('one'), webhook: hanging });
      const next = await patientClient.runs.create(thread.thread_id, 'echo', { input: human('two'), multitaskStrategy: 'enqueue' });
      await patientClient.runs.join(thread.thread_id, next.run_id);
      expect((await patientClient.runs.get(thread.thread_id, first.run_id)).status).toBe('success');
      expect((await patientClient.runs.get(thread.thread_id, next.run_id)).status).toBe('success');
      await until(
        async () => receiver.requests('/hanging'),
        (list) => list.length === 1,
      );
      const record = (await deliveries(thread.thread_id, first.run_id, patient))[0]!;
      expect(record.state).toBe('pending');
      expect(record.attempts).toBe(0);
    } finally {
      receiver.release(200);
      await patient.close();
    }

    // A receiver nobody listens at: the run still succeeds; its delivery fails on its own.
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'echo', { input: human('three'), webhook: `http://127.0.0.1:${port}/gone` });
    await client.runs.join(thread.thread_id, run.run_id);
    expect((await client.runs.get(thread.thread_id, run.run_id)).status).toBe('success');
    const failed = await settled(thread.thread_id, run.run_id);
    expect(failed).toMatchObject({ state: 'failed', attempts: 4, last_status_code: null });
    expect(failed.last_error).toMatch(/ECONNREFUSED/);
  }, 30_000);

  it('sends the webhook of a cancelled run, with its status', async () => {
    const url = receiver.script('/cancelled', [200]);
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, 'slow', { input: {}, context: { delay_ms: 10_000 }, webhook: url });
    await until(
      () => client.runs.get(thread.thread_id, run.run_id),
      (r) => r.status === 'running',
    );
    await client.runs.cancel(thread.thread_id, run.run_id, true);
    await settled(thread.thread_id, run.run_id);
    expect(JSON.parse(receiver.requests('/cancelled')[0]!.body)).toMatchObject({ run_id: run.run_id, status: 'interrupted' });
  }, 30_000);
});

describe('webhook URLs', () => {
  async function refusal(base: string, webhook: string): Promise<{ status: number; msg: string }> {
    const res = await fetch(`${base}/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'echo', input: human('x'), webhook }),
    });
    const body = (await res.json()) as { detail: { loc: string[]; msg: string }[] };
    if (res.status === 422) expect(body.detail[0]!.loc).toEqual(['body', 'webhook']);
    return { status: res.status, msg: body.detail?.[0]?.msg ?? '' };
  }

  it('refuses loopback and private receivers unless the operator allows them (422)', async () => {
    for (const url of [`${receiver.url}/x`, 'http://localhost:9/x', 'http://[::1]:9/x', 'http://10.1.2.3/x', 'http://192.168.0.10/x']) {
      const { status, msg } = await refusal(publicOnly.url, url);
      expect(status).toBe(422);
      expect(msg).toMatch(/not a public address.*BERTH_WEBHOOK_PRIVATE_EGRESS/);
    }
    // Loopback allowed does not open the cloud metadata endpoint or other private ranges.
    for (const url of ['http://169.254.169.254/latest/meta-data', 'http://10.1.2.3/x']) expect((await refusal(server.url, url)).status).toBe(422);
  });

  it('refuses relative paths, other schemes, and a server without a signing secret (422)', async () => {
    expect(await refusal(server.url, '/my-route')).toMatchObject({ status: 422, msg: expect.stringMatching(/custom routes/) });
    expect(await refusal(server.url, 'ftp://example.com/x')).toMatchObject({ status: 422, msg: expect.stringMatching(/http\(s\)/) });
    expect(await refusal(server.url, 'not a url')).toMatchObject({ status: 422 });
    expect(await refusal(noSecret.url, `${receiver.url}/x`)).toMatchObject({ status: 422, msg: expect.stringMatching(/no signing secret/) });
  });

  it('checks a cron’s webhook when the cron is made or changed, and /info says whether webhooks are on', async () => {
    const cron = (base: string, body: object, path = '/runs/crons', method = 'POST') =>
      fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const refused = await cron(publicOnly.url, { assistant_id: 'echo', schedule: '0 * * * *', webhook: 'http://10.1.2.3/x' });
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc).toEqual(['body', 'webhook']);
    const made = (await (await cron(server.url, { assistant_id: 'echo', schedule: '0 * * * *', webhook: `${receiver.url}/cron` })).json()) as {
      cron_id: string;
    };
    expect((await cron(server.url, { webhook: 'ftp://example.com/x' }, `/runs/crons/${made.cron_id}`, 'PATCH')).status).toBe(422);
    const flags = async (base: string) => ((await (await fetch(`${base}/info`)).json()) as { flags: Record<string, boolean> }).flags;
    expect(await flags(server.url)).toMatchObject({ webhooks: true, store: true, crons: true });
    expect(await flags(noSecret.url)).toMatchObject({ webhooks: false });
  });
});
