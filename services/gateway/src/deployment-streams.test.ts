/**
 * The live API of a deployment as a client meets it: `GET /v2/deployments/{id}/revisions/{rid}/logs`
 * (and the latest revision's) as a JSON page with a time range, and with `follow=true` as
 * server-sent events that resume with Last-Event-ID, the newest lines (`tail`, followed or not) and
 * paging back from a line (`before`); `GET /v2/deployments/{id}/events`, a change
 * stream. The gateway in front of the control plane's own stream methods (streamHandlers over a
 * real DeploymentStore and LISTEN/NOTIFY on real Postgres), lines written by the control plane's log
 * writer; the rest of the DeploymentService is the fake.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { createDatabase, type Database } from '@berth/db';
import { silentLogger } from '@berth/log';
import { createTestDatabase, sseFrames, until, type SseFrame, type TestDatabase } from '@berth/testing';
import { CONTROL_PLANE_SCHEMA, migrateControlPlane } from '../../control-plane/src/index.js';
import { createDeployment } from '../../control-plane/src/__tests__/deployment-store.js';
import { RevisionLogWriter } from '../../control-plane/src/deployments/log-writer.js';
import { DeploymentWatch } from '../../control-plane/src/deployments/deployment-watch.js';
import { NotificationHub } from '../../control-plane/src/deployments/notification-hub.js';
import { RevisionLogs } from '../../control-plane/src/deployments/revision-logs.js';
import { streamHandlers } from '../../control-plane/src/deployments/rpc.js';
import { DEPLOYMENT_CHANGES_CHANNEL, REVISION_LOGS_CHANNEL } from '../../control-plane/src/deployments/notifications.js';
import { DeploymentStore } from '../../control-plane/src/deployments/store.js';
import type { DeploymentTables } from '../../control-plane/src/deployments/tables.js';
import { FakeDeploymentService } from './__tests__/fake-deployments.js';
import { testGatewayConfig } from './__tests__/test-config.js';
import { start, type RunningGateway } from './index.js';

let testDb: TestDatabase;
let database: Database<DeploymentTables>;
let store: DeploymentStore;
let hub: NotificationHub;
let writer: RevisionLogWriter;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
const clock = new ManualClock();
let tenantId: string;
let key: string;
let attackerId: string;
let attackerKey: string;

beforeAll(async () => {
  testDb = await createTestDatabase('gw_logs');
  await migrateControlPlane(testDb.url);
  database = createDatabase<DeploymentTables>({ connectionString: testDb.url, schema: CONTROL_PLANE_SCHEMA });
  store = new DeploymentStore(database.db);
  hub = new NotificationHub({
    databaseUrl: testDb.url,
    channels: [REVISION_LOGS_CHANNEL, DEPLOYMENT_CHANGES_CHANNEL],
    log: silentLogger(),
    maxStreamsPerTenant: 2,
  });
  writer = new RevisionLogWriter(store.logs, silentLogger());
  fake = await new FakeDeploymentService().start(undefined, streamHandlers({ logs: new RevisionLogs(store, hub), watch: new DeploymentWatch(store, hub) }));
  gateway = await start({ ...testGatewayConfig(testDb.url, fake.address), clock }, silentLogger());
  const tenant = await gateway.store.createTenant({ name: 'owner' });
  tenantId = tenant.id;
  key = (await gateway.store.createApiKey({ tenantId, name: 'dev' })).key;
  const attacker = await gateway.store.createTenant({ name: 'attacker' });
  attackerId = attacker.id;
  attackerKey = (await gateway.store.createApiKey({ tenantId: attackerId, name: 'dev' })).key;
});
afterAll(async () => {
  await gateway?.close();
  await fake?.close();
  await writer?.close();
  await hub?.close();
  await database?.close();
  await testDb?.drop();
});

async function write(revisionId: string, ...lines: string[]): Promise<void> {
  for (const line of lines) writer.for(revisionId, 'deploy')(line);
  await writer.flush();
}

async function endLog(revisionId: string): Promise<void> {
  writer.end(revisionId);
  await writer.flush();
}

const logsPath = (deploymentId: string, revisionId: string, query = '') => `/v2/deployments/${deploymentId}/revisions/${revisionId}/logs${query}`;

/** An SSE response read in the background: its frames, and its raw text (comments included). */
async function openStream(path: string, apiKey: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': apiKey, accept: 'text/event-stream', ...headers }, signal: controller.signal });
  const frames: SseFrame[] = [];
  let raw = '';
  let closed = false;
  const done =
    res.ok && res.body
      ? (async () => {
          const [forFrames, forText] = res.body!.tee();
          await Promise.all([
            (async () => {
              for await (const frame of sseFrames(forFrames)) frames.push(frame);
            })(),
            (async () => {
              for await (const text of forText.pipeThrough(new TextDecoderStream())) raw += text;
            })(),
          ]);
        })()
          .catch(() => undefined)
          .finally(() => (closed = true))
      : Promise.resolve();
  return {
    res,
    frames,
    raw: () => raw,
    closed: () => closed,
    done,
    logs: () => frames.filter((f) => f.event === 'log').map((f) => ({ sseId: f.id, ...(JSON.parse(f.data) as { id: number; message: string }) })),
    close: () => controller.abort(),
  };
}

