/**
 * After a control-plane restart, a serving revision that cannot come back is tried again with
 * backoff; a revision deployed meanwhile must not be cut off by those tries. Each try gives the
 * serving revision's database login a fresh password, and while neither agent server holds a
 * session the count of sessions cannot tell the two logins apart: the try used to rotate the
 * password the new revision had just been given, and its agent server failed to connect
 * ("password authentication failed"). Real builds, agent servers and Postgres; the backoff runs on
 * a clock the test moves, at the moment the new agent server is starting.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@berth/clock';
import { silentLogger } from '@berth/log';
import { DeploymentService, DeploymentStatus, RevisionStatus } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { echoProject } from '../build/__tests__/tarballs.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { start, type RunningControlPlane } from '../index.js';
import { answers, until } from '../__tests__/until.js';
import { revisionLifecycle, revisionStatusWire } from './revision-lifecycle.js';

const tenantId = randomUUID();

let db: TestDatabase;
let work: string;
let config: ReturnType<typeof testControlPlaneConfig>;
let plane: RunningControlPlane | undefined;
let rpc: RpcClient<typeof DeploymentService> | undefined;

beforeAll(async () => {
  db = await createTestDatabase('cp_restore_login');
  work = await mkdtemp(join(tmpdir(), 'berth-restore-login-test-'));
  // As `berth up` keeps its state folder: deployments' OS users (as root) pass through to theirs.
  await chmod(work, 0o711);
  // One config (and secret key) for both starts of the control plane.
  config = testControlPlaneConfig(db.url, join(work, 'artifacts'));
});
afterAll(async () => {
  rpc?.close();
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function startPlane(clock?: ManualClock): Promise<RpcClient<typeof DeploymentService>> {
  plane = await start({ ...config, ...(clock ? { clock } : {}) }, silentLogger());
  rpc = createRpcClient(DeploymentService, plane.address);
  return rpc;
}

async function settled(client: RpcClient<typeof DeploymentService>, deploymentId: string, revisionId: string) {
  const revision = await until(
    'the revision to settle',
    async () => {
      const { revision } = await client.getRevision({ tenantId, deploymentId, revisionId });
      return revisionLifecycle.isTerminal(revisionStatusWire.decode(revision!.status)!) ? revision : undefined;
    },
    150_000,
  );
  return { status: revision.status, message: revision.statusMessage };
}

it('keeps a revision deployed while the one it replaces is still being brought back', async () => {
  let client = await startPlane();
  const { deployment } = await client.createDeployment({ tenantId, name: 'comeback', source: 'internal_source', sourceRevisionConfig: {} });
  const deploymentId = deployment!.id;
  const first = deployment!.latestRevisionId;
  await client.uploadSource({ tenantId, deploymentId, data: echoProject(), last: true });
  expect(await settled(client, deploymentId, first)).toEqual({ status: RevisionStatus.DEPLOYED, message: '' });

  // The control plane restarts, and the serving revision's build folder is gone: it cannot come back.
  client.close();
  await plane!.close();
  const folder = join(work, 'artifacts', deploymentId);
  const [build] = (await readdir(folder)).filter((name) => name.startsWith(first));
  await rename(join(folder, build!), join(work, 'away'));
  const clock = new ManualClock();
  client = await startPlane(clock);
  const get = async () => (await client.getDeployment({ tenantId, deploymentId })).deployment!;
  const failing = await until('the failed start', async () => ((await get()).healthMessage.startsWith('could not bring') ? get() : undefined), 20_000);
  expect(failing.healthMessage).toMatch(/retrying in 1 s$/);

  // The user redeploys it (rebuilt from its stored source). The moment the new agent server starts,
  // the old revision is tried again.
  const second = (await client.redeployRevision({ tenantId, deploymentId, revisionId: first })).deployment!.latestRevisionId;
  expect(second).not.toBe(first);
  const deployLog = async (revisionId: string) =>
    (await client.getRevisionLogs({ tenantId, deploymentId, revisionId, type: 'deploy', limit: 1000 })).logs.map((l) => l.message);
  await until(
    'the new agent server to start',
    async () => ((await deployLog(second)).some((m) => m.startsWith('starting the agent server')) ? true : undefined),
    150_000,
  );
  await clock.advance(1000);
  await until(
    'the old revision tried again',
    async () => ((await deployLog(first)).includes('trying again to bring this revision back') ? true : undefined),
    20_000,
  );

  expect(await settled(client, deploymentId, second)).toEqual({ status: RevisionStatus.DEPLOYED, message: '' });
  expect(await get()).toMatchObject({ status: DeploymentStatus.READY, activeRevisionId: second });
  expect(await answers((await client.resolveDeployment({ deploymentId })).upstreamUrl)).toBe(true);
}, 300_000);
