/**
 * Templates, warm pools and the TTL reaper end to end on the container driver: template CRUD and
 * its errors, `POST /boxes` with `template_name` (and a template whose image cannot be pulled),
 * pool hit vs miss, concurrent claims, refill and replacement after a template change, idle stop,
 * deletion after stop, and a running command keeping its sandbox alive. TTLs are multiples of
 * 60 s, so the manager runs on a clock the tests move forward.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { until } from '@berth/testing';
import { images, SandboxPlatform, type Json } from './__tests__/sandbox-platform.js';

let platform: SandboxPlatform;
/** How far the manager's clock is ahead of the real one. */
let clockAheadMs = 0;

beforeAll(async () => {
  platform = await SandboxPlatform.start({
    db: 'gw_sbx_lifecycle',
    sandboxes: { reaperIntervalMs: 200, poolIntervalMs: 200, now: () => new Date(Date.now() + clockAheadMs) },
  });
  await platform.template('tpl');
}, 60_000);
afterAll(async () => {
  await platform?.close();
});

const call = (path: string, init?: Parameters<SandboxPlatform['call']>[1]) => platform.call(path, init);

async function createBox(json: Json): Promise<{ status: number; body: Json; ms: number }> {
  const started = Date.now();
  const res = await call('/boxes', { json: { wait_for_ready: true, timeout: 60, ...json } });
  return { ...res, ms: Date.now() - started };
}

async function status(name: string): Promise<Json> {
  return (await call(`/boxes/${name}/status`)).body;
}