describe('following a log (follow=true)', () => {
  it('streams the lines there are, then each new one with its id, in order, and ends with the log', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    await write(revisionId, 'installing', 'starting');
    const stream = await openStream(logsPath(deploymentId, revisionId, '?follow=true'), key);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await until('the lines there are', () => stream.logs().length === 2);

    await write(revisionId, 'listening on :8000');
    await until('a line written after it connected', () => stream.logs().length === 3);
    await write(revisionId, 'GET /ok 200', 'GET /threads 201');
    await endLog(revisionId);
    await stream.done;

    const lines = stream.logs();
    expect(lines.map((l) => l.message)).toEqual(['installing', 'starting', 'listening on :8000', 'GET /ok 200', 'GET /threads 201']);
    // Every line's SSE id is its entry id, increasing.
    expect(lines.map((l) => l.sseId)).toEqual(lines.map((l) => String(l.id)));
    const ids = lines.map((l) => l.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(stream.frames.at(-1)).toEqual({ event: 'end', data: JSON.stringify({ revision_id: revisionId }) });
    expect(stream.closed()).toBe(true);
  });

  it('resumes with Last-Event-ID: exactly the lines it missed, none twice', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    await write(revisionId, 'one', 'two');
    const first = await openStream(logsPath(deploymentId, revisionId, '?follow=true'), key);
    await until('the first lines', () => first.logs().length === 2);
    first.close();
    await first.done;
    const lastEventId = first.frames.filter((f) => f.event === 'log').at(-1)!.id!;

    await write(revisionId, 'three', 'four');
    // An EventSource reconnects to the same URL (offset=0 here) with the last id it saw.
    const resumed = await openStream(logsPath(deploymentId, revisionId, '?follow=true&offset=0'), key, { 'last-event-id': lastEventId });
    await until('the missed lines', () => resumed.logs().length === 2);
    await write(revisionId, 'five');
    await endLog(revisionId);
    await resumed.done;
    expect(resumed.logs().map((l) => l.message)).toEqual(['three', 'four', 'five']);
  });

  it('follows the latest revision from the deployment route, and ends at once on a log that has ended', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    await write(revisionId, 'failed: no langgraph.json');
    await endLog(revisionId);
    const stream = await openStream(`/v2/deployments/${deploymentId}/logs?follow=true`, key);
    await stream.done;
    expect(stream.logs().map((l) => l.message)).toEqual(['failed: no langgraph.json']);
    expect(stream.frames.at(-1)?.event).toBe('end');
  });

  it('sends heartbeats on the clock while idle', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    const stream = await openStream(logsPath(deploymentId, revisionId, '?follow=true'), key);
    expect(stream.raw()).not.toContain(': heartbeat');
    await clock.advance(15_000);
    await until('a heartbeat', () => stream.raw().includes(': heartbeat'));
    stream.close();
    await stream.done;
  });

  it('limits the logs one tenant follows at once (429), not those of another tenant', async () => {
    // Tenants of their own: the streams of the tests before end in the control plane a moment after the client left.
    const [busy, other] = await Promise.all(['busy', 'other'].map((name) => gateway.store.createTenant({ name })));
    const busyKey = (await gateway.store.createApiKey({ tenantId: busy!.id, name: 'dev' })).key;
    const otherKey = (await gateway.store.createApiKey({ tenantId: other!.id, name: 'dev' })).key;
    const mine = await createDeployment(store, busy!.id, 'QUEUED');
    const theirs = await createDeployment(store, other!.id, 'QUEUED');
    const path = logsPath(mine.deploymentId, mine.revisionId, '?follow=true');
    const open = [await openStream(path, busyKey), await openStream(path, busyKey)];
    expect(open.map((s) => s.res.status)).toEqual([200, 200]);
    const refused = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': busyKey } });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ detail: expect.stringContaining('at most 2 logs or deployments') });
    // A watched deployment is a stream too.
    expect((await fetch(`${gateway.url}/v2/deployments/${mine.deploymentId}/events`, { headers: { 'x-api-key': busyKey } })).status).toBe(429);
    const others = await openStream(logsPath(theirs.deploymentId, theirs.revisionId, '?follow=true'), otherKey);
    expect(others.res.status).toBe(200);

    open[0]!.close();
    await open[0]!.done;
    const again = await until('a stream once one closed', async () => {
      const s = await openStream(path, busyKey);
      return s.res.status === 200 ? s : undefined;
    });
    for (const s of [again, open[1]!, others]) s.close();
    await Promise.all([again.done, open[1]!.done, others.done]);
  });
});

