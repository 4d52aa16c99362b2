/**
 * Deployments end to end on the local deployer, against real Postgres and real npm: create →
 * AWAITING_SOURCE → upload → BUILDING → DEPLOYED with a working agent server; a new revision
 * replaces the old one without a gap; a broken project is BUILD_FAILED and the old revision keeps
 * serving (the deployment says LATEST_FAILED); a deployment whose only build failed is FAILED, with
 * no route; a revision replaced before it finished is INTERRUPTED, also when another control plane
 * replaced it; delete stops everything; a secret set, replaced or removed by name reaches the agent
 * server with the next revision, not before. Plus the gRPC face. The control plane runs on a ManualClock
 * the tests move: the retirement of a replaced revision happens when the test says, and nothing
 * that polls on a timer can be what noticed an interruption.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { ManualClock } from '@berth/clock';
import { createDatabase } from '@berth/db';
import { NotFoundError, RequestValidationError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { DeploymentService, DeploymentStatus } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { echoProject as project, rawTar } from '../build/__tests__/tarballs.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { CONTROL_PLANE_SCHEMA, start, type RunningControlPlane } from '../index.js';
import { revisionLifecycle } from './revision-lifecycle.js';
import type { Deployments } from './service.js';
import { DeploymentStore } from './store.js';
import type { DeploymentTables } from './tables.js';

const example = fileURLToPath(new URL('../../../../examples/echo-agent/', import.meta.url));

const tenant = randomUUID();
const clock = new ManualClock();
let db: TestDatabase;
let work: string;
let plane: RunningControlPlane;
let deployments: Deployments;
let config: Parameters<typeof start>[0];

beforeAll(async () => {
  db = await createTestDatabase('cp_deploy');
  work = await mkdtemp(join(tmpdir(), 'berth-deployments-test-'));
  // As `berth up` keeps its state folder: deployments' OS users (as root) pass through to theirs.
  await chmod(work, 0o711);
  config = { ...testControlPlaneConfig(db.url, join(work, 'artifacts')), clock };
  plane = await start(config, silentLogger());
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function upload(deploymentId: string, tarball: Buffer): Promise<{ objectPath?: string; revisionId?: string }> {
  // Two chunks, as the gateway sends a body through.
  const half = Math.floor(tarball.length / 2);
  const first = await deployments.upload({ tenantId: tenant, deploymentId, data: tarball.subarray(0, half), last: false });
  return deployments.upload({ tenantId: tenant, deploymentId, uploadId: first.uploadId, data: tarball.subarray(half), last: true });
}

async function settled(deploymentId: string, revisionId: string, timeoutMs = 90_000): Promise<string> {
  return until(
    `revision ${revisionId} to finish`,
    async () => {
      const { status } = await deployments.revision(tenant, deploymentId, revisionId);
      return revisionLifecycle.isTerminal(status) && status;
    },
    timeoutMs,
    200,
  );
}

/** Resolves once a revision's log of `type` has a line matching `line`. */
async function logged(deploymentId: string, revisionId: string, type: 'build' | 'deploy', line: RegExp): Promise<void> {
  await until(
    `a ${type} log line ${line} of revision ${revisionId}`,
    async () => {
      const { logs } = await plane.revisionLogs!.read(tenant, deploymentId, { revisionId, type, offset: 0, limit: 1000 });
      return logs.some((l) => line.test(l.message));
    },
    60_000,
    200,
  );
}

/** The messages of a revision's log, followed from its start until the log ends. */
async function followToEnd(deploymentId: string, revisionId: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const part of plane.revisionLogs!.follow(tenant, deploymentId, { revisionId, offset: 0 }, AbortSignal.timeout(90_000))) {
    lines.push(...part.logs.map((l) => l.message));
    if (part.ended) return lines;
  }
  throw new Error(`the log of revision ${revisionId} did not end`);
}

