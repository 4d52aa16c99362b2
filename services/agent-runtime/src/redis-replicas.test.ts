/**
 * Replicas of one deployment in production: agent servers in processes of their own sharing the
 * deployment's Postgres schema and Redis, where they connect as a Redis user limited by
 * `redisAclRules` (what the control plane gives every deployment). Runs created through any replica
 * execute exactly once, and a stream joined on one replica carries the events of a run another
 * replica executes.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { createTestDatabase, testRedisUrl, type TestDatabase } from '@berth/testing';
import { Redis } from 'ioredis';
import { redisAclRules } from '@berth/agent-contract';
import { spawnAgentServer, until } from './__tests__/fixtures.js';

const project = fileURLToPath(new URL('../test-projects/executions/langgraph.json', import.meta.url));
const REPLICAS = 3;
const THREADS = 10;
const RUNS_PER_THREAD = 4;

let db: TestDatabase;
let admin: Redis;
const user = `berth_test_replicas_${randomBytes(4).toString('hex')}`;
const replicas: { child: ChildProcess; url: string; client: Client }[] = [];

beforeAll(async () => {
  db = await createTestDatabase('agent_redis_replicas');
  const schema = `agent_${db.name}`;
  admin = new Redis(testRedisUrl());
  const password = randomBytes(24).toString('base64url');
  await admin.call('ACL', 'SETUSER', user, 'reset', 'on', `>${password}`, ...redisAclRules(schema));
  const redisUrl = new URL(testRedisUrl());
  redisUrl.username = user;
  redisUrl.password = password;
  // The production lease (5 s), not the tests' 1 s: a process stalled for a second on a loaded
  // machine loses a 1 s lease, and the worker that takes the run over re-executes its node.
  const config = { configPath: project, schema, redisUrl: redisUrl.toString(), leaseMs: 5000 };
  const started = await Promise.all(Array.from({ length: REPLICAS }, () => spawnAgentServer(db.url, { workers: 2, config })));
  for (const { child, url } of started) replicas.push({ child, url, client: new Client({ apiUrl: url }) });
}, 120_000);

afterAll(async () => {
  for (const { child } of replicas) child.kill('SIGKILL');
  await admin?.call('ACL', 'DELUSER', user);
  admin?.disconnect();
  await db?.drop();
});

type Execution = { tag: string; pid: number };

async function executions(): Promise<Execution[]> {
  const response = await fetch(`${replicas[0]!.url}/store/items/search`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ namespace_prefix: ['executions'], limit: 1000 }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: { value: Execution }[] }).items.map((i) => i.value);
}

it(`executes each of ${THREADS * RUNS_PER_THREAD} runs created through ${REPLICAS} replicas exactly once`, async () => {
  const runs: { threadId: string; runId: string; tag: string }[] = [];
  const threads = await Promise.all(Array.from({ length: THREADS }, (_, t) => replicas[t % REPLICAS]!.client.threads.create()));
  // Each thread's runs go through different replicas, queued behind each other (multitask `enqueue`).
  await Promise.all(
    threads.map(async (thread, t) => {
      for (let r = 0; r < RUNS_PER_THREAD; r++) {
        const tag = `run-${t}-${r}`;
        const run = await replicas[(t + r) % REPLICAS]!.client.runs.create(thread.thread_id, 'record', { input: { tag, delay_ms: 100 } });
        runs.push({ threadId: thread.thread_id, runId: run.run_id, tag });
      }
    }),
  );
  const statuses = async () => Promise.all(runs.map(async ({ threadId, runId }, i) => (await replicas[i % REPLICAS]!.client.runs.get(threadId, runId)).status));
  const final = await until(statuses, (s) => s.every((status) => status !== 'pending' && status !== 'running'), 90_000);
  expect(final).toEqual(runs.map(() => 'success'));

  const recorded = await executions();
  const perTag = new Map<string, number>();
  for (const e of recorded) perTag.set(e.tag, (perTag.get(e.tag) ?? 0) + 1);
  expect(Object.fromEntries([...perTag].sort())).toEqual(Object.fromEntries(runs.map((r) => [r.tag, 1] as const).sort()));
  // The work was shared: more than one replica executed runs.
  const pids = new Set(recorded.map((e) => e.pid));
  expect(pids.size).toBeGreaterThan(1);
  for (const pid of pids) expect(replicas.map((r) => r.child.pid)).toContain(pid);
}, 120_000);

it('streams the events of a run to a stream joined on every replica, whichever executes it', async () => {
  const thread = await replicas[0]!.client.threads.create();
  const run = await replicas[0]!.client.runs.create(thread.thread_id, 'record', {
    input: { tag: 'joined', delay_ms: 1500 },
    streamMode: ['custom', 'values'],
    streamResumable: true,
  });
  const joined = await Promise.all(
    replicas.map(async ({ client }) => {
      const events: { event: string; data: unknown }[] = [];
      for await (const chunk of client.runs.joinStream(thread.thread_id, run.run_id, { lastEventId: '-1' }))
        events.push(chunk as { event: string; data: unknown });
      return events;
    }),
  );
  const executedBy = ((await replicas[0]!.client.threads.getState(thread.thread_id)).values as { executed_by: number }).executed_by;
  expect(replicas.map((r) => r.child.pid)).toContain(executedBy);
  for (const events of joined) {
    expect(events.filter((e) => e.event === 'custom').map((e) => e.data)).toEqual([{ phase: 'recorded', pid: executedBy }, { phase: 'done' }]);
    expect(events.at(-1)).toMatchObject({ event: 'values', data: { tag: 'joined', executed_by: executedBy } });
  }
}, 60_000);

it('leaves nothing the ACL refused: the rules allow every command the replicas ran', async () => {
  const log = (await admin.call('ACL', 'LOG', '100')) as unknown[][];
  const refused = log.map((entry) => Object.fromEntries(chunks(entry.map(String)))).filter((e) => e.username === user);
  expect(refused).toEqual([]);
});

function chunks(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let k = 0; k + 1 < flat.length; k += 2) out.push([flat[k]!, flat[k + 1]!]);
  return out;
}
