/**
 * Following revision logs (RevisionLogs.follow) on real Postgres: a follower gets what is there,
 * then each line as a writer commits it (woken by the writer's NOTIFY), in order and once; it ends
 * with the log; another tenant cannot follow; a tenant's streams are limited. Reading a page by
 * time range too. Watching a deployment (DeploymentWatch): told of each change, until it is deleted.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { NotFoundError, ResourceExhaustedError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { until } from '@berth/testing';
import pg from 'pg';
import { createDeployment, useDeploymentStore } from '../__tests__/deployment-store.js';
import { CONTROL_PLANE_SCHEMA } from '../index.js';
import { RevisionLogWriter } from './log-writer.js';
import { DeploymentWatch } from './deployment-watch.js';
import { NotificationHub } from './notification-hub.js';
import { RevisionLogs, type FollowedLogs } from './revision-logs.js';
import { DEPLOYMENT_CHANGES_CHANNEL, REVISION_LOGS_CHANNEL } from './notifications.js';

const fixture = useDeploymentStore('cp_revision_logs');
const tenant = randomUUID();
let hub: NotificationHub;
let logs: RevisionLogs;
let watch: DeploymentWatch;
let writer: RevisionLogWriter;

beforeAll(() => {
  hub = new NotificationHub({
    databaseUrl: fixture.testDb.url,
    channels: [REVISION_LOGS_CHANNEL, DEPLOYMENT_CHANGES_CHANNEL],
    log: silentLogger(),
    maxStreamsPerTenant: 2,
  });
  logs = new RevisionLogs(fixture.store, hub, { followBatch: 3 });
  watch = new DeploymentWatch(fixture.store, hub);
  writer = new RevisionLogWriter(fixture.store.logs, silentLogger());
});
afterAll(async () => {
  await writer?.close();
  await hub?.close();
});

/** A follow running in the background, collecting what it is sent. */
function follow(tenantId: string, deploymentId: string, query: { revisionId?: string; offset?: number; tail?: number; type?: 'build' | 'deploy' } = {}) {
  const controller = new AbortController();
  const parts: FollowedLogs[] = [];
  const done = (async () => {
    for await (const part of logs.follow(tenantId, deploymentId, { offset: 0, ...query }, controller.signal)) parts.push(part);
  })();
  return {
    parts,
    done,
    messages: () => parts.flatMap((p) => p.logs.map((l) => l.message)),
    ids: () => parts.flatMap((p) => p.logs.map((l) => Number(l.id))),
    ended: () => parts.some((p) => p.ended),
    stop: () => controller.abort(),
  };
}

async function write(revisionId: string, ...lines: string[]): Promise<void> {
  for (const line of lines) writer.for(revisionId, 'deploy')(line);
  await writer.flush();
}

it('sends the lines there are, then each line written after it started, in order and once, and ends with the log', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  await write(revisionId, 'one', 'two', 'three', 'four');
  const follower = follow(tenant, deploymentId);
  await until('the lines there are', () => follower.messages().length === 4);
  await write(revisionId, 'five');
  await until('the line written after it started', () => follower.messages().length === 5);
  await write(revisionId, 'six', 'seven');
  writer.end(revisionId);
  await writer.flush();
  await follower.done;

  expect(follower.messages()).toEqual(['one', 'two', 'three', 'four', 'five', 'six', 'seven']);
  const ids = follower.ids();
  expect(ids).toEqual([...ids].sort((a, b) => a - b));
  expect(new Set(ids).size).toBe(ids.length);
  expect(follower.parts.at(-1)).toMatchObject({ revisionId, logs: [], ended: true });
});

it('resumes after an id with exactly the lines after it', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  await write(revisionId, 'a', 'b', 'c', 'd', 'e');
  writer.end(revisionId);
  await writer.flush();
  const all = await fixture.store.logs.read(revisionId, { afterId: 0, limit: 100 });
  const resumed = follow(tenant, deploymentId, { revisionId, offset: Number(all[1]!.id) });
  await resumed.done;
  expect(resumed.messages()).toEqual(['c', 'd', 'e']);
  expect(resumed.ended()).toBe(true);
});

it('follows from the last lines of one type, more of them than fit in one message, then on', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  for (const line of ['build 1', 'build 2']) writer.for(revisionId, 'build')(line);
  await write(revisionId, 'old', 'a', 'b', 'c', 'd');
  writer.for(revisionId, 'build')('build 3');
  await writer.flush();
  // followBatch is 3: the last four deploy lines take two messages.
  const follower = follow(tenant, deploymentId, { tail: 4, type: 'deploy' });
  await until('the last four deploy lines', () => follower.messages().length === 4);
  await write(revisionId, 'e');
  writer.end(revisionId);
  await writer.flush();
  await follower.done;
  expect(follower.messages()).toEqual(['a', 'b', 'c', 'd', 'e']);
});

it('misses no line a second writer of the revision commits while the first is still writing', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  const follower = follow(tenant, deploymentId);
  await until('the follow to start', () => follower.parts.length > 0);
  // Another control plane's write of the same revision, open: it took its id first.
  const other = new pg.Client({ connectionString: fixture.testDb.url, options: `-c search_path=${CONTROL_PLANE_SCHEMA}` });
  await other.connect();
  try {
    await other.query('BEGIN');
    await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 5167))', [revisionId]);
    await other.query(`INSERT INTO revision_logs (revision_id, type, level, message) VALUES ($1, 'deploy', 'info', 'first')`, [revisionId]);
    const second = write(revisionId, 'second');
    await until(
      'the second write to wait for the first',
      async () =>
        (
          await other.query(
            "SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
          )
        ).rowCount
          ? true
          : undefined,
      10_000,
      20,
    );
    await other.query('SELECT pg_notify($1, $2)', [REVISION_LOGS_CHANNEL, revisionId]);
    await other.query('COMMIT');
    await second;
  } finally {
    await other.end();
  }
  await until('both lines', () => follower.messages().length === 2);
  expect(follower.messages()).toEqual(['first', 'second']);
  follower.stop();
  await follower.done;
});

