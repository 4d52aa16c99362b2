/**
 * Request fuzzing of the whole platform as `berth up` starts it — the gateway in front of the real
 * control plane (deployments, revisions, login flows), export-worker (traces, bulk exports) and
 * sandbox-manager on the test Podman engine (templates, snapshots, boxes and their data plane) —
 * with path parameters that exist (a deployment, its revision, a template, a sandbox, a snapshot)
 * beside random and nasty ones. No answer may be a 5xx, and the platform is ready afterwards.
 * (services/gateway/src/fuzz.test.ts fuzzes agent servers, directly and through deployment URLs.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { fuzzRequests, handledStatuses, jsonBodies, nastyText, requests, routesOf, testSandbox, until } from '@berth/testing';
import { startTestPlatform, type TestPlatform } from './__tests__/test-platform.js';

const engine = testSandbox();
let test: TestPlatform;
/** Ids and names that exist, so fuzzed requests reach the handlers behind the lookups. */
const known: string[] = [];
/** Body fields of the platform's routes: deployments, login flows, tenants and keys, traces, exports, sandboxes. */
const KEYS = fc.constantFrom(
  'name',
  'source',
  'source_config',
  'source_revision_config',
  'secrets',
  'deployment_type',
  'session_id',
  'role',
  'expires_in',
  'destination_type',
  'display_name',
  'config',
  'credentials',
  'bulk_export_destination_id',
  'start_time',
  'end_time',
  'interval_hours',
  'format_version',
  'filter',
  'export_fields',
  'status',
  'image',
  'resources',
  'cpu',
  'memory',
  'storage',
  'template_name',
  'snapshot_id',
  'vcpus',
  'mem_bytes',
  'fs_capacity_bytes',
  'command',
  'timeout',
  'post',
  'patch',
  'limit',
  'offset',
);

async function post(path: string, json: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${test.platform.url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': test.adminKey, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  });
  const body = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`POST ${path} answered ${res.status}: ${JSON.stringify(body)}`);
  return body;
}

beforeAll(async () => {
  test = await startTestPlatform('fuzz-platform', {
    sandboxes: { engine: { socketPath: engine.socketPath, storageQuota: engine.storageQuota ? 'enforce' : 'ignore', defaultImage: engine.image } },
    serviceEnv: { SANDBOX_INSECURE_REGISTRIES: engine.registry },
  });
  const deployment = await post('/v2/deployments', { name: 'fuzzed', source: 'internal_source' });
  known.push(String(deployment.id), String(deployment.latest_revision_id), 'fuzzed');
  await post('/api/v2/sandboxes/templates', { name: 'fuzz-tpl', image: engine.image, resources: { cpu: '250m', memory: '64Mi' } });
  await until(
    'the template is ready',
    async () => {
      const res = await fetch(`${test.platform.url}/api/v2/sandboxes/templates/fuzz-tpl`, { headers: { 'x-api-key': test.adminKey } });
      return ((await res.json()) as { status?: string }).status === 'ready' || undefined;
    },
    60_000,
  );
  const box = await post('/api/v2/sandboxes/boxes', { name: 'fuzz-box', template_name: 'fuzz-tpl' });
  known.push('fuzz-tpl', 'fuzz-box', String(box.id));
  const session = await post('/sessions', { name: 'fuzz-project' });
  known.push(String(session.id));
}, 180_000);

afterAll(async () => {
  await test?.close();
});

describe('fuzzed requests at the whole platform', () => {
  it('never make it answer 5xx', async () => {
    const routes = await routesOf(test.platform.url);
    const arbitrary = requests(routes, () => ({ 'x-api-key': test.adminKey }), {
      params: fc.oneof(fc.constantFrom(...known), fc.uuid(), nastyText),
      json: jsonBodies(KEYS, fc.constantFrom('fuzzed', 'fuzz-tpl', '\u0000', '\ud800', -1, 1e308, '999Ei', '-5Gi', '1e400m', 'NaN')),
    });
    const statuses = await fuzzRequests(test.platform.url, arbitrary, { seed: 24_001, numRuns: 2000 });
    // Requests got past authentication and routing: some succeeded, some were refused as invalid.
    expect(handledStatuses(statuses)).toEqual({ succeeded: true, invalid: true });
    expect((await fetch(`${test.platform.url}/readyz`)).status).toBe(200);
  }, 300_000);
});