/** Whether an agent server answers at `upstream`. */
const answers = (upstream: string) =>
  fetch(`${upstream}/ok`).then(
    () => true,
    () => false,
  );

/** Calls the agent server a route points at, with the credential it requires (as the gateway does). */
async function echo(route: { upstream_url: string | null; credential: string }, text: string): Promise<string> {
  const response = await fetch(`${route.upstream_url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-berth-deployment-credential': route.credential },
    body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: text }] } }),
  });
  const body = (await response.json()) as { messages: { content: string }[] };
  return body.messages.at(-1)!.content;
}

describe('deployments on the local deployer', () => {
  let deploymentId: string;
  let firstRevision: string;
  let firstUpstream: string;

  it('creates a deployment whose first revision waits for the upload, then builds and deploys it', async () => {
    const created = await deployments.create({
      tenantId: tenant,
      name: 'echo',
      source: 'internal_source',
      sourceRevisionConfig: { langgraph_config_path: 'langgraph.json' },
      secrets: [{ name: 'ECHO_PREFIX', value: 'hush' }],
    });
    deploymentId = created.id;
    expect(created.secret_names).toEqual(['ECHO_PREFIX']);
    expect(JSON.stringify(created)).not.toContain('hush');
    const first = (firstRevision = created.latest_revision_id!);
    // Waiting for its source is a state of its own, not a QUEUED revision with a message.
    expect(await deployments.revision(tenant, deploymentId, first)).toMatchObject({ status: 'AWAITING_SOURCE', status_message: '' });
    expect(created).toMatchObject({ status: 'AWAITING_DEPLOY', status_message: null });
    await expect(deployments.redeploy(tenant, deploymentId, first)).rejects.toThrow(/has no source to deploy yet/);

    const { objectPath, revisionId } = await upload(deploymentId, project());
    expect(revisionId).toBe(first);
    expect(objectPath).toMatch(new RegExp(`^uploads/${deploymentId}/`));
    expect(await settled(deploymentId, first)).toBe('DEPLOYED');

    const target = await deployments.resolve(deploymentId);
    expect(target).toMatchObject({ tenant_id: tenant, custom_auth: false });
    firstUpstream = target.upstream_url!;
    expect(await echo(target, 'hi')).toBe('echo: hi');
    const { logs } = await plane.revisionLogs!.read(tenant, deploymentId, { type: 'build', offset: 0, limit: 1000 });
    expect(logs.map((l) => l.message).join('\n')).toMatch(/built: graphs echo/);
  }, 120_000);

  it('deploys a new revision beside the old one and switches without a failed request', async () => {
    const { objectPath } = await upload(
      deploymentId,
      project(readFileSync(join(example, 'src/graph.ts'), 'utf8').replace('AIMessage(`echo: ', 'AIMessage(`echo v2: ')),
    );
    let failures = 0;
    let calls = 0;
    let looping = true;
    // A client resolving the route for every call, as the gateway does.
    const loop = (async () => {
      while (looping) {
        calls += 1;
        await echo(await deployments.resolve(deploymentId), 'x').catch(() => (failures += 1));
      }
    })();
    let second: string;
    let latest: Awaited<ReturnType<Deployments['resolve']>>;
    // Followed live: its log ends when it is retired.
    const firstLog = followToEnd(deploymentId, firstRevision);
    try {
      const updated = await deployments.update({
        tenantId: tenant,
        deploymentId,
        sourceRevisionConfig: { langgraph_config_path: 'langgraph.json', source_tarball_path: objectPath },
      });
      second = updated.latest_revision_id!;
      expect(await settled(deploymentId, second)).toBe('DEPLOYED');
      latest = await deployments.resolve(deploymentId);
      // Its step logs this once it set the old revision's retirement (3 s on the clock) going.
      await logged(deploymentId, second, 'deploy', /^deployed: serving traffic$/);
      // The replaced revision keeps serving for requests routed with a slightly old view...
      await clock.advance(2_999);
      expect(await answers(firstUpstream)).toBe(true);
      // ...then is retired.
      await clock.advance(1);
      await until('the replaced revision to stop', async () => !(await answers(firstUpstream)), 30_000);
    } finally {
      looping = false;
      await loop;
    }
    expect(latest.upstream_url).not.toBe(firstUpstream);
    expect(await echo(latest, 'hi')).toBe('echo v2: hi');
    expect(calls).toBeGreaterThan(5);
    expect(failures).toBe(0);
    await expect(fetch(`${firstUpstream}/ok`)).rejects.toThrow();
    const { resources } = await deployments.revisions(tenant, deploymentId, { limit: 10, offset: 0 });
    expect(resources.map((r) => r.id)[0]).toBe(second);
    expect(await firstLog).toContain('retired: it no longer serves');
  }, 120_000);

  it('fails the build of a project that does not load, and the old revision keeps serving', async () => {
    const before = await deployments.resolve(deploymentId);
    const { objectPath } = await upload(deploymentId, project('export const graph = ;\n'));
    const updated = await deployments.update({ tenantId: tenant, deploymentId, sourceRevisionConfig: { source_tarball_path: objectPath } });
    const broken = updated.latest_revision_id!;
    const brokenLog = followToEnd(deploymentId, broken);
    expect(await settled(deploymentId, broken)).toBe('BUILD_FAILED');
    const revision = await deployments.revision(tenant, deploymentId, broken);
    expect(revision.status_message).toMatch(/graph\.ts/);
    // Its log says why, and ends.
    expect(await brokenLog).toEqual(expect.arrayContaining([expect.stringContaining('graph.ts')]));
    expect(await deployments.resolve(deploymentId)).toMatchObject({ upstream_url: before.upstream_url, status: 'LATEST_FAILED' });
    expect(await echo(before, 'still')).toBe('echo v2: still');
    // The deployment says that what serves is older than its latest revision, and why.
    const deployment = await deployments.get(tenant, deploymentId);
    expect(deployment.status).toBe('LATEST_FAILED');
    expect(deployment.status_message).toBe(
      `the latest revision ${broken} failed to build (BUILD_FAILED: ${revision.status_message}); revision ${before.revision_id} still serves`,
    );
  }, 120_000);

  it('says FAILED, with no route, for a deployment whose only build failed (not AWAITING_DEPLOY forever)', async () => {
    const metricsBefore = parseMetrics((await scrape()).body);
    const created = await deployments.create({ tenantId: tenant, name: 'broken', source: 'internal_source', secrets: [] });
    const { revisionId } = await upload(created.id, project('export const graph = ;\n'));
    expect(await settled(created.id, revisionId!)).toBe('BUILD_FAILED');
    // The metrics count it: one more failed revision, one more build step timed.
    const metrics = parseMetrics((await scrape()).body);
    const moved = (name: string, labels: Record<string, string>) => sampleSum(metrics, name, labels) - sampleSum(metricsBefore, name, labels);
    expect(moved('berth_revisions', { status: 'BUILD_FAILED' })).toBe(1);
    expect(moved('berth_revision_step_duration_seconds_count', { step: 'build' })).toBe(1);
    expect(moved('berth_revision_step_duration_seconds_count', { step: 'deploy' })).toBe(0);
    const { status_message } = await deployments.revision(tenant, created.id, revisionId!);
    const why = `the latest revision ${revisionId} failed to build (BUILD_FAILED: ${status_message}) and no revision serves`;
    expect(await deployments.get(tenant, created.id)).toMatchObject({ status: 'FAILED', status_message: why, active_revision_id: null });
    const { resources } = await deployments.list(tenant, { nameContains: 'broken', limit: 10, offset: 0 });
    expect(resources.map((d) => [d.name, d.status])).toEqual([['broken', 'FAILED']]);
    expect(await deployments.resolve(created.id)).toMatchObject({ upstream_url: null, status: 'FAILED', status_message: why });
    await deployments.delete(tenant, created.id);
  }, 120_000);

  it('interrupts a revision replaced before it finished', async () => {
    const { objectPath } = await upload(deploymentId, project());
    const a = (await deployments.update({ tenantId: tenant, deploymentId, sourceRevisionConfig: { source_tarball_path: objectPath } })).latest_revision_id!;
    const b = (await deployments.update({ tenantId: tenant, deploymentId, sourceRevisionConfig: { source_tarball_path: objectPath } })).latest_revision_id!;
    expect((await deployments.revision(tenant, deploymentId, a)).status).toBe('INTERRUPTED');
    expect(await settled(deploymentId, b)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(deploymentId), 'hi')).toBe('echo: hi');
  }, 120_000);

  it('stops a step at once when another control plane interrupts its revision (notified, not polled)', async () => {
    // An install that never ends by itself: only an interruption stops this build.
    const hanging = rawTar([
      { path: 'package.json', body: JSON.stringify({ name: 'p', type: 'module', scripts: { preinstall: 'node -e "setInterval(() => {}, 1000)"' } }) },
      { path: 'langgraph.json', body: '{"graphs":{"agent":"./src/graph.ts:graph"}}' },
      { path: 'src/graph.ts', body: 'export const graph = 1;\n' },
    ]);
    const created = await deployments.create({ tenantId: tenant, name: 'hanging', source: 'internal_source', secrets: [] });
    const { revisionId } = await upload(created.id, hanging);
    await logged(created.id, revisionId!, 'build', /^Installing dependencies/);
    // The other control plane's store, on its own connection: this one's pipeline hears of the
    // move only through the database. The clock stands still, so no safety poll runs meanwhile.
    const other = createDatabase<DeploymentTables>({ connectionString: db.url, schema: CONTROL_PLANE_SCHEMA, applicationName: 'other-control-plane' });
    try {
      await new DeploymentStore(other.db).move({ revisionId: revisionId! }, 'INTERRUPTED', { status_message: 'replaced by another control plane' });
    } finally {
      await other.close();
    }
    await logged(created.id, revisionId!, 'build', /^interrupted: a newer revision replaced this one$/);
    expect((await followToEnd(created.id, revisionId!)).at(-1)).toBe('interrupted: a newer revision replaced this one');
    expect(await deployments.revision(tenant, created.id, revisionId!)).toMatchObject({ status: 'INTERRUPTED' });
    await deployments.delete(tenant, created.id);
  }, 120_000);

  it('rejects bad input with field-level errors and hides other tenants', async () => {
    await expect(deployments.create({ tenantId: tenant, name: 'Bad Name', source: 'internal_source', secrets: [] })).rejects.toBeInstanceOf(
      RequestValidationError,
    );
    await expect(deployments.create({ tenantId: tenant, name: 'echo', source: 'internal_source', secrets: [] })).rejects.toThrow(/already exists/);
    await expect(deployments.create({ tenantId: tenant, name: 'img', source: 'external_docker', secrets: [] })).rejects.toBeInstanceOf(RequestValidationError);
    await expect(
      deployments.update({ tenantId: tenant, deploymentId, sourceRevisionConfig: { source_tarball_path: `uploads/${deploymentId}/${randomUUID()}.tar.gz` } }),
    ).rejects.toBeInstanceOf(RequestValidationError);
    await expect(deployments.update({ tenantId: tenant, deploymentId, sourceConfig: { deployment_type: 'prod' } })).rejects.toBeInstanceOf(
      RequestValidationError,
    );
    await expect(deployments.get(randomUUID(), deploymentId)).rejects.toBeInstanceOf(NotFoundError);
    await expect(deployments.get(tenant, 'not-a-uuid')).rejects.toBeInstanceOf(NotFoundError);
  });

  it("refuses resources above the operator's maxima, naming the field and the maximum", async () => {
    const refusal = (work: Promise<unknown>) =>
      work.then(
        () => undefined,
        (error: unknown) => (error as RequestValidationError).issues,
      );
    expect(
      await refusal(
        deployments.create({
          tenantId: tenant,
          name: 'greedy',
          source: 'internal_source',
          sourceConfig: { resource_spec: { cpu: 9, memory_mb: 512 } },
          secrets: [],
        }),
      ),
    ).toEqual([{ loc: ['body', 'source_config', 'resource_spec', 'cpu'], msg: 'at most 8 CPU per replica on this platform', type: 'value_error' }]);
    expect(await refusal(deployments.update({ tenantId: tenant, deploymentId, sourceConfig: { resource_spec: { memory_mb: 16_385 } } }))).toEqual([
      { loc: ['body', 'source_config', 'resource_spec', 'memory_mb'], msg: 'at most 16384 MB per replica on this platform', type: 'value_error' },
    ]);
    expect((await deployments.list(tenant, { nameContains: 'greedy', limit: 10, offset: 0 })).resources).toEqual([]);
  });

  it('serves the same over gRPC', async () => {
    const client: RpcClient<typeof DeploymentService> = createRpcClient(DeploymentService, plane.address);
    try {
      const { resources } = await client.listDeployments({ tenantId: tenant, nameContains: 'ech', limit: 10 });
      expect(resources.map((d) => d.name)).toEqual(['echo']);
      expect(resources[0]!.status).toBe(DeploymentStatus.READY);
      const { revisionId, logs } = await client.getRevisionLogs({ tenantId: tenant, deploymentId, type: 'deploy', limit: 5 });
      expect(revisionId).toBe(resources[0]!.latestRevisionId);
      expect(logs.length).toBeGreaterThan(0);
      const target = await client.resolveDeployment({ deploymentId });
      expect(target.upstreamUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      await expect(client.getDeployment({ tenantId: randomUUID(), deploymentId })).rejects.toBeInstanceOf(NotFoundError);
    } finally {
      client.close();
    }
  });

  it('brings the serving revision back when the control plane starts again', async () => {
    const before = (await deployments.resolve(deploymentId)).upstream_url!;
    await plane.close(); // its local agent servers stop with it
    await expect(fetch(`${before}/ok`)).rejects.toThrow();
    plane = await start(config, silentLogger());
    deployments = plane.deployments!;
    // Until it is back the route has no upstream (the gateway answers 503).
    const route = await until(
      'the serving revision to be back',
      async () => {
        const resolved = await deployments.resolve(deploymentId);
        return resolved.upstream_url ? resolved : undefined;
      },
      30_000,
      200,
    );
    expect(await echo(route, 'again')).toBe('echo: again');
  }, 60_000);

  it('deletes a deployment: its route is gone at once and its agent server stops', async () => {
    const { upstream_url } = await deployments.resolve(deploymentId);
    await deployments.delete(tenant, deploymentId);
    await expect(deployments.resolve(deploymentId)).rejects.toBeInstanceOf(NotFoundError);
    await expect(deployments.get(tenant, deploymentId)).rejects.toBeInstanceOf(NotFoundError);
    await until('its agent server to stop', async () => !(await answers(upstream_url!)), 20_000, 200);
  }, 30_000);
});

describe('redeploying an earlier revision (a rollback)', () => {
  const buildLog = async (deploymentId: string, revisionId: string) =>
    (await plane.revisionLogs!.read(tenant, deploymentId, { revisionId, type: 'build', offset: 0, limit: 1000 })).logs.map((l) => l.message);

  it('deploys the earlier build while it is there (nothing installed or loaded), and builds again once it is gone', async () => {
    const created = await deployments.create({ tenantId: tenant, name: 'rollback', source: 'internal_source', secrets: [] });
    const first = (await upload(created.id, project())).revisionId!;
    expect(await settled(created.id, first)).toBe('DEPLOYED');
    const { objectPath } = await upload(
      created.id,
      project(readFileSync(join(example, 'src/graph.ts'), 'utf8').replace('AIMessage(`echo: ', 'AIMessage(`echo v2: ')),
    );
    const second = (await deployments.update({ tenantId: tenant, deploymentId: created.id, sourceRevisionConfig: { source_tarball_path: objectPath } }))
      .latest_revision_id!;
    expect(await settled(created.id, second)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('echo v2: hi');
    // What a build does, for contrast with the rollback's.
    expect(await buildLog(created.id, first)).toContainEqual(expect.stringMatching(/^Loading langgraph\.json/));

    const rollback = (await deployments.redeploy(tenant, created.id, first)).latest_revision_id!;
    expect(await settled(created.id, rollback)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('echo: hi');
    // Its whole build log: no unpacking, install or graph loading ran.
    expect(await buildLog(created.id, rollback)).toEqual([`reusing the build of revision ${first}: nothing to install or load again`]);

    // Kept relative to the artifacts folder (a restored or moved state folder finds it there).
    const firstArtifact = (await deployments.revision(tenant, created.id, first)).artifact_path!;
    expect(firstArtifact).toMatch(new RegExp(`^${created.id}/${first}-[0-9a-f]{8}$`));
    await rm(join(work, 'artifacts', firstArtifact), { recursive: true, force: true });
    const rebuilt = (await deployments.redeploy(tenant, created.id, first)).latest_revision_id!;
    expect(await settled(created.id, rebuilt)).toBe('DEPLOYED');
    const log = await buildLog(created.id, rebuilt);
    expect(log[0]).toBe(`the build of revision ${first} is gone: building again`);
    expect(log).toContainEqual(expect.stringMatching(/^Loading langgraph\.json/));
    expect((await deployments.revision(tenant, created.id, rebuilt)).artifact_path).not.toBe(firstArtifact);
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('echo: hi');
    await deployments.delete(tenant, created.id);
  }, 240_000);
});

describe("secrets in the agent server's environment", () => {
  /** The echo project answering the GREETING its agent server has in its environment. */
  const greeter = project(
    [
      "import { AIMessage } from '@langchain/core/messages';",
      "import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';",
      'const State = new StateSchema({ messages: MessagesValue });',
      'export const graph = new StateGraph(State)',
      "  .addNode('respond', () => ({ messages: [new AIMessage(`GREETING=${process.env.GREETING ?? '(unset)'}`)] }))",
      "  .addEdge('__start__', 'respond')",
      "  .addEdge('respond', '__end__')",
      '  .compile();',
      '',
    ].join('\n'),
  );

  it('sets, replaces and removes one secret: the running agent server keeps its environment, a redeploy serves the new one', async () => {
    const created = await deployments.create({ tenantId: tenant, name: 'greeter', source: 'internal_source', secrets: [{ name: 'GREETING', value: 'hello' }] });
    const first = (await upload(created.id, greeter)).revisionId!;
    expect(await settled(created.id, first)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('GREETING=hello');

    const replaced = await deployments.setSecret(tenant, created.id, 'GREETING', 'bonjour');
    // No revision, no restart: the answer says nothing was deployed, and the server still has the old value.
    expect(replaced).toMatchObject({ latest_revision_id: first, active_revision_id: first, secret_names: ['GREETING'] });
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('GREETING=hello');

    const second = (await deployments.redeploy(tenant, created.id, first)).latest_revision_id!;
    expect(await settled(created.id, second)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('GREETING=bonjour');

    expect((await deployments.deleteSecret(tenant, created.id, 'GREETING')).secret_names).toEqual([]);
    const third = (await deployments.redeploy(tenant, created.id, second)).latest_revision_id!;
    expect(await settled(created.id, third)).toBe('DEPLOYED');
    expect(await echo(await deployments.resolve(created.id), 'hi')).toBe('GREETING=(unset)');
    await deployments.delete(tenant, created.id);
  }, 180_000);
});
