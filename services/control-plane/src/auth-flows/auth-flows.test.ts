/**
 * Login flows through the control plane's gRPC service, on a real Postgres: two control-plane
 * processes (replicas) share one database, as they would in Kubernetes.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ConflictError, InvalidArgumentError, NotFoundError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { AuthFlowService, AuthFlowStatus, timestampDate, WaitStatus } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import pg from 'pg';
import { start, type RunningControlPlane } from '../index.js';

let testDb: TestDatabase;
let replicaA: RunningControlPlane;
let replicaB: RunningControlPlane;
let a: RpcClient<typeof AuthFlowService>;
let b: RpcClient<typeof AuthFlowService>;
let admin: pg.Client;

const config = (url: string) => ({ databaseUrl: url, grpcHost: '127.0.0.1', grpcPort: 0, logLevel: 'silent' as const });

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
const expireAll = () => admin.query("UPDATE control_plane.auth_flows SET expires_at = now() - interval '1 second'");

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
  it('wakes a waiter on another replica within milliseconds of the approval, and hands the token out once', async () => {
    const { authId, approvalId } = await a.startFlow({});
    const waiting = b.wait({ authId, timeoutMs: 20_000 }, { timeoutMs: 25_000 }).then((r) => ({ ...r, at: Date.now() }));
    await new Promise((r) => setTimeout(r, 300));
    const before = Date.now();
    const completed = await a.completeFlow({ approvalId, token: TOKEN, tenantId: '00000000-0000-4000-8000-000000000001' });
    expect(completed.flow?.status).toBe(AuthFlowStatus.COMPLETED);
    const answer = await waiting;
    expect(answer.status).toBe(WaitStatus.COMPLETED);
    expect(answer.token).toBe(TOKEN);
    expect(answer.at - before).toBeLessThan(150);

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
    const waiters = [a, b, a, b].map((client) => client.wait({ authId, timeoutMs: 10_000 }, { timeoutMs: 15_000 }));
    await new Promise((r) => setTimeout(r, 200));
    await b.completeFlow({ approvalId, token: TOKEN });
    const answers = await Promise.all(waiters);
    expect(answers.map((r) => r.status)).toEqual(Array(4).fill(WaitStatus.COMPLETED));
    expect(answers.filter((r) => r.token === TOKEN)).toHaveLength(1);
  });

  it('answers timeout after the whole timeout, pending for timeout 0, not_found for unknown ids', async () => {
    const { authId } = await a.startFlow({});
    const started = Date.now();
    expect((await a.wait({ authId, timeoutMs: 400 })).status).toBe(WaitStatus.TIMEOUT);
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(3000);
    expect((await a.wait({ authId, timeoutMs: 0 })).status).toBe(WaitStatus.PENDING);
    expect((await a.wait({ authId: 'brt_auth_' + 'B'.repeat(43), timeoutMs: 0 })).status).toBe(WaitStatus.NOT_FOUND);
    expect((await a.wait({ authId: 'nonsense', timeoutMs: 10_000 })).status).toBe(WaitStatus.NOT_FOUND);
    await expect(a.wait({ authId, timeoutMs: -1 })).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(a.wait({ authId, timeoutMs: 600_001 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  it('ends a wait with not_found when the flow expires, and refuses to complete an expired flow', async () => {
    const { authId, approvalId } = await a.startFlow({ ttlSeconds: 1 });
    const started = Date.now();
    expect((await b.wait({ authId, timeoutMs: 10_000 })).status).toBe(WaitStatus.NOT_FOUND);
    expect(Date.now() - started).toBeLessThan(5000);
    await expect(a.completeFlow({ approvalId, token: TOKEN })).rejects.toBeInstanceOf(NotFoundError);
    expect((await a.getFlow({ id: { case: 'approvalId', value: approvalId } })).flow?.status).toBe(AuthFlowStatus.EXPIRED);
  });

  it('does not hold a database connection while waiting: many waiters, all woken', async () => {
    const flows = await Promise.all(Array.from({ length: 30 }, () => a.startFlow({})));
    const waits = flows.map((f, i) => (i % 2 ? a : b).wait({ authId: f.authId, timeoutMs: 15_000 }, { timeoutMs: 20_000 }));
    // 30 waits on pools of 10 connections: once each has read its flow (a slow machine needs a while),
    // no control-plane connection stays busy for the rest of the wait.
    const busyNow = async (): Promise<number> =>
      (
        await admin.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'berth-control-plane%' AND state <> 'idle'",
        )
      ).rows[0].n;
    const settleBy = Date.now() + 5_000;
    while ((await busyNow()) > 0 && Date.now() < settleBy) await new Promise((r) => setTimeout(r, 50));
    const samples: number[] = [];
    for (let i = 0; i < 5; i++) {
      samples.push(await busyNow());
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(samples).toEqual([0, 0, 0, 0, 0]);
    const started = Date.now();
    await Promise.all(flows.map((f, i) => (i % 2 ? b : a).completeFlow({ approvalId: f.approvalId, token: `${TOKEN}-${i}` })));
    const answers = await Promise.all(waits);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(answers.map((r) => r.token)).toEqual(flows.map((_f, i) => `${TOKEN}-${i}`));
    expect(replicaA.authFlows).toBeDefined();
  });

  it('sweeps: expired flows lose uncollected tokens, then disappear after the retention', async () => {
    const { AuthFlowStore } = await import('./store.js');
    const { createDatabase } = await import('@berth/db');
    const database = createDatabase<import('./tables.js').AuthFlowTables>({ connectionString: testDb.url, schema: 'control_plane' });
    try {
      const store = new AuthFlowStore(database.db, { channel: 'unused', retentionSeconds: 3600 });
      const uncollected = await store.create({ ttlSeconds: 600, clientName: '' });
      await store.complete({ approvalId: uncollected.approvalId, token: TOKEN, tenantId: null });
      await expireAll();
      expect(await store.claim(uncollected.authId)).toEqual({ kind: 'missing' });
      const swept = await store.sweep();
      expect(swept.expired).toBeGreaterThan(0);
      const left = await admin.query("SELECT count(*)::int AS n FROM control_plane.auth_flows WHERE token IS NOT NULL OR status = 'pending'");
      expect(left.rows[0].n).toBe(0);
      await admin.query("UPDATE control_plane.auth_flows SET expires_at = now() - interval '2 hours'");
      const deleted = await store.sweep();
      expect(deleted.deleted).toBeGreaterThan(0);
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
      const waiting = client.wait({ authId, timeoutMs: 30_000 }, { timeoutMs: 35_000 });
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      const closing = replica.close();
      expect((await waiting).status).toBe(WaitStatus.PENDING);
      await closing;
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      client.close();
    }
  });
});
