/**
 * The reconciler against the test run's Podman engine, which other test files share — as a
 * platform's engine may be shared: it removes this platform's containers that have no live record
 * (a deleted sandbox's at once, an unknown one once it was seen twice, a grace period apart), and
 * leaves live sandboxes, sandboxes being created, warm-pool members and every container that is not
 * this platform's alone.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import Dockerode from 'dockerode';
import { ManualClock } from '@berth/clock';
import { createDatabase, sql } from '@berth/db';
import { parseMetrics, scrape } from '@berth/metrics';
import { captureLogger, createTestDatabase, testSandbox, until, type TestDatabase } from '@berth/testing';
import { contractSpec } from '../drivers/contract.js';
import { ContainerDriver } from '../drivers/container/container-driver.js';
import { start, type RunningSandboxManager } from '../index.js';
import { INSTANCE_LABELS } from './instance-spec.js';

const images = testSandbox();
const image = { reference: images.image, insecureRegistries: [images.registry] };
const docker = new Dockerode({ socketPath: images.socketPath });

let testDb: TestDatabase;
let driver: ContainerDriver;
let manager: RunningSandboxManager;
const clock = new ManualClock(Date.now());
const made: string[] = [];

beforeAll(async () => {
  testDb = await createTestDatabase('sbx_reconcile');
  driver = new ContainerDriver({ socketPath: images.socketPath, runDir: await mkdtemp(join(images.tmpDir, 'rec-')), logger: captureLogger().logger });
  manager = await start(
    {
      databaseUrl: testDb.url,
      secretKey: Buffer.alloc(32, 3).toString('base64'),
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'silent',
      sandboxes: { driverInstance: driver, background: false, insecureRegistries: [images.registry], clock, reconcileGraceMs: 60_000 },
    },
    captureLogger().logger,
  );
}, 60_000);
afterAll(async () => {
  await Promise.all(made.map((instance) => driver.remove(instance)));
  await manager?.close();
  await testDb?.drop();
});

/** A container made by hand with these labels (what another platform, or a lost record, leaves). */
async function container(labels: Record<string, string>): Promise<string> {
  const spec = contractSpec(image, { labels });
  made.push(spec.instance);
  await driver.create(spec);
  return spec.instance;
}

const exists = async (instance: string) => (await driver.inspect(instance)).state !== 'missing';

it('removes this platform’s containers without a live record, and nothing else', async () => {
  const tenantId = randomUUID();
  const ours = { [INSTANCE_LABELS.platform]: manager.platformId };
  const template = await manager.templates.create(tenantId, 'template', { name: 'tpl', image: images.image });
  expect((await manager.templates.settled(template.id))?.status).toBe('ready');

  // A live sandbox, and a warm-pool member.
  const live = await manager.sandboxes.waitSettled(
    await manager.sandboxes.create(tenantId, { name: 'live', source: { templateName: 'tpl' }, labels: {} }),
    60_000,
  );
  made.push(live.instance);
  await manager.pools.create(tenantId, 'warm', 'tpl', 1);
  await manager.pools.refill();
  const member = await until('a warm member', async () => (await manager.pools.get(tenantId, 'warm')).ready_replicas === 1 || undefined, 60_000);
  expect(member).toBe(true);

  // A sandbox being created right now (its record is written before its container), a deleted
  // sandbox whose container was left behind (the engine was down), and one with no record at all.
  const database = createDatabase({ connectionString: testDb.url, schema: 'berth_sandbox' });
  const creating = await container(ours);
  const deleted = await container(ours);
  const unknown = await container(ours);
  try {
    for (const [instance, deletedAt] of [
      [creating, null],
      [deleted, new Date()],
    ] as const) {
      await sql`INSERT INTO sandboxes (id, tenant_id, name, template_id, template_version, instance, status, idle_ttl_seconds, delete_after_stop_seconds, deleted_at)
        VALUES (${randomUUID()}, ${tenantId}, ${instance}, ${template.id}, 1, ${instance}, 'provisioning', 0, 0, ${deletedAt})`.execute(database.db);
    }
  } finally {
    await database.close();
  }
  // The metrics count the sandboxes by status: the live one, the one being created; not the deleted one.
  // And the warm pool's one ready member.
  const metrics = parseMetrics((await scrape()).body);
  const byStatus = (name: string) => Object.fromEntries(metrics.filter((s) => s.name === name).map((s) => [s.labels.status, s.value]));
  expect(byStatus('berth_sandboxes')).toEqual({ ready: 1, provisioning: 1 });
  expect(byStatus('berth_sandbox_pool_members')).toEqual({ ready: 1 });
  // Another platform's container on the same engine, and one from before platforms were labelled.
  const foreign = await container({ [INSTANCE_LABELS.platform]: randomUUID() });
  const unlabelled = await container({});
  const members = (
    await docker.listContainers({ all: true, filters: { label: [INSTANCE_LABELS.pool, `${INSTANCE_LABELS.platform}=${manager.platformId}`] } })
  ).map((c) => c.Names[0]!.slice(1));

  await manager.reconciler.pass();
  expect(await exists(deleted)).toBe(false);
  // Seen once: maybe a record is on its way (a claim in flight); it gets the grace period.
  expect(await exists(unknown)).toBe(true);

  await clock.advance(30_000);
  await manager.reconciler.pass();
  expect(await exists(unknown)).toBe(true);
  await clock.advance(30_000);
  await manager.reconciler.pass();
  expect(await exists(unknown)).toBe(false);

  for (const instance of [live.instance, creating, foreign, unlabelled, ...members])
    expect({ instance, exists: await exists(instance) }).toEqual({ instance, exists: true });
  expect((await manager.pools.get(tenantId, 'warm')).ready_replicas).toBe(1);
  await manager.pools.delete(tenantId, 'warm');
  await manager.sandboxes.delete({ tenantId, name: 'live' });
}, 120_000);