it('ends the follow of a revision interrupted before any step ran, and of a deleted deployment', async () => {
  const waiting = await createDeployment(fixture.store, tenant, 'QUEUED');
  const interrupted = follow(tenant, waiting.deploymentId);
  await until('the follow to start', () => interrupted.parts.length > 0);
  await fixture.store.move({ revisionId: waiting.revisionId }, 'INTERRUPTED');
  await interrupted.done;
  expect(interrupted.ended()).toBe(true);

  const deleted = await createDeployment(fixture.store, tenant, 'QUEUED');
  const gone = follow(tenant, deleted.deploymentId);
  await until('the follow to start', () => gone.parts.length > 0);
  await fixture.store.remove(deleted.deploymentId);
  await gone.done;
  expect(gone.ended()).toBe(true);
  expect(gone.messages()).toEqual([]);
});

it("refuses another tenant's log, and more followers per tenant than allowed", async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  const attacker = randomUUID();
  await expect(follow(attacker, deploymentId).done).rejects.toThrow(NotFoundError);
  // Their own deployment with the victim's revision id.
  const own = await createDeployment(fixture.store, attacker, 'QUEUED');
  await expect(follow(attacker, own.deploymentId, { revisionId }).done).rejects.toThrow(NotFoundError);
  await expect(logs.read(attacker, deploymentId, { offset: 0, limit: 10 })).rejects.toThrow(NotFoundError);

  const first = follow(tenant, deploymentId);
  const second = follow(tenant, deploymentId);
  await until('two follows', () => first.parts.length > 0 && second.parts.length > 0);
  await expect(follow(tenant, deploymentId).done).rejects.toThrow(ResourceExhaustedError);
  // Another tenant is not limited by this one's.
  const theirs = follow(attacker, own.deploymentId);
  await until('their follow', () => theirs.parts.length > 0);
  first.stop();
  await first.done;
  const third = follow(tenant, deploymentId);
  await until('a follow once one ended', () => third.parts.length > 0);
  for (const f of [second, third, theirs]) f.stop();
  await Promise.all([second.done, third.done, theirs.done]);
});

it('reads only the lines written within a time range', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  await write(revisionId, 'early', 'middle 1', 'middle 2', 'late');
  // Each line a minute after the one before (written in one batch, they are microseconds apart).
  const all = await fixture.store.logs.read(revisionId, { afterId: 0, limit: 100 });
  const minute = (n: number) => new Date(Date.UTC(2026, 10, 27, 12, n));
  for (const [n, line] of all.entries()) {
    await fixture.database.db
      .updateTable('revision_logs')
      .set({ created_at: minute(n) })
      .where('id', '=', line.id)
      .execute();
  }
  const range = { since: minute(1), until: minute(3) };
  const page = await logs.read(tenant, deploymentId, { offset: 0, limit: 100, ...range });
  expect(page.logs.map((l) => l.message)).toEqual(['middle 1', 'middle 2']);
  // Paged: one at a time, on from next_offset.
  const first = await logs.read(tenant, deploymentId, { offset: 0, limit: 1, ...range });
  const next = await logs.read(tenant, deploymentId, { offset: first.nextOffset, limit: 1, ...range });
  expect([...first.logs, ...next.logs].map((l) => l.message)).toEqual(['middle 1', 'middle 2']);
});

it('tells a watcher of a deployment each change: a revision moving on, a new revision, its health, its deletion', async () => {
  const { deploymentId, revisionId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  const controller = new AbortController();
  const events: { deleted: boolean }[] = [];
  const watching = (async () => {
    for await (const event of watch.watch(tenant, deploymentId, controller.signal)) events.push(event);
  })();
  // (The notification of the deployment's creation may come after the watch started, as one more event.)
  await until('the first event, at once', () => events.length >= 1);
  let seen = events.length;
  const changed = async (what: string) => {
    await until(what, () => events.length > seen);
    seen = events.length;
  };
  await fixture.store.move({ revisionId }, 'AWAITING_BUILD');
  await changed('the move to AWAITING_BUILD');
  await fixture.store.move({ revisionId }, 'BUILDING');
  await changed('the move to BUILDING');
  await fixture.store.setHealth(revisionId, 'the agent server exited');
  await changed('the health change');
  await fixture.store.update(tenant, deploymentId, { revision: { id: randomUUID(), status: 'QUEUED', source: 'internal_source', source_revision_config: {} } });
  await changed('a new revision');
  await fixture.store.markDeleting(tenant, deploymentId);
  await watching;
  expect(events.at(-1)).toEqual({ deleted: true });
  expect(events.filter((e) => e.deleted)).toHaveLength(1);
});

it("refuses to watch another tenant's deployment", async () => {
  const { deploymentId } = await createDeployment(fixture.store, tenant, 'QUEUED');
  const attempt = async () => {
    for await (const event of watch.watch(randomUUID(), deploymentId, new AbortController().signal)) void event;
  };
  await expect(attempt()).rejects.toThrow(NotFoundError);
});