describe('watching a deployment (/events)', () => {
  it('says changed at once and at each change, deleted at the end; not to another tenant', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    const attacker = await fetch(`${gateway.url}/v2/deployments/${deploymentId}/events`, { headers: { 'x-api-key': attackerKey } });
    expect(attacker.status).toBe(404);
    await attacker.body?.cancel();

    const stream = await openStream(`/v2/deployments/${deploymentId}/events`, key);
    expect(stream.res.status).toBe(200);
    const events = () => stream.frames.map((f) => f.event);
    // (The notification of the deployment's creation may come after the stream started, as one more event.)
    await until('changed at once', () => events().length >= 1);
    const seen = events().length;
    await store.move({ revisionId }, 'AWAITING_BUILD');
    await until('changed after the move', () => events().length > seen);
    await store.markDeleting(tenantId, deploymentId);
    await stream.done;
    expect(events().at(-1)).toBe('deleted');
    expect(new Set(events().slice(0, -1))).toEqual(new Set(['changed']));
    expect(JSON.parse(stream.frames[0]!.data)).toEqual({ deployment_id: deploymentId });
  });
});

describe('reading a page', () => {
  it('answers only the lines of a time range, paged', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    await write(revisionId, 'early', 'middle 1', 'middle 2', 'late');
    const all = await store.logs.read(revisionId, { afterId: 0, limit: 100 });
    const minute = (n: number) => new Date(Date.UTC(2026, 10, 27, 12, n));
    for (const [n, line] of all.entries())
      await database.db
        .updateTable('revision_logs')
        .set({ created_at: minute(n) })
        .where('id', '=', line.id)
        .execute();
    const range = `since=${encodeURIComponent(minute(1).toISOString())}&until=${encodeURIComponent(minute(3).toISOString())}`;

    const res = await fetch(`${gateway.url}${logsPath(deploymentId, revisionId, `?${range}`)}`, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(200);
    const page = (await res.json()) as { logs: { message: string; timestamp: string }[]; next_offset: number };
    expect(page.logs.map((l) => [l.message, l.timestamp])).toEqual([
      ['middle 1', minute(1).toISOString()],
      ['middle 2', minute(2).toISOString()],
    ]);
    const first = (await (
      await fetch(`${gateway.url}${logsPath(deploymentId, revisionId, `?${range}&limit=1`)}`, { headers: { 'x-api-key': key } })
    ).json()) as {
      logs: { message: string }[];
      next_offset: number;
    };
    const second = (await (
      await fetch(`${gateway.url}${logsPath(deploymentId, revisionId, `?${range}&limit=1&offset=${first.next_offset}`)}`, { headers: { 'x-api-key': key } })
    ).json()) as { logs: { message: string }[] };
    expect([...first.logs, ...second.logs].map((l) => l.message)).toEqual(['middle 1', 'middle 2']);
  });
});

