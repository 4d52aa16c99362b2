/**
 * A deployment's agent servers reach Redis as a user of their own: it carries their whole workload
 * (queue and run events) and nothing else — not another deployment's keys or channels, no admin or
 * server-wide command. Redis forgetting its users (a restart) is repaired with the same password,
 * and deleting the deployment deletes its user and keys.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startAgentServer, type RunningAgentServer } from '@berth/agent-runtime';
import { silentLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestDatabase, testRedisUrl, type TestDatabase } from '@berth/testing';
import { AgentRedis } from './agent-redis.js';
import { agentSchema } from './agent-databases.js';

const echoProject = fileURLToPath(new URL('../../../agent-runtime/test-projects/echo/langgraph.json', import.meta.url));
const a = randomUUID();
const b = randomUUID();
const keyOf = (deploymentId: string, rest: string) => `berth:${agentSchema(deploymentId)}:${rest}`;

let db: TestDatabase;
let users: AgentRedis;
let admin: Redis;
let server: RunningAgentServer | undefined;
let urlA: string;
const connections: Redis[] = [];

function connect(url: string): Redis {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => undefined);
  connections.push(redis);
  return redis;
}

async function keys(match: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', match, 'COUNT', 1000);
    found.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** The error of a command, or 'allowed'. */
async function refusal(work: () => Promise<unknown>): Promise<string> {
  try {
    await work();
    return 'allowed';
  } catch (error) {
    return (error as Error).message.split(' ')[0]!;
  }
}

beforeAll(async () => {
  db = await createTestDatabase('cp_agent_redis');
  admin = new Redis(testRedisUrl());
  users = new AgentRedis({ url: testRedisUrl(), secretBox: new SecretBox(SecretBox.generateKey()), log: silentLogger() });
  urlA = await users.ensure(a);
  await users.ensure(b);
});

afterAll(async () => {
  await server?.close();
  for (const redis of connections) redis.disconnect();
  await users.remove(a);
  await users.remove(b);
  await users.close();
  admin.disconnect();
  await db.drop();
});

