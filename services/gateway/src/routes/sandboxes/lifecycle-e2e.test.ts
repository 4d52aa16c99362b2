/**
 * Templates, warm pools and the TTL reaper end to end on the container driver: template CRUD and
 * its errors, `POST /boxes` with `template_name` (and a template whose image cannot be pulled),
 * pool hit vs miss, concurrent claims, refill and replacement after a template change, idle stop,
 * deletion after stop, and a running command keeping its sandbox alive. TTLs are multiples of
 * 60 s, so the manager runs on a ManualClock: its reaper, warm-pool keeper and engine check run
 * only as the tests move the clock forward.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ManualClock } from '@berth/clock';
import { createDatabase, sql } from '@berth/db';
import { until } from '@berth/testing';
import { images, SandboxPlatform, type Json } from './__tests__/sandbox-platform.js';

/** How often the warm-pool keeper looks at its pools, on the manager's clock. */
const POOL_INTERVAL_MS = 2000;

let platform: SandboxPlatform;
let database: ReturnType<typeof createDatabase>;
const clock = new ManualClock(Date.now());

beforeAll(async () => {
  platform = await SandboxPlatform.start({ db: 'gw_sbx_lifecycle', sandboxes: { poolIntervalMs: POOL_INTERVAL_MS, clock } });
  database = createDatabase({ connectionString: platform.databaseUrl, schema: 'berth_sandbox' });
  await platform.template('tpl');
}, 60_000);
afterAll(async () => {
  await database?.close();
  await platform?.close();
});

const call = (path: string, init?: Parameters<SandboxPlatform['call']>[1]) => platform.call(path, init);

async function createBox(json: Json): Promise<{ status: number; body: Json }> {
  return call('/boxes', { json: { wait_for_ready: true, timeout: 60, ...json } });
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
  /** Moves the manager's clock a keeper's interval at a time until the pool is full again. */
  const refilled = (what = 'the pool refilled') =>
    until(
      what,
      async () => {
        await clock.advance(POOL_INTERVAL_MS);
        return (await readyReplicas()) === 2 ? true : undefined;
      },
      60_000,
      200,
    );
  /** The instances of the pool's ready members, and of a sandbox, as the manager recorded them. */
  const memberInstances = async () =>
    (await sql<{ instance: string }>`SELECT instance FROM pool_members WHERE status = 'ready'`.execute(database.db)).rows.map((r) => r.instance);
  const instanceOf = async (name: string) =>
    (await sql<{ instance: string }>`SELECT instance FROM sandboxes WHERE name = ${name} AND deleted_at IS NULL`.execute(database.db)).rows[0]?.instance;

  beforeAll(async () => {
    expect((await call('/pools', { json: { name: 'warm', template_name: 'tpl', replicas: 2 } })).status).toBe(201);
    await refilled('the pool is full');
  }, 90_000);

  it('serves a create from the pool, fast, and refills it', async () => {
    const members = await memberInstances();
    const hit = await createBox({ name: 'hit', template_name: 'tpl' });
    expect(hit.body).toMatchObject({ status: 'ready', pool_name: 'warm' });
    // Fast because nothing is started for it: it got a member that was already running.
    expect(members).toContain(await instanceOf('hit'));
    const sandbox = await platform.client().getSandbox('hit');
    expect((await sandbox.run('echo warm')).stdout).toBe('warm\n');
    await refilled();
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
    await refilled();
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
    await refilled('the pool refilled with the new version');
    expect((await createBox({ name: 'new-member', template_name: 'tpl' })).body).toMatchObject({ pool_name: 'warm' });
  }, 120_000);

  afterAll(async () => {
    await platform.cleanup();
  }, 60_000);
});

describe('the TTL reaper', () => {
  /**
   * Moves the manager's clock (the reaper's passes on the way run), then waits for one more whole
   * pass at the new time: what the reaper did not do by then, it did not do at that time.
   */
  const advance = async (seconds: number) => {
    await clock.advance(seconds * 1000);
    await platform.manager.reaper.pass();
  };

  it('stops an idle sandbox, then deletes it after delete_after_stop_seconds, saying why', async () => {
    expect((await createBox({ name: 'idle', template_name: 'tpl', idle_ttl_seconds: 60, delete_after_stop_seconds: 60 })).status).toBe(201);
    await advance(30);
    expect((await status('idle')).status).toBe('ready');
    await advance(31);
    const stopped = await until(
      'idle stopped',
      async () => {
        const s = await status('idle');
        return s.status === 'stopped' ? s : undefined;
      },
      10_000,
    );
    expect(stopped.status_message).toMatch(/idle_ttl_seconds \(60\)/);
    await advance(61);
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
    // It runs until the test lets it finish (a file appears), its deadline (on the manager's
    // clock too) past how far the clock moves.
    let out = '';
    const handle = await sandbox.run('echo started; while [ ! -e /tmp/finish ]; do sleep 0.05; done; echo done', {
      wait: false,
      timeout: 3600,
      onStdout: (data) => (out += data),
    });
    // The client hands output to onStdout only while something reads the result.
    const result = handle.result;
    await until('the command runs', () => (out.includes('started') ? true : undefined), 30_000);
    await advance(120);
    expect((await status('busy')).status).toBe('ready');
    await sandbox.write('/tmp/finish', '');
    expect(await result).toMatchObject({ stdout: 'started\ndone\n', exit_code: 0 });
    // Once it finished, the idle clock runs from then: stopped a TTL later.
    await advance(59);
    expect((await status('busy')).status).toBe('ready');
    await advance(2);
    await until('busy stopped', async () => ((await status('busy')).status === 'stopped' ? true : undefined), 10_000);
  }, 60_000);
});

describe('commands', () => {
  it('kills a command at its deadline on the manager’s clock, not before', async () => {
    expect((await createBox({ name: 'deadline', template_name: 'tpl' })).status).toBe(201);
    const sandbox = await platform.client().getSandbox('deadline');
    let out = '';
    const handle = await sandbox.run('echo started; sleep 3600', { wait: false, timeout: 60, onStdout: (data) => (out += data) });
    const outcome = handle.result.then(
      () => 'finished',
      (error: unknown) => (error as Error).name,
    );
    await until('the command runs', () => (out.includes('started') ? true : undefined), 30_000);
    const sleeping = async () => (await sandbox.run('ps -o args | grep -c "^sleep 3600" || true')).stdout.trim();
    await clock.advance(59_000);
    expect(await sleeping()).toBe('1');
    await clock.advance(1_000);
    expect(await outcome).toBe('LangSmithCommandTimeoutError');
    expect(await sleeping()).toBe('0');
    expect((await call('/boxes/deadline', { method: 'DELETE' })).status).toBe(204);
  }, 60_000);
});