describe('the newest lines (tail) and paging back (before)', () => {
  const get = async (path: string) => {
    const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': key } });
    expect({ path, status: res.status }).toEqual({ path, status: 200 });
    return (await res.json()) as { logs: { id: number; message: string }[]; next_offset: number };
  };

  it('answers the last N lines of a long log, and pages back from its oldest line to the first', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    const lines = Array.from({ length: 7 }, (_, i) => `line ${i + 1}`);
    await write(revisionId, ...lines);

    const newest = await get(logsPath(deploymentId, revisionId, '?tail=3'));
    expect(newest.logs.map((l) => l.message)).toEqual(['line 5', 'line 6', 'line 7']);
    // Reading on from it (offset) gets what is written after.
    await write(revisionId, 'line 8');
    expect((await get(logsPath(deploymentId, revisionId, `?offset=${newest.next_offset}`))).logs.map((l) => l.message)).toEqual(['line 8']);

    const older = await get(logsPath(deploymentId, revisionId, `?before=${newest.logs[0]!.id}&limit=3`));
    expect(older.logs.map((l) => l.message)).toEqual(['line 2', 'line 3', 'line 4']);
    // Fewer than limit: the first line is reached.
    const oldest = await get(logsPath(deploymentId, revisionId, `?before=${older.logs[0]!.id}&limit=3`));
    expect(oldest.logs.map((l) => l.message)).toEqual(['line 1']);
    expect((await get(logsPath(deploymentId, revisionId, `?before=${oldest.logs[0]!.id}`))).logs).toEqual([]);
    // The latest revision's route takes them too.
    expect((await get(`/v2/deployments/${deploymentId}/logs?tail=1`)).logs.map((l) => l.message)).toEqual(['line 8']);
    // As many as a page at most.
    expect((await get(logsPath(deploymentId, revisionId, '?tail=1000'))).logs).toHaveLength(8);
  });

  it('follows from the last N lines (not the first), and a reconnecting client resumes after the last it saw', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    await write(revisionId, 'old 1', 'old 2', 'old 3', 'recent 1', 'recent 2');
    const path = logsPath(deploymentId, revisionId, '?follow=true&tail=2');
    const stream = await openStream(path, key);
    expect(stream.res.status).toBe(200);
    await until('the last two lines', () => stream.logs().length === 2);
    await write(revisionId, 'live 1');
    await until('the line written after', () => stream.logs().length === 3);
    stream.close();
    await stream.done;
    expect(stream.logs().map((l) => l.message)).toEqual(['recent 1', 'recent 2', 'live 1']);

    // An EventSource reconnects to the same URL, tail and all, with Last-Event-ID: the id wins.
    await write(revisionId, 'live 2');
    const resumed = await openStream(path, key, { 'last-event-id': stream.frames.filter((f) => f.event === 'log').at(-1)!.id! });
    await until('the missed line', () => resumed.logs().length === 1);
    await endLog(revisionId);
    await resumed.done;
    expect(resumed.logs().map((l) => l.message)).toEqual(['live 2']);
    expect(resumed.frames.at(-1)?.event).toBe('end');
  });

  it('refuses parameters that do not go together, and counts out of bounds (422)', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    const cases: [string, string][] = [
      ['?tail=10&offset=5', 'tail'],
      ['?tail=10&offset=0', 'tail'],
      ['?tail=10&limit=5', 'tail'],
      ['?tail=10&before=5', 'tail'],
      ['?before=5&offset=3', 'before'],
      ['?before=5&follow=true', 'before'],
      ['?tail=0', 'tail'],
      ['?tail=1001', 'tail'],
      ['?tail=-1', 'tail'],
      ['?before=0', 'before'],
      ['?before=abc', 'before'],
    ];
    for (const [query, field] of cases) {
      const res = await fetch(`${gateway.url}${logsPath(deploymentId, revisionId, query)}`, { headers: { 'x-api-key': key } });
      const body = (await res.json()) as { detail: { loc: (string | number)[]; msg: string }[] };
      expect({ query, status: res.status }).toEqual({ query, status: 422 });
      expect(body.detail[0]).toMatchObject({ loc: ['query', field], msg: expect.any(String) });
    }
  });
});

