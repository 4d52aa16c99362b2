/**
 * Login flows through the control plane's gRPC service, on a real Postgres: two control-plane
 * processes (replicas) share one database, as they would in Kubernetes. Their time is a
 * ManualClock the tests move: a wait that ends without the clock moving was woken by its
 * notification, and timeouts and expiries happen at exact instants.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { ConflictError, InvalidArgumentError, NotFoundError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { AuthFlowService, AuthFlowStatus, timestampDate, WaitStatus } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { start, type RunningControlPlane } from '../index.js';

let testDb: TestDatabase;
let replicaA: RunningControlPlane;
let replicaB: RunningControlPlane;
let a: RpcClient<typeof AuthFlowService>;
let b: RpcClient<typeof AuthFlowService>;
let admin: pg.Client;

const clock = new ManualClock();
// Sweeps only when a test calls one: the replicas' own sweepers would fire only after a day of this clock.
const config = (url: string) => ({ databaseUrl: url, grpcHost: '127.0.0.1', grpcPort: 0, logLevel: 'silent' as const, clock, sweepIntervalMs: 86_400_000 });

/** Resolves once `n` more timers than `before` are pending on the clock: that many waits are asleep. */
const asleep = (before: number, n: number) => until(`${n} waits asleep`, () => (clock.pending >= before + n ? true : undefined), 10_000, 10);

beforeAll(async () => {
  testDb = await createTestDatabase('cp_auth');
  [replicaA, replicaB] = await Promise.all([start(config(testDb.url), silentLogger()), start(config(testDb.url), silentLogger())]);
  a = createRpcClient(AuthFlowService, replicaA.address);
  b = createRpcClient(AuthFlowService, replicaB.address);
  admin = new pg.Client({ connectionString: testDb.url });
  await admin.connect();
});
afterAll(async () => {
  a.close();
  b.close();
  await admin.end();
  await replicaA.close();
  await replicaB.close();
  await testDb.drop();
});

const TOKEN = 'brt_tok_example-token';

/** A wait through `client`, once it sleeps; `answer` is its status once it answered. */
async function sleepingWait(client: RpcClient<typeof AuthFlowService>, authId: string, timeoutMs: number) {
  const timers = clock.pending;
  const waiting: { answer?: WaitStatus; answered: Promise<WaitStatus> } = {
    answered: client.wait({ authId, timeoutMs }).then((r) => (waiting.answer = r.status)),
  };
  await asleep(timers, 1);
  return waiting;
}