it('carries an agent server’s queue and run events as the deployment’s user, never the platform’s', async () => {
  const url = new URL(urlA);
  expect(url.username).toBe(AgentRedis.user(a));
  expect(url.password).not.toBe('');
  expect({ host: url.host, pathname: url.pathname }).toEqual({ host: new URL(testRedisUrl()).host, pathname: new URL(testRedisUrl()).pathname });
  server = await startAgentServer(
    { configPath: echoProject, databaseUrl: db.url, schema: agentSchema(a), redisUrl: urlA, host: '127.0.0.1', port: 0, workers: 2, leaseMs: 1000 },
    silentLogger(),
  );
  const post = (path: string, body: unknown) =>
    fetch(`${server!.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const { thread_id } = (await (await post('/threads', {})).json()) as { thread_id: string };
  const input = (content: string) => ({ assistant_id: 'echo', input: { messages: [{ role: 'user', content }] } });
  const result = (await (await post(`/threads/${thread_id}/runs/wait`, input('acl'))).json()) as { messages: { content: string }[] };
  expect(result.messages.at(-1)?.content).toBe('echo: acl');
  const streamed = await (await post(`/threads/${thread_id}/runs/stream`, { ...input('again'), stream_mode: ['updates'], stream_resumable: true })).text();
  expect([...streamed.matchAll(/^event: (\S+)/gm)].map((m) => m[1])).toEqual(['metadata', 'updates']);
  await server.close();
  server = undefined;
  // Its keys are where the user may write, and Redis refused it nothing.
  expect((await keys(keyOf(a, '*'))).length).toBeGreaterThan(0);
  const log = (await admin.call('ACL', 'LOG', '100')) as unknown[][];
  expect(log.map((entry) => entry.map(String)).filter((entry) => entry[entry.indexOf('username') + 1] === AgentRedis.user(a))).toEqual([]);
}, 60_000);

it('keeps the user out of other deployments’ keys and channels and off admin and server-wide commands', async () => {
  await admin.set(keyOf(b, 'secret'), 'of b');
  const asA = connect(urlA);
  await asA.connect();
  expect(await asA.set(keyOf(a, 'mine'), '1')).toBe('OK');
  expect({
    get: await refusal(() => asA.get(keyOf(b, 'secret'))),
    set: await refusal(() => asA.set(keyOf(b, 'secret'), 'overwritten')),
    del: await refusal(() => asA.del(keyOf(b, 'secret'))),
    platform: await refusal(() => asA.get('berth:control-plane:control-plane-revisions:meta')),
    declaredInScript: await refusal(() => asA.eval("return redis.call('GET', KEYS[1])", 1, keyOf(b, 'secret'))),
    hiddenInScript: await refusal(() => asA.eval(`return redis.call('GET', '${keyOf(b, 'secret')}')`, 0)),
    publish: await refusal(() => asA.publish(keyOf(b, 'broker:{run}:wake'), 'x')),
    subscribe: await refusal(() => connect(urlA).subscribe(keyOf(b, 'broker:{run}:wake'))),
    psubscribe: await refusal(() => connect(urlA).psubscribe('berth:*')),
  }).toEqual({
    get: 'NOPERM',
    set: 'NOPERM',
    del: 'NOPERM',
    platform: 'NOPERM',
    declaredInScript: 'NOPERM',
    hiddenInScript: expect.stringMatching(/NOPERM|ERR/),
    publish: 'NOPERM',
    subscribe: 'NOPERM',
    psubscribe: 'NOPERM',
  });
  expect(await admin.get(keyOf(b, 'secret'))).toBe('of b');
  // Asked with ACL DRYRUN, so a wrong rule cannot flush or stop the shared test server.
  const dryRun = async (...command: string[]) =>
    String(await admin.call('ACL', 'DRYRUN', AgentRedis.user(a), ...command)).startsWith('OK') ? 'allowed' : 'refused';
  const forbidden = [
    ['FLUSHALL'],
    ['FLUSHDB'],
    ['KEYS', '*'],
    ['SCAN', '0'],
    ['RANDOMKEY'],
    ['CONFIG', 'GET', '*'],
    ['CONFIG', 'SET', 'maxmemory', '1'],
    ['ACL', 'LIST'],
    ['ACL', 'SETUSER', 'x'],
    ['ACL', 'WHOAMI'],
    ['DEBUG', 'SLEEP', '0'],
    ['SHUTDOWN'],
    ['MONITOR'],
    ['CLIENT', 'LIST'],
    ['CLIENT', 'KILL', 'ID', '1'],
    ['PUBSUB', 'CHANNELS'],
    ['SCRIPT', 'FLUSH'],
    ['FUNCTION', 'FLUSH'],
    ['SWAPDB', '0', '1'],
    ['SORT', keyOf(a, 'list'), 'GET', keyOf(b, '*')],
    ['SAVE'],
    ['REPLICAOF', 'NO', 'ONE'],
  ];
  const answers = Object.fromEntries(await Promise.all(forbidden.map(async (c) => [c.join(' '), await dryRun(...c)] as const)));
  expect(answers).toEqual(Object.fromEntries(forbidden.map((c) => [c.join(' '), 'refused'])));
  expect(await dryRun('INFO')).toBe('allowed');
  expect(await dryRun('CLIENT', 'SETNAME', 'x')).toBe('allowed');
});

it('updates the user on every deploy without cutting off the serving agent servers’ subscriptions', async () => {
  const subscriber = connect(urlA);
  const received = new Promise<string>((resolve) => subscriber.once('message', (_channel: string, message: string) => resolve(message)));
  await subscriber.subscribe(keyOf(a, 'broker:{run}:wake'));
  expect(await users.ensure(a)).toBe(urlA);
  // One subscriber still receives it: the update did not cut its connection off.
  expect(await admin.publish(keyOf(a, 'broker:{run}:wake'), 'after the update')).toBe(1);
  expect(await received).toBe('after the update');
});

it("reports the platform's Redis usage to the metrics once started", async () => {
  const read = async (name: string) => sampleSum(parseMetrics((await scrape()).body), name);
  expect(await read('berth_redis_memory_max_bytes')).toBe(0); // not started: not reported
  await users.start(async () => [a, b]);
  const limit = (await admin.config('GET', 'maxmemory')) as string[];
  try {
    // A limit only this test sets (far above what the tier's Redis holds, so nothing is evicted).
    await admin.config('SET', 'maxmemory', String(64 * 2 ** 30));
    await admin.set(keyOf(b, 'large'), 'x'.repeat(8 * 2 ** 20));
    const held = [connect(urlA), connect(urlA), connect(urlA)];
    await Promise.all(held.map((redis) => redis.ping()));
    expect(await read('berth_redis_memory_max_bytes')).toBe(64 * 2 ** 30);
    expect(await read('berth_redis_memory_used_bytes')).toBeGreaterThan(8 * 2 ** 20);
    expect(await read('berth_redis_connected_clients')).toBeGreaterThanOrEqual(held.length + 2);
  } finally {
    await admin.config('SET', 'maxmemory', limit[1]!);
    await admin.del(keyOf(b, 'large'));
  }
});

it('re-creates a user Redis lost with the same password, and remove deletes the user and its keys', async () => {
  await admin.call('ACL', 'DELUSER', AgentRedis.user(a)); // what a restart without an ACL file does
  expect(await refusal(() => connect(urlA).ping())).toMatch(/WRONGPASS/);
  expect(await users.restore(async () => [a, b])).toEqual([a]);
  expect(await connect(urlA).ping()).toBe('PONG');
  expect(await users.ensure(a)).toBe(urlA);

  await users.remove(a);
  expect(await admin.call('ACL', 'GETUSER', AgentRedis.user(a))).toBeNull();
  expect(await refusal(() => connect(urlA).ping())).toMatch(/WRONGPASS/);
  expect(await keys(keyOf(a, '*'))).toEqual([]);
  expect(await admin.get(keyOf(b, 'secret'))).toBe('of b');
  await users.remove(a); // a second time: nothing left to do
}, 30_000);