describe('templates', () => {
  it('answers duplicates, other tenants and bad input the way the API says', async () => {
    expect((await call('/templates', { json: { name: 'tpl', image: images.image } })).status).toBe(409);
    expect((await call('/templates/tpl', { key: platform.keyB })).status).toBe(404);
    expect((await call('/templates', { key: platform.keyB })).body).toEqual({ templates: [] });
    expect((await call('/templates/tpl', { method: 'DELETE', key: platform.keyB })).status).toBe(404);
    const bad = [
      [{ name: 'q', image: images.image, resources: { memory: '12 parsecs' } }, ['body', 'resources', 'memory']],
      [{ name: 'u', image: images.image, colour: 'blue' }, ['body', 'colour']],
      [{ name: 'm' }, ['body', 'image']],
    ] as const;
    for (const [json, loc] of bad) {
      const res = await call('/templates', { json });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].loc).toEqual(loc);
    }
  });

  it('refuses to delete a template while a sandbox or a pool uses it', async () => {
    await platform.template('in-use');
    expect((await createBox({ name: 'user-of-in-use', template_name: 'in-use' })).status).toBe(201);
    expect(await call('/templates/in-use', { method: 'DELETE' })).toMatchObject({ status: 409, body: { detail: expect.stringMatching(/user-of-in-use/) } });
    expect((await call('/boxes/user-of-in-use', { method: 'DELETE' })).status).toBe(204);
    expect((await call('/pools', { json: { name: 'in-use-pool', template_name: 'in-use', replicas: 0 } })).status).toBe(201);
    expect(await call('/templates/in-use', { method: 'DELETE' })).toMatchObject({ status: 409, body: { detail: expect.stringMatching(/in-use-pool/) } });
    expect((await call('/pools/in-use-pool', { method: 'DELETE' })).status).toBe(204);
    expect((await call('/templates/in-use', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it('pulls a changed image again: the template is building, then ready (a failed one recovers)', async () => {
    const templateStatus = async (want: string) =>
      until(
        `the template is ${want}`,
        async () => {
          const { body } = await call('/templates/repull');
          return body.status === want ? body : undefined;
        },
        30_000,
      );
    expect((await call('/templates', { json: { name: 'repull', image: `${images.registry}/berth-test/no-such-image:2` } })).status).toBe(201);
    await templateStatus('failed');
    const changed = await call('/templates/repull', { method: 'PATCH', json: { image: images.image } });
    expect(changed).toMatchObject({ status: 200, body: { image: images.image, status: 'building', status_message: null } });
    expect(await templateStatus('ready')).toMatchObject({ image: images.image, status_message: null });
    expect((await call('/templates/repull', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);
});

describe('a sandbox from a template', () => {
  it('starts ready and runs commands', async () => {
    const created = await createBox({ name: 'from-tpl', template_name: 'tpl' });
    expect(created).toMatchObject({ status: 201, body: { name: 'from-tpl', status: 'ready', template_name: 'tpl', pool_name: null } });
    const sandbox = await platform.client().getSandbox('from-tpl');
    expect((await sandbox.run('echo from a template')).stdout).toBe('from a template\n');
    expect((await call('/boxes/from-tpl', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);

  it('fails with the image pull’s reason when the image does not exist', async () => {
    const missing = `${images.registry}/berth-test/no-such-image:1`;
    expect((await call('/templates', { json: { name: 'missing', image: missing } })).status).toBe(201);
    const created = await createBox({ name: 'doomed', template_name: 'missing' });
    // The pull may fail before or after the sandbox is recorded: either way the caller is told why.
    expect(created.status).toBe(422);
    expect(JSON.stringify(created.body.detail)).toMatch(/no-such-image/);
    const template = await until(
      'the template failed',
      async () => {
        const { body } = await call('/templates/missing');
        return body.status === 'failed' ? body : undefined;
      },
      30_000,
    );
    expect(template.status_message).toMatch(/no-such-image/);
    await call('/boxes/doomed', { method: 'DELETE' });
  }, 60_000);
});

describe('warm pools', () => {
  const readyReplicas = async () => (await call('/pools/warm')).body.ready_replicas as number;

  beforeAll(async () => {
    expect((await call('/pools', { json: { name: 'warm', template_name: 'tpl', replicas: 2 } })).status).toBe(201);
    await until('the pool is full', async () => ((await readyReplicas()) === 2 ? true : undefined), 60_000, 200);
  }, 90_000);

  it('serves a create from the pool, fast, and refills it', async () => {
    const hit = await createBox({ name: 'hit', template_name: 'tpl' });
    expect(hit.body).toMatchObject({ status: 'ready', pool_name: 'warm' });
    expect(hit.ms).toBeLessThan(1000);
    const sandbox = await platform.client().getSandbox('hit');
    expect((await sandbox.run('echo warm')).stdout).toBe('warm\n');
    await until('the pool refilled', async () => ((await readyReplicas()) === 2 ? true : undefined), 60_000, 200);
  }, 90_000);

  it('never gives two concurrent creates the same member', async () => {
    const [a, b] = await Promise.all([createBox({ name: 'race-a', template_name: 'tpl' }), createBox({ name: 'race-b', template_name: 'tpl' })]);
    expect([a.body.pool_name, b.body.pool_name]).toEqual(['warm', 'warm']);
    const client = platform.client();
    const [boxA, boxB] = await Promise.all([client.getSandbox('race-a'), client.getSandbox('race-b')]);
    await boxA.write('/root/owner', 'a');
    await boxB.write('/root/owner', 'b');
    expect((await boxA.run('cat /root/owner')).stdout).toBe('a');
    expect((await boxB.run('cat /root/owner')).stdout).toBe('b');
    await until('the pool refilled', async () => ((await readyReplicas()) === 2 ? true : undefined), 60_000, 200);
  }, 90_000);

  it('starts cold when the request changes resources (a miss)', async () => {
    const miss = await createBox({ name: 'miss', template_name: 'tpl', mem_bytes: 128 * 1024 * 1024 });
    expect(miss.body).toMatchObject({ status: 'ready', pool_name: null, mem_bytes: 128 * 1024 * 1024 });
    expect(await readyReplicas()).toBe(2);
  }, 60_000);

  it('replaces members of an older template version and never hands one out', async () => {
    const changed = await call('/templates/tpl', { method: 'PATCH', json: { resources: { memory: '96Mi' } } });
    expect(changed.status).toBe(200);
    expect(await readyReplicas()).toBe(0);
    const after = await createBox({ name: 'after-change', template_name: 'tpl' });
    expect(after.body).toMatchObject({ status: 'ready', pool_name: null });
    await until('the pool refilled with the new version', async () => ((await readyReplicas()) === 2 ? true : undefined), 60_000, 200);
    expect((await createBox({ name: 'new-member', template_name: 'tpl' })).body).toMatchObject({ pool_name: 'warm' });
  }, 120_000);

  afterAll(async () => {
    await platform.cleanup();
  }, 60_000);
});

describe('the TTL reaper', () => {
  const advance = (seconds: number) => {
    clockAheadMs += seconds * 1000;
  };

  it('stops an idle sandbox, then deletes it after delete_after_stop_seconds, saying why', async () => {
    expect((await createBox({ name: 'idle', template_name: 'tpl', idle_ttl_seconds: 60, delete_after_stop_seconds: 60 })).status).toBe(201);
    advance(30);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await status('idle')).status).toBe('ready');
    advance(31);
    const stopped = await until(
      'idle stopped',
      async () => {
        const s = await status('idle');
        return s.status === 'stopped' ? s : undefined;
      },
      10_000,
    );
    expect(stopped.status_message).toMatch(/idle_ttl_seconds \(60\)/);
    advance(61);
    const gone = await until(
      'idle deleted',
      async () => {
        const res = await call('/boxes/idle');
        return res.status === 404 ? res : undefined;
      },
      10_000,
    );
    expect(gone.body.detail).toMatch(/delete_after_stop_seconds \(60\)/);
  }, 60_000);

  it('does not fail a sandbox it checks in the middle of a stop or a start', async () => {
    expect((await createBox({ name: 'flip', template_name: 'tpl' })).status).toBe(201);
    let flipping = true;
    // Passes back to back, so some inspect the instance while it is going down or coming up.
    const passes = (async () => {
      while (flipping) await platform.manager.reaper.pass();
    })();
    try {
      for (let round = 0; round < 4; round++) {
        expect((await call('/boxes/flip/stop', { method: 'POST', json: {} })).status).toBe(200);
        expect((await status('flip')).status).toBe('stopped');
        expect((await call('/boxes/flip/start', { method: 'POST', json: {} })).status).toBe(200);
        const settled = await until('flip settled', async () => ((await status('flip')).status === 'provisioning' ? undefined : status('flip')), 30_000);
        expect(settled).toMatchObject({ status: 'ready' });
      }
    } finally {
      flipping = false;
      await passes;
    }
    expect((await status('flip')).status).toBe('ready');
  }, 90_000);

  it('keeps a sandbox with a running command alive past its idle TTL', async () => {
    expect((await createBox({ name: 'busy', template_name: 'tpl', idle_ttl_seconds: 60 })).status).toBe(201);
    const sandbox = await platform.client().getSandbox('busy');
    const handle = await sandbox.run('sleep 3; echo done', { wait: false });
    await new Promise((resolve) => setTimeout(resolve, 300));
    advance(120);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await status('busy')).status).toBe('ready');
    expect(await handle.result).toMatchObject({ stdout: 'done\n', exit_code: 0 });
    // Once it finished, the idle clock runs from then: stopped a TTL later.
    advance(61);
    await until('busy stopped', async () => ((await status('busy')).status === 'stopped' ? true : undefined), 10_000);
  }, 60_000);
});