describe("another tenant's key", () => {
  it('can neither read nor follow the log, not even through a deployment of its own', async () => {
    const victim = await createDeployment(store, tenantId, 'QUEUED');
    await write(victim.revisionId, 'DATABASE_URL is set');
    const own = await createDeployment(store, attackerId, 'QUEUED');
    const paths = [
      logsPath(victim.deploymentId, victim.revisionId),
      logsPath(victim.deploymentId, victim.revisionId, '?follow=true'),
      `/v2/deployments/${victim.deploymentId}/logs?follow=true`,
      // Their own deployment, the victim's revision id.
      logsPath(own.deploymentId, victim.revisionId),
      logsPath(own.deploymentId, victim.revisionId, '?follow=true'),
      // The newest lines, and the lines before one (the victim's line ids are guessable numbers).
      logsPath(victim.deploymentId, victim.revisionId, '?tail=10'),
      logsPath(victim.deploymentId, victim.revisionId, '?follow=true&tail=10'),
      `/v2/deployments/${victim.deploymentId}/logs?tail=10`,
      logsPath(victim.deploymentId, victim.revisionId, `?before=${Number.MAX_SAFE_INTEGER}`),
      logsPath(own.deploymentId, victim.revisionId, '?tail=10'),
    ];
    for (const path of paths) {
      const res = await fetch(`${gateway.url}${path}`, { headers: { 'x-api-key': attackerKey, accept: 'text/event-stream' } });
      const body = await res.text();
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(body).not.toContain('DATABASE_URL');
    }
  });
});

describe('bad parameters', () => {
  it('are 422 with where and why', async () => {
    const { deploymentId, revisionId } = await createDeployment(store, tenantId, 'QUEUED');
    const cases: [string, Record<string, string>, (string | number)[]][] = [
      ['?follow=maybe', {}, ['query', 'follow']],
      ['?since=yesterday', {}, ['query', 'since']],
      ['?until=2026-11-27', {}, ['query', 'until']],
      ['?since=2026-11-27T12:00:00Z&until=2026-11-27T11:00:00Z', {}, ['query', 'until']],
      ['?follow=true&until=2026-11-27T12:00:00Z', {}, ['query', 'until']],
      ['?follow=true&tail=10&offset=3', {}, ['query', 'tail']],
      ['?limit=0', {}, ['query', 'limit']],
      ['?follow=true', { 'last-event-id': 'abc' }, ['header', 'last-event-id']],
      ['?follow=true', { 'last-event-id': '-1' }, ['header', 'last-event-id']],
    ];
    for (const [query, headers, loc] of cases) {
      const res = await fetch(`${gateway.url}${logsPath(deploymentId, revisionId, query)}`, { headers: { 'x-api-key': key, ...headers } });
      const body = (await res.json()) as { detail: { loc: (string | number)[]; msg: string; type: string }[] };
      expect({ query, headers, status: res.status }).toEqual({ query, headers, status: 422 });
      expect(body.detail[0]).toMatchObject({ loc: expect.arrayContaining(loc), msg: expect.any(String), type: expect.any(String) });
    }
  });
});
