/**
 * Limits and quotas of sandboxes end to end (the container driver on the test Podman engine), from
 * a tenant's side: the operator's defaults fill in what neither the request nor its snapshot sets
 * (the cgroup settings inside show them; a memory hog is killed and reported as out of memory),
 * the operator's maxima refuse larger asks with a 422 naming the field and the maximum, and the
 * per-tenant quotas (count, memory, CPU) refuse with a 429 — also when creates race.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { createDatabase, sql } from '@berth/db';
import { until } from '@berth/testing';
import type { SandboxClient } from 'langsmith/sandbox';
import WebSocket from 'ws';
import { images, SandboxPlatform, type Json } from './__tests__/sandbox-platform.js';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

let platform: SandboxPlatform;
let client: SandboxClient;
let snapshotId: string;

beforeAll(async () => {
  platform = await SandboxPlatform.start({
    db: 'gw_sbx_limits',
    sandboxes: {
      limits: {
        defaultMemoryBytes: 64 * MiB,
        defaultCpuMillis: 250,
        defaultStorageBytes: GiB,
        pidsLimit: 300,
        maxMemoryBytes: 512 * MiB,
        maxCpuMillis: 2000,
        maxStorageBytes: 2 * GiB,
      },
      quota: { sandboxes: 3, memoryBytes: 256 * MiB, cpuMillis: 1500 },
      poolIntervalMs: 200,
    },
  });
  client = platform.client();
  // As docs/guides/sandboxes.md shows: a snapshot, which sets no memory or CPU.
  snapshotId = (await client.createSnapshot('busybox', images.image, GiB, { timeout: 60 })).id;
}, 120_000);
afterAll(async () => {
  await platform?.close();
});
afterEach(async () => {
  await platform.cleanup();
}, 60_000);

const call = (path: string, init?: Parameters<SandboxPlatform['call']>[1]) => platform.call(path, init);
const createBox = (json: Json, key?: string) => call('/boxes', { json: { snapshot_id: snapshotId, timeout: 60, ...json }, ...(key ? { key } : {}) });

/** Warm-pool members in the manager's table (ready or being created). */
async function poolMembers(): Promise<number> {
  const database = createDatabase({ connectionString: platform.databaseUrl, schema: 'berth_sandbox' });
  try {
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pool_members`.execute(database.db);
    return rows[0]!.n;
  } finally {
    await database.close();
  }
}

/** Frames of one command over the WebSocket exec, up to its exit. */
function wsRun(sandboxId: string, command: string): Promise<Json[]> {
  const url = `${platform.gateway.url.replace(/^http/, 'ws')}/api/v2/sandboxes/dataplane/${sandboxId}/execute/ws`;
  return new Promise((resolve, reject) => {
    const frames: Json[] = [];
    const ws = new WebSocket(url, { headers: { 'x-api-key': platform.keyA } });
    ws.on('open', () => ws.send(JSON.stringify({ type: 'execute', command, command_id: 'limits', timeout_seconds: 60 })));
    ws.on('message', (data) => frames.push(JSON.parse(String(data)) as Json));
    ws.on('close', () => resolve(frames));
    ws.on('error', reject);
  });
}

/** CPU quota and period, memory limit and pids limit as the sandbox's cgroups say (v2 or v1). */
const CGROUP_LIMITS = [
  'if [ -f /sys/fs/cgroup/cpu.max ]; then cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max;',
  'else echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)";',
  'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; fi',
].join(' ');

describe('defaults', () => {
  it('limits a sandbox from a snapshot without resources: memory, CPU and pids as the operator set them', async () => {
    const box = await client.createSandbox(snapshotId, { name: 'plain', timeout: 60 });
    expect({ mem_bytes: box.mem_bytes, vcpus: box.vCpus, fs_capacity_bytes: box.fs_capacity_bytes }).toEqual({
      mem_bytes: 64 * MiB,
      vcpus: 0.25,
      fs_capacity_bytes: GiB,
    });
    const [cpu, memory, pids] = (await box.run(CGROUP_LIMITS)).stdout.trim().split('\n');
    const [quota, period] = cpu!.split(' ').map(Number);
    expect({ cpus: quota! / period!, memory: Number(memory), pids: Number(pids) }).toEqual({ cpus: 0.25, memory: 64 * MiB, pids: 300 });
    // A hog: dd allocates its whole block, 256 MiB against 64 MiB.
    const frames = await wsRun(box.id!, 'dd if=/dev/zero of=/dev/null bs=256M count=1');
    expect(frames.at(-1)).toEqual({ type: 'exit', exit_code: 137, oom_killed: true });
    expect((await box.run('echo alive')).stdout).toBe('alive\n');
  }, 90_000);

  it('keeps what a request or a template sets, and fills in only the rest', async () => {
    const asked = await createBox({ name: 'asked', mem_bytes: 128 * MiB });
    expect(asked.body).toMatchObject({ mem_bytes: 128 * MiB, vcpus: 0.25, fs_capacity_bytes: GiB });
    await platform.template('half-cpu', { resources: { cpu: '500m' } });
    const fromTemplate = await call('/boxes', { json: { name: 'templated', template_name: 'half-cpu', timeout: 60 } });
    expect(fromTemplate.body).toMatchObject({ vcpus: 0.5, mem_bytes: 64 * MiB, fs_capacity_bytes: GiB });
    expect((await call('/boxes/templated')).body).toMatchObject({ vcpus: 0.5, mem_bytes: 64 * MiB });
  }, 90_000);
});

describe('maxima', () => {
  it('refuses requests above the maximum with a 422 naming the field and the maximum', async () => {
    const cases = [
      [{ mem_bytes: GiB }, 'mem_bytes', /512Mi/],
      [{ vcpus: 4 }, 'vcpus', /\b2\b/],
      [{ fs_capacity_bytes: 4 * GiB }, 'fs_capacity_bytes', /2Gi/],
      [{ vcpus: 0.0001 }, 'vcpus', /at least/],
    ] as const;
    for (const [json, field, max] of cases) {
      const res = await createBox({ name: 'too-big', ...json });
      expect({ field, status: res.status }).toEqual({ field, status: 422 });
      expect(res.body.detail[0]).toMatchObject({ loc: ['body', field], msg: expect.stringMatching(max), type: 'value_error' });
    }
    expect((await call('/boxes')).body.sandboxes).toEqual([]);
  });

  it('refuses templates and snapshots above the maximum, 999Ei included', async () => {
    for (const [resources, field] of [
      [{ memory: '999Ei' }, 'memory'],
      [{ cpu: '3' }, 'cpu'],
      [{ storage: '1Ti' }, 'storage'],
    ] as const) {
      const res = await call('/templates', { json: { name: 'huge', image: images.image, resources } });
      expect({ field, status: res.status, loc: res.body.detail[0].loc }).toEqual({ field, status: 422, loc: ['body', 'resources', field] });
    }
    const snapshot = await call('/snapshots', { json: { name: 'huge', docker_image: images.image, fs_capacity_bytes: 1024 * GiB } });
    expect(snapshot).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'fs_capacity_bytes'], msg: expect.stringMatching(/2Gi/) }] } });
    await expect(client.createSnapshot('huge', images.image, 1024 * GiB)).rejects.toMatchObject({ name: 'LangSmithValidationError' });
    expect((await call('/templates', { json: { name: 'huge', image: images.image, resources: {} } })).status).toBe(201);
    const patched = await call('/templates/huge', { method: 'PATCH', json: { resources: { memory: '999Ei' } } });
    expect(patched).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'resources', 'memory'] }] } });
    expect((await call('/templates/huge', { method: 'DELETE' })).status).toBe(204);
    const volume = await call('/volumes', { json: { name: 'huge', size: '999Ei' } });
    expect(volume).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'size'] }] } });
  });

  it('refuses a template that mounts a volume where the platform mounts the agent (/.berth), however the path is written', async () => {
    expect((await call('/volumes', { json: { name: 'cover', size: '1Gi' } })).status).toBe(201);
    for (const mountPath of ['/.berth', '/.berth/run', '//.berth/bin/', '/tmp/../.berth/host']) {
      const res = await call('/templates', { json: { name: 'cover', image: images.image, volumes: [{ volume_name: 'cover', mount_path: mountPath }] } });
      expect(res).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'volumes', 0, 'mount_path'], msg: expect.stringContaining('/.berth') }] } });
    }
    expect((await call('/volumes/cover', { method: 'DELETE' })).status).toBe(204);
  });

  it('never lets a bad stored row break the list of sandboxes', async () => {
    // A template stored before quantities were bounded, and a sandbox made from it.
    const database = createDatabase({ connectionString: platform.databaseUrl, schema: 'berth_sandbox' });
    try {
      const { rows } = await sql<{ tenant_id: string }>`SELECT tenant_id FROM templates WHERE id = ${snapshotId}`.execute(database.db);
      const tenant = rows[0]!.tenant_id;
      await sql`INSERT INTO templates (id, tenant_id, kind, name, image, resources, status, version)
        VALUES (gen_random_uuid(), ${tenant}, 'template', 'stored-huge', ${images.image}, '{"memory": "999Ei", "cpu": "1e6"}', 'ready', 1)`.execute(
        database.db,
      );
      await sql`INSERT INTO sandboxes (id, tenant_id, name, template_id, template_version, instance, status, idle_ttl_seconds, delete_after_stop_seconds)
        SELECT gen_random_uuid(), ${tenant}, 'stored-huge', id, 1, 'berth-sbx-storedhuge0000000', 'failed', 600, 0 FROM templates WHERE name = 'stored-huge'`.execute(
        database.db,
      );
      const list = await call('/boxes');
      expect(list.status).toBe(200);
      expect(list.body.sandboxes.map((b: Json) => b.name)).toEqual(['stored-huge']);
      expect((await call('/boxes/stored-huge')).status).toBe(200);
      expect((await call('/templates/stored-huge')).status).toBe(200);
    } finally {
      await database.close();
    }
  });
});

describe('quotas', () => {
  const refused = (res: { status: number; body: Json }, what: RegExp) => {
    expect(res.status).toBe(429);
    expect(res.body.detail).toEqual(expect.stringMatching(what));
  };

  it('refuses a tenant more sandboxes than its count quota, with the client’s QuotaExceeded error; other tenants unaffected', async () => {
    for (const name of ['a', 'b', 'c']) expect((await createBox({ name, wait_for_ready: false })).status).toBe(201);
    refused(await createBox({ name: 'd' }), /3 sandboxes/);
    await expect(client.createSandbox(snapshotId, { name: 'd' })).rejects.toMatchObject({ name: 'LangSmithQuotaExceededError', quotaType: 'sandbox_count' });
    // Tenant B has its own quota.
    const snapshotB = (await platform.client(platform.keyB).createSnapshot('busybox', images.image, GiB, { timeout: 60 })).id;
    expect((await createBox({ name: 'b1', snapshot_id: snapshotB, wait_for_ready: false }, platform.keyB)).status).toBe(201);
    // A deleted sandbox no longer counts.
    expect((await call('/boxes/a', { method: 'DELETE' })).status).toBe(204);
    expect((await createBox({ name: 'd', wait_for_ready: false })).status).toBe(201);
  }, 90_000);

  it('refuses memory and CPU beyond the tenant’s quota, counting running sandboxes only', async () => {
    expect((await createBox({ name: 'big', mem_bytes: 200 * MiB })).status).toBe(201);
    refused(await createBox({ name: 'more' }), /memory/);
    await expect(client.createSandbox(snapshotId, { name: 'more' })).rejects.toMatchObject({ name: 'LangSmithQuotaExceededError', quotaType: 'memory' });
    // A stopped sandbox keeps its files, not its memory: another may run meanwhile.
    expect((await call('/boxes/big/stop', { json: {} })).status).toBe(200);
    expect((await createBox({ name: 'other', mem_bytes: 200 * MiB })).status).toBe(201);
    // Starting the stopped one again would go over: refused, and it stays stopped.
    refused(await call('/boxes/big/start', { json: {} }), /memory/);
    expect((await call('/boxes/big/status')).body.status).toBe('stopped');
    expect((await call('/boxes/other', { method: 'DELETE' })).status).toBe(204);
    expect((await call('/boxes/big', { method: 'DELETE' })).status).toBe(204);

    expect((await createBox({ name: 'cpu1', vcpus: 1 })).status).toBe(201);
    refused(await createBox({ name: 'cpu2', vcpus: 0.75 }), /CPU/);
    await expect(client.createSandbox(snapshotId, { name: 'cpu2', vCpus: 0.75 })).rejects.toMatchObject({
      name: 'LangSmithQuotaExceededError',
      quotaType: 'cpu',
    });
    expect((await createBox({ name: 'cpu2', vcpus: 0.5 })).status).toBe(201);
  }, 90_000);

  it('holds under concurrent creates: of eight at once, exactly three get in', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) => createBox({ name: `race-${i}`, mem_bytes: 16 * MiB, vcpus: 0.1, wait_for_ready: false })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, 429, 429, 429, 429, 429]);
    expect((await call('/boxes')).body.sandboxes).toHaveLength(3);
  }, 90_000);

  it('counts warm-pool members, and serving a sandbox from the pool adds nothing', async () => {
    await platform.template('pooled');
    expect((await call('/pools', { json: { name: 'warm', template_name: 'pooled', replicas: 2 } })).status).toBe(201);
    await until('two warm members', async () => ((await call('/pools/warm')).body.ready_replicas === 2 ? true : undefined), 60_000);
    expect((await createBox({ name: 'cold' })).status).toBe(201);
    // 1 sandbox + 2 members: the count quota is reached for anything cold…
    refused(await createBox({ name: 'cold2' }), /3 sandboxes/);
    // …but a member becoming a sandbox changes nothing.
    const warm = await call('/boxes', { json: { name: 'warm1', template_name: 'pooled', timeout: 60 } });
    expect(warm).toMatchObject({ status: 201, body: { pool_name: 'warm', status: 'ready' } });
    // The pool is not refilled beyond the quota: one member left, none coming.
    await platform.manager.pools.refill();
    expect(await poolMembers()).toBe(1);
  }, 120_000);
});
