/**
 * Every sandbox route fuzzed against a real sandbox-manager on the test Podman engine (fast-check,
 * fixed seeds): the control plane (templates, snapshots, registries, volumes, pools, boxes) and the
 * data plane (execute, upload, download, the WebSocket exec) with real and random ids, odd bodies,
 * multipart uploads and WebSocket frames. No answer may be a 5xx; afterwards the platform still
 * serves. The ids in paths that used to reach Postgres unchecked are pinned down first.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import WebSocket from 'ws';
import { contentTypes, encodings, fuzzRequests, handledStatuses, jsonBodies, nastyText, requests, routesOf } from '@berth/testing';
import { images, SandboxPlatform, type Json } from './__tests__/sandbox-platform.js';

let platform: SandboxPlatform;
let snapshotId: string;
let box: Json;

beforeAll(async () => {
  platform = await SandboxPlatform.start({ db: 'gw_sbx_fuzz', sandboxes: { quota: { sandboxes: 3 } } });
  snapshotId = (await platform.call('/snapshots', { json: { name: 'snap', docker_image: images.image, fs_capacity_bytes: 1 << 30 } })).body.id;
  await platform.template('tpl');
  for (const [path, json] of [
    ['/volumes', { name: 'vol', size: '1Gi' }],
    ['/registries', { name: 'reg', server: 'registry.example.com', username: 'u', password: 'p' }],
    ['/pools', { name: 'pool', template_name: 'tpl', replicas: 0 }],
  ] as const) {
    expect((await platform.call(path, { json })).status).toBe(201);
  }
  box = (await platform.call('/boxes', { json: { name: 'box', snapshot_id: snapshotId, timeout: 60 } })).body;
  expect(box.status).toBe('ready');
}, 120_000);
afterAll(async () => {
  await platform?.close();
});

const send = (path: string, init: { method?: string; json?: unknown } = {}) => platform.call(path, init);

/** The HTTP answer to a WebSocket upgrade (101 when it opened), and the frames that came after. */
function upgrade(path: string, frames: unknown[] = []): Promise<{ status: number; body: string; frames: Json[] }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${platform.gateway.url.replace(/^http/, 'ws')}/api/v2/sandboxes${path}`, { headers: { 'x-api-key': platform.keyA } });
    const received: Json[] = [];
    ws.on('open', () => {
      for (const frame of frames) ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
      if (frames.length === 0) ws.close();
    });
    ws.on('message', (data) => received.push(JSON.parse(String(data)) as Json));
    ws.on('close', () => resolve({ status: 101, body: '', frames: received }));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, frames: [] }));
    });
    ws.on('error', reject);
  });
}

describe('ids in paths', () => {
  it('answers 404 {"detail"} for ids that are not UUIDs, before they reach Postgres', async () => {
    const answers = {
      'GET snapshot': await send('/snapshots/x'),
      'DELETE snapshot': await send('/snapshots/x', { method: 'DELETE' }),
      execute: await send('/dataplane/x/execute', { json: { command: 'true' } }),
      download: await send('/dataplane/x/download?path=/etc/hostname'),
      'odd execute': await send(`/dataplane/${encodeURIComponent("x'; --")}/execute`, { json: { command: 'true' } }),
    };
    for (const [name, answer] of Object.entries(answers)) {
      expect({ name, status: answer.status }).toEqual({ name, status: 404 });
      expect({ name, detail: typeof (answer.body.detail?.message ?? answer.body.detail) }).toEqual({ name, detail: 'string' });
    }
    for (const id of ['x', '%ZZ', '%00']) {
      const refused = await upgrade(`/dataplane/${id}/execute/ws`);
      expect({ id, status: refused.status }).toEqual({ id, status: 404 });
    }
  });

  it('answers 422 for ids in bodies that are not UUIDs', async () => {
    expect(await send('/boxes', { json: { snapshot_id: 'x' } })).toMatchObject({ status: 422, body: { detail: [{ loc: ['body', 'snapshot_id'] }] } });
    expect(await send('/snapshots', { json: { name: 's2', docker_image: images.image, fs_capacity_bytes: 1 << 30, registry_id: 'x' } })).toMatchObject({
      status: 422,
      body: { detail: [{ loc: ['body', 'registry_id'] }] },
    });
  });
});

describe('fuzzed requests', () => {
  const keys = fc.constantFrom(
    'name',
    'image',
    'docker_image',
    'fs_capacity_bytes',
    'registry_id',
    'registry_name',
    'resources',
    'volumes',
    'proxy_config',
    'run_config',
    'snapshot_id',
    'snapshot_name',
    'template_name',
    'wait_for_ready',
    'timeout',
    'vcpus',
    'mem_bytes',
    'idle_ttl_seconds',
    'ttl_seconds',
    'delete_after_stop_seconds',
    'labels',
    'replicas',
    'size',
    'server',
    'username',
    'password',
    'command',
    'shell',
    'env',
    'cwd',
  );
  const values = fc.oneof(
    fc.constantFrom(
      'snap',
      'tpl',
      'vol',
      'reg',
      'pool',
      'box',
      '\u0000',
      '\ud800',
      -1,
      0,
      0.0001,
      1e308,
      2 ** 63,
      Number.MAX_SAFE_INTEGER,
      '999Ei',
      '1e400',
      '-1Gi',
      '',
    ),
    fc.record({ cpu: fc.constantFrom('1', '999', '0', '1m', '999Ei'), memory: fc.constantFrom('1Ki', '999Ei', '64Mi', '-1') }, { requiredKeys: [] }),
  );
  /** Bodies close to what each route takes, with odd values here and there: they get past validation into the manager. */
  const MiB = 1024 ** 2;
  const odd = fc.constantFrom<unknown>(-1, 0, 0.0001, 1e308, 2 ** 63, '999Ei', '', '\u0000', null);
  const quantity = fc.constantFrom('500m', '1', '3', '64Mi', '1Gi', '999Ei', '1e400', '0', '-1Gi', '1m', '1Ki');
  /** Mostly good values, an odd one in ten. */
  const mix = (good: fc.Arbitrary<unknown>) => fc.oneof({ weight: 9, arbitrary: good }, { weight: 1, arbitrary: odd });
  const pool = {
    name: mix(fc.constantFrom('f1', 'f2', 'f3', 'box', 'tpl', 'snap', 'x'.repeat(64))),
    image: mix(fc.constantFrom(images.image, `${images.registry}/no/such:1`, 'NOPE')),
    docker_image: mix(fc.constantFrom(images.image, `${images.registry}/no/such:1`)),
    fs_capacity_bytes: mix(fc.oneof(fc.constantFrom(1 << 30, 64 * MiB), fc.integer({ min: 1, max: 2 ** 50 }))),
    snapshot_id: mix(fc.oneof(fc.constant(snapshotId), fc.uuid())),
    template_name: fc.constantFrom('tpl', 'nope'),
    resources: fc.record({ cpu: quantity, memory: quantity, storage: quantity }, { requiredKeys: [] }),
    mem_bytes: mix(fc.oneof(fc.constantFrom(64 * MiB, 1024 * MiB), fc.integer({ min: 1, max: 2 ** 40 }))),
    vcpus: mix(fc.oneof(fc.constantFrom(0.5, 1, 2, 16), fc.double({ min: 0, max: 64, noNaN: true }))),
    wait_for_ready: fc.boolean(),
    timeout: mix(fc.constantFrom(5, 30)),
    replicas: mix(fc.integer({ min: 0, max: 2 })),
    size: quantity,
    command: fc.constantFrom('echo hi', 'exit 3', 'cat /etc/hostname', '', 'sleep 0.1; echo late'),
    shell: fc.constantFrom('/bin/sh', '/no/shell', ''),
    env: fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 2 }),
    cwd: fc.constantFrom('/tmp', '/no/such', 'relative'),
    idle_ttl_seconds: mix(fc.constantFrom(0, 60, 61)),
    labels: fc.dictionary(fc.string({ maxLength: 70 }), fc.string({ maxLength: 10 }), { maxKeys: 2 }),
  };
  type Field = keyof typeof pool;
  const body = (...keys: Field[]) =>
    fc.record(Object.fromEntries(keys.map((k) => [k, pool[k]])) as Record<Field, fc.Arbitrary<unknown>>, { requiredKeys: [] }).map((b) => JSON.stringify(b));
  /** Each route with bodies made of its own fields. */
  const shaped: [RegExp, fc.Arbitrary<string>][] = [
    [/^POST \/boxes$/, body('name', 'snapshot_id', 'mem_bytes', 'vcpus', 'fs_capacity_bytes', 'wait_for_ready', 'timeout', 'idle_ttl_seconds', 'labels')],
    [/^POST \/boxes$/, body('name', 'template_name', 'mem_bytes', 'vcpus', 'wait_for_ready', 'timeout')],
    [/^PATCH \/boxes\/\{name\}$/, body('name', 'idle_ttl_seconds', 'labels')],
    [/^(POST|PATCH) \/templates/, body('name', 'image', 'resources')],
    [/^POST \/snapshots$/, body('name', 'docker_image', 'fs_capacity_bytes')],
    [/^POST \/volumes$/, body('name', 'size')],
    [/^(POST|PATCH) \/pools/, body('name', 'template_name', 'replicas')],
    [/^POST \/dataplane\/\{sandbox_id\}\/execute$/, body('command', 'timeout', 'shell', 'env', 'cwd')],
  ];
  const fileRoutes = /^(POST \/dataplane\/\{sandbox_id\}\/upload|GET \/dataplane\/\{sandbox_id\}\/download)$/;
  /** Mostly no query (a file path for upload and download); sometimes anything. */
  const query = (good: fc.Arbitrary<[string, string][]>) =>
    fc.oneof(
      { weight: 6, arbitrary: good },
      { weight: 1, arbitrary: fc.array(fc.tuple(fc.constantFrom('path', 'limit', 'offset', 'cursor', 'name_contains'), nastyText), { maxLength: 3 }) },
    );
  const none = query(fc.constant([]));
  const filePath = query(fc.constantFrom('/tmp/f', 'rel/f', '/', '/etc/hostname', '/proc/self/mem', '/tmp/%00').map((path) => [['path', path]]));
  const multipart = fc
    .record({ name: fc.constantFrom('file', 'other', ''), data: fc.uint8Array({ maxLength: 200 }), close: fc.boolean() })
    .map(({ name, data, close }) => ({
      contentType: 'multipart/form-data; boundary=b0undary',
      body: Buffer.concat([
        Buffer.from(`--b0undary\r\nContent-Disposition: form-data; name="${name}"; filename="f"\r\n\r\n`),
        Buffer.from(data),
        Buffer.from(close ? '\r\n--b0undary--\r\n' : ''),
      ]),
    }));

  it('never make the sandbox routes answer 5xx, data plane included', async () => {
    const routes = (await routesOf(platform.gateway.url)).filter((r) => r.path.startsWith('/api/v2/sandboxes'));
    expect(routes.length).toBeGreaterThan(30);
    const params = fc.oneof(fc.constantFrom(snapshotId, box.id as string, 'snap', 'tpl', 'vol', 'reg', 'pool', 'box'), fc.uuid(), nastyText);
    // Mostly past authentication and body parsing: what is fuzzed is the sandbox routes' own handling.
    const credentials = () => ({ 'x-api-key': platform.keyA });
    const mostly = {
      params,
      extraBodies: multipart,
      authenticated: fc.oneof({ weight: 9, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
      contentTypes: fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentTypes }),
      encodings: fc.oneof({ weight: 6, arbitrary: fc.constant({ name: undefined, applied: false }) }, { weight: 1, arbitrary: encodings }),
    };
    const key = (r: (typeof routes)[number]) => `${r.method} ${r.path.replace('/api/v2/sandboxes', '')}`;
    const arbitrary = fc.oneof(
      requests(routes, credentials, { ...mostly, json: jsonBodies(keys, values) }),
      ...shaped.map(([pattern, json]) =>
        requests(
          routes.filter((r) => pattern.test(key(r))),
          credentials,
          { ...mostly, json, query: none },
        ),
      ),
      requests(
        routes.filter((r) => fileRoutes.test(key(r))),
        credentials,
        { ...mostly, json: jsonBodies(keys, values), query: filePath },
      ),
    );
    expect(handledStatuses(await fuzzRequests(platform.gateway.url, arbitrary, { seed: 2401, numRuns: 1500 }))).toEqual({ succeeded: true, invalid: true });
    // Then the data plane of a sandbox that exists (a new one: the fuzzer may have deleted any), each
    // call authenticated and well framed.
    await platform.cleanup();
    const live = (await platform.call('/boxes', { json: { name: 'data-plane', snapshot_id: snapshotId, timeout: 60 } })).body;
    expect(live.status).toBe('ready');
    const at = (what: string) => `/api/v2/sandboxes/dataplane/${live.id as string}/${what}`;
    const headers = (contentType: string) => ({ 'x-api-key': platform.keyA, 'content-type': contentType });
    const paths = fc.constantFrom('/tmp/f', 'rel/f', '/', '/etc/hostname', '/proc/self/mem', '/tmp/a%00b', '/no/such/dir/f', '/.berth/run/x', '..%2F..%2Fetc');
    const call = fc.oneof(
      fc
        .record(
          {
            command: fc.constantFrom('echo hi', 'exit 3', 'cat /dev/urandom | head -c 100', 'sleep 0.1; echo late', 'kill -9 1', 'echo $A'),
            timeout: mix(fc.constantFrom(1, 5)),
            shell: fc.constantFrom('/bin/sh', '/bin/bash', '/no/shell'),
            env: fc.dictionary(fc.constantFrom('A', 'B_1', 'PATH', 'LD_PRELOAD'), fc.string({ maxLength: 8 }), { maxKeys: 2 }),
            cwd: pool.cwd,
          },
          { requiredKeys: ['command'] },
        )
        .map((b) => ({ method: 'POST', path: at('execute'), headers: headers('application/json'), body: Buffer.from(JSON.stringify(b)) })),
      fc
        .tuple(paths, multipart)
        .map(([path, part]) => ({ method: 'POST', path: `${at('upload')}?path=${path}`, headers: headers(part.contentType), body: part.body })),
      paths.map((path) => ({ method: 'GET', path: `${at('download')}?path=${path}`, headers: headers('application/json'), body: undefined })),
    );
    const statuses = await fuzzRequests(platform.gateway.url, call, { seed: 2403, numRuns: 300 });
    // Not all bounce off: commands ran and files moved.
    expect((statuses.get(200) ?? 0) + (statuses.get(204) ?? 0)).toBeGreaterThan(40);
    expect((await fetch(`${platform.gateway.url}/readyz`)).status).toBe(200);
  }, 240_000);

  it('never make the WebSocket exec answer 5xx or fail internally, whatever the id and frames', async () => {
    await platform.cleanup();
    const live = (await platform.call('/boxes', { json: { name: 'ws', snapshot_id: snapshotId, timeout: 60 } })).body;
    expect(live.status).toBe('ready');
    const frame = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
      fc.record(
        {
          type: fc.constantFrom('execute', 'reconnect', 'input', 'kill', 'close_stdin', 'nope'),
          command: fc.constantFrom('echo hi', '', '\u0000', 'exit 3'),
          command_id: fc.oneof(fc.uuid(), fc.constantFrom('', 'x', '\ud800')),
          timeout_seconds: fc.constantFrom(-1, 0, 1, 1e308, 2 ** 63),
          stdout_offset: fc.constantFrom(-1, 0, 2 ** 63, 1e308),
          data: fc.string({ maxLength: 20 }),
        },
        { requiredKeys: ['type'] },
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constant(live.id as string), fc.uuid(), nastyText), fc.array(frame, { minLength: 1, maxLength: 3 }), async (id, frames) => {
        const answer = await upgrade(`/dataplane/${id}/execute/ws`, frames);
        expect(answer.status === 101 || (answer.status >= 400 && answer.status < 500)).toBe(true);
        expect(answer.frames.filter((f) => f.type === 'error' && /internal/i.test(String(f.error)))).toEqual([]);
      }),
      { seed: 2402, numRuns: 150, endOnFailure: true },
    );
  }, 120_000);
});