describe('StartFlow and GetFlow', () => {
  it('starts a pending flow with two distinct unguessable secrets, stored only as digests', async () => {
    const started = await a.startFlow({ clientName: 'berth CLI on laptop' });
    expect(started.authId).toMatch(/^brt_auth_[A-Za-z0-9_-]{43}$/);
    expect(started.approvalId).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(started.approvalId).not.toBe(started.authId);
    const flow = started.flow!;
    expect(flow.status).toBe(AuthFlowStatus.PENDING);
    expect(flow.clientName).toBe('berth CLI on laptop');
    const lifetime = timestampDate(flow.expiresAt!).getTime() - timestampDate(flow.createdAt!).getTime();
    expect(lifetime).toBe(600_000);

    const rows = await admin.query('SELECT * FROM control_plane.auth_flows');
    const dump = JSON.stringify(rows.rows);
    expect(dump).not.toContain(started.authId);
    expect(dump).not.toContain(started.approvalId);

    // Either secret finds the flow, on any replica; the response never carries a token.
    expect((await b.getFlow({ id: { case: 'authId', value: started.authId } })).flow?.status).toBe(AuthFlowStatus.PENDING);
    expect((await b.getFlow({ id: { case: 'approvalId', value: started.approvalId } })).flow?.clientName).toBe('berth CLI on laptop');
  });

  it('refuses bad input and answers NOT_FOUND for unknown ids', async () => {
    await expect(a.startFlow({ ttlSeconds: 4000 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(a.startFlow({ clientName: 'x'.repeat(201) })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(a.getFlow({})).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(a.getFlow({ id: { case: 'authId', value: 'brt_auth_' + 'A'.repeat(43) } })).rejects.toBeInstanceOf(NotFoundError);
    await expect(a.getFlow({ id: { case: 'approvalId', value: "'; DROP TABLE auth_flows; --" } })).rejects.toBeInstanceOf(NotFoundError);
    // Control characters in the client name become spaces.
    expect((await a.startFlow({ clientName: 'a\u0000b\nc' })).flow?.clientName).toBe('a b c');
  });
});

describe('CompleteFlow and Wait', () => {
  it('wakes a waiter on another replica on the approval, without any timer firing, and hands the token out once', async () => {
    const { authId, approvalId } = await a.startFlow({});
    const timers = clock.pending;
    const waiting = b.wait({ authId, timeoutMs: 20_000 }, { timeoutMs: 25_000 });
    await asleep(timers, 1);
    const completed = await a.completeFlow({ approvalId, token: TOKEN, tenantId: '00000000-0000-4000-8000-000000000001' });
    expect(completed.flow?.status).toBe(AuthFlowStatus.COMPLETED);
    const answer = await waiting;
    expect(answer.status).toBe(WaitStatus.COMPLETED);
    expect(answer.token).toBe(TOKEN);

    // The token was handed out: later waits see the completion but no token, and the row forgot it.
    const again = await a.wait({ authId, timeoutMs: 0 });
    expect(again.status).toBe(WaitStatus.COMPLETED);
    expect(again.token).toBeUndefined();
    expect((await admin.query('SELECT count(*)::int AS n FROM control_plane.auth_flows WHERE token IS NOT NULL')).rows[0].n).toBe(0);
    const flow = (await a.getFlow({ id: { case: 'authId', value: authId } })).flow!;
    expect(flow).toMatchObject({ status: AuthFlowStatus.COMPLETED, tokenClaimed: true, tenantId: '00000000-0000-4000-8000-000000000001' });

    // A second approval is a conflict.
    await expect(a.completeFlow({ approvalId, token: TOKEN })).rejects.toBeInstanceOf(ConflictError);
  });

  it('gives the token to exactly one of several concurrent waiters', async () => {
    const { authId, approvalId } = await a.startFlow({});
    const timers = clock.pending;
    const waiters = [a, b, a, b].map((client) => client.wait({ authId, timeoutMs: 10_000 }, { timeoutMs: 15_000 }));
    await asleep(timers, 4);
    await b.completeFlow({ approvalId, token: TOKEN });
    const answers = await Promise.all(waiters);
    expect(answers.map((r) => r.status)).toEqual(Array(4).fill(WaitStatus.COMPLETED));
    expect(answers.filter((r) => r.token === TOKEN)).toHaveLength(1);
  });

  it('answers timeout at the instant the timeout ends, pending for timeout 0, not_found for unknown ids', async () => {
    const { authId } = await a.startFlow({});
    const waiting = await sleepingWait(a, authId, 400);
    await clock.advance(399);
    expect(waiting.answer).toBeUndefined();
    await clock.advance(1);
    expect(await waiting.answered).toBe(WaitStatus.TIMEOUT);
    expect((await a.wait({ authId, timeoutMs: 0 })).status).toBe(WaitStatus.PENDING);
    expect((await a.wait({ authId: 'brt_auth_' + 'B'.repeat(43), timeoutMs: 0 })).status).toBe(WaitStatus.NOT_FOUND);
    expect((await a.wait({ authId: 'nonsense', timeoutMs: 10_000 })).status).toBe(WaitStatus.NOT_FOUND);
    await expect(a.wait({ authId, timeoutMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(a.wait({ authId, timeoutMs: 600_001 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('ends a wait with not_found at the instant the flow expires, and refuses to complete an expired flow', async () => {
    const { authId, approvalId } = await a.startFlow({ ttlSeconds: 1 });
    const waiting = await sleepingWait(b, authId, 10_000);
    await clock.advance(999);
    expect(waiting.answer).toBeUndefined();
    expect((await a.getFlow({ id: { case: 'approvalId', value: approvalId } })).flow?.status).toBe(AuthFlowStatus.PENDING);
    await clock.advance(1);
    expect(await waiting.answered).toBe(WaitStatus.NOT_FOUND);
    await expect(a.completeFlow({ approvalId, token: TOKEN })).rejects.toBeInstanceOf(NotFoundError);
    expect((await a.getFlow({ id: { case: 'approvalId', value: approvalId } })).flow?.status).toBe(AuthFlowStatus.EXPIRED);
  });

  it('does not hold a database connection while waiting: many waiters, all woken', async () => {
    const flows = await Promise.all(Array.from({ length: 30 }, () => a.startFlow({})));
    const timers = clock.pending;
    const waits = flows.map((f, i) => (i % 2 ? a : b).wait({ authId: f.authId, timeoutMs: 15_000 }, { timeoutMs: 20_000 }));
    // 30 waits on pools of 10 connections: once each has read its flow and sleeps, no
    // control-plane connection is busy.
    await asleep(timers, 30);
    const busy = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'berth-control-plane%' AND state <> 'idle'");
    expect(busy.rows[0].n).toBe(0);
    await Promise.all(flows.map((f, i) => (i % 2 ? b : a).completeFlow({ approvalId: f.approvalId, token: `${TOKEN}-${i}` })));
    const answers = await Promise.all(waits);
    expect(answers.map((r) => r.token)).toEqual(flows.map((_f, i) => `${TOKEN}-${i}`));
    expect(replicaA.authFlows).toBeDefined();
  });

  it('sweeps: expired flows lose uncollected tokens, then disappear after the retention', async () => {
    const { AuthFlowStore } = await import('./store.js');
    const { createDatabase } = await import('@berth/db');
    const database = createDatabase<import('./tables.js').AuthFlowTables>({ connectionString: testDb.url, schema: 'control_plane' });
    try {
      const store = new AuthFlowStore(database.db, { channel: 'unused', retentionSeconds: 3600, clock });
      const uncollected = await store.create({ ttlSeconds: 600, clientName: '' });
      await store.complete({ approvalId: uncollected.approvalId, token: TOKEN, tenantId: null });
      await clock.advance(599_999);
      expect((await store.getByAuthId(uncollected.authId))?.status).toBe('completed');
      await clock.advance(1);
      // Every flow of this file has expired by now.
      expect(await store.claim(uncollected.authId)).toEqual({ kind: 'missing' });
      const swept = await store.sweep();
      expect(swept.expired).toBeGreaterThan(0);
      const left = await admin.query("SELECT count(*)::int AS n FROM control_plane.auth_flows WHERE token IS NOT NULL OR status = 'pending'");
      expect(left.rows[0].n).toBe(0);
      await clock.advance(3_600_000);
      await store.sweep();
      expect((await store.getByAuthId(uncollected.authId))?.status).toBe('expired');
      await clock.advance(1);
      expect((await store.sweep()).deleted).toBeGreaterThan(0);
      expect((await admin.query('SELECT count(*)::int AS n FROM control_plane.auth_flows')).rows[0].n).toBe(0);
    } finally {
      await database.close();
    }
  });

  it('answers pending to waiters when the control plane shuts down', async () => {
    const replica = await start(config(testDb.url), silentLogger());
    const client = createRpcClient(AuthFlowService, replica.address);
    try {
      const { authId } = await client.startFlow({});
      const timers = clock.pending;
      const waiting = client.wait({ authId, timeoutMs: 30_000 }, { timeoutMs: 35_000 });
      await asleep(timers, 1);
      // The clock stands still: only the shutdown can end the wait.
      const closing = replica.close();
      expect((await waiting).status).toBe(WaitStatus.PENDING);
      await closing;
    } finally {
      client.close();
    }
  });
});
