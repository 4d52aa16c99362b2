/**
 * Health of deployments on the local deployer, through the gRPC API, with real builds, real agent
 * servers and real Postgres: a deployed agent server killed with SIGKILL makes its deployment
 * UNHEALTHY (why, in health_message and ResolveDeployment's status_message; counted by
 * GetDeploymentsHealth) until it serves again on its url; the crash is in its deploy log. After a
 * control-plane restart the deployment is UNHEALTHY until its revision is back (tried again until
 * it comes up), and the revision brought back is supervised too.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@berth/log';
import { DeploymentService, DeploymentStatus, RevisionStatus } from '@berth/proto';
import { createRpcClient, type RpcClient } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { echoProject } from '../build/__tests__/tarballs.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { start, type RunningControlPlane } from '../index.js';
import { answers, until } from '../__tests__/until.js';
import { revisionLifecycle, revisionStatusWire } from './revision-lifecycle.js';

const tarball = echoProject();
const tenantId = randomUUID();

let db: TestDatabase;
let work: string;
let config: ReturnType<typeof testControlPlaneConfig>;
let plane: RunningControlPlane | undefined;
let client: RpcClient<typeof DeploymentService> | undefined;

beforeAll(async () => {
  db = await createTestDatabase('cp_health');
  work = await mkdtemp(join(tmpdir(), 'berth-health-test-'));
  // As `berth up` keeps its state folder: deployments' OS users (as root) pass through to theirs.
  await chmod(work, 0o711);
  // Agent servers log at info, so that a crash report has their last lines to show.
  config = testControlPlaneConfig(db.url, join(work, 'artifacts'), { agentLogLevel: 'info' });
});
afterAll(async () => {
  client?.close();
  await plane?.close();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function startPlane(): Promise<RpcClient<typeof DeploymentService>> {
  plane = await start(config, silentLogger());
  client = createRpcClient(DeploymentService, plane.address);
  return client;
}

it('reports a killed agent server as UNHEALTHY with the reason until it serves again, also after a control-plane restart', async () => {
  let rpc = await startPlane();
  const { deployment } = await rpc.createDeployment({ tenantId, name: 'crashy', source: 'internal_source', sourceRevisionConfig: {} });
  const deploymentId = deployment!.id;
  const revisionId = deployment!.latestRevisionId;
  await rpc.uploadSource({ tenantId, deploymentId, data: tarball, last: true });
  const settled = await until(
    'the revision to settle',
    async () => {
      const { revision } = await rpc.getRevision({ tenantId, deploymentId, revisionId });
      return revisionLifecycle.isTerminal(revisionStatusWire.decode(revision!.status)!) ? revision : undefined;
    },
    150_000,
  );
  expect({ status: settled.status, message: settled.statusMessage }).toEqual({ status: RevisionStatus.DEPLOYED, message: '' });
  const get = async () => (await rpc.getDeployment({ tenantId, deploymentId })).deployment!;
  const deployLog = async () => (await rpc.getRevisionLogs({ tenantId, deploymentId, revisionId, type: 'deploy', limit: 1000 })).logs;
  const lastPid = async () =>
    Number(
      [
        ...(await deployLog())
          .map((l) => l.message)
          .join('\n')
          .matchAll(/starting the agent server \(pid (\d+)\)/g),
      ].at(-1)![1],
    );
  /** Kills the serving agent server; checks what is reported while it is down and once it is back. */
  const killAndRecover = async () => {
    const { upstreamUrl } = await rpc.resolveDeployment({ deploymentId });
    process.kill(await lastPid(), 'SIGKILL');
    const reason = 'the agent server exited with signal SIGKILL; restarting in 0.5 s';
    const down = await until('UNHEALTHY', async () => ((await get()).status === DeploymentStatus.UNHEALTHY ? get() : undefined), 5_000);
    expect(down).toMatchObject({ status: DeploymentStatus.UNHEALTHY, healthMessage: reason, statusMessage: reason, activeRevisionId: revisionId });
    expect(await rpc.resolveDeployment({ deploymentId })).toMatchObject({ status: DeploymentStatus.UNHEALTHY, statusMessage: reason });
    expect(await rpc.getDeploymentsHealth({})).toMatchObject({ unhealthyDeployments: 1 });
    await until('READY', async () => ((await get()).status === DeploymentStatus.READY ? true : undefined), 30_000);
    expect((await get()).healthMessage).toBe('');
    expect(await rpc.resolveDeployment({ deploymentId })).toMatchObject({ upstreamUrl, status: DeploymentStatus.READY, statusMessage: '' });
    expect(await answers(upstreamUrl)).toBe(true);
    expect(await rpc.getDeploymentsHealth({})).toMatchObject({ unhealthyDeployments: 0 });
    // The deploy log says so, with the server's last lines (it logged that it was ready).
    const lines = (await deployLog()).map((l) => ({ level: l.level, message: l.message }));
    const crash = lines.map((l) => l.message).lastIndexOf(reason);
    expect(lines[crash]).toEqual({ level: 'error', message: reason });
    expect(lines[crash + 1]).toEqual({ level: 'error', message: 'its last output lines:' });
    expect(lines.slice(crash + 2).some((l) => l.message.includes('agent server ready'))).toBe(true);
  };

  expect(await get()).toMatchObject({ status: DeploymentStatus.READY, healthMessage: '' });
  await killAndRecover();

  // A control-plane restart: UNHEALTHY until the revision is back; supervised again afterwards.
  client!.close();
  await plane!.close();
  rpc = await startPlane();
  expect(await get()).toMatchObject({ status: DeploymentStatus.UNHEALTHY, healthMessage: 'the control plane restarted: the agent server is starting again' });
  expect((await rpc.resolveDeployment({ deploymentId })).statusMessage).toBe('the control plane restarted: the agent server is starting again');
  await until('READY after the restart', async () => ((await get()).status === DeploymentStatus.READY ? true : undefined), 30_000);
  await killAndRecover();

  // A revision that cannot start after a restart (its folder is gone) is tried again until it can.
  client!.close();
  await plane!.close();
  const artifacts = join(work, 'artifacts', deploymentId);
  await rename(artifacts, `${artifacts}.away`);
  rpc = await startPlane();
  const failing = await until('the failed start', async () => ((await get()).healthMessage.startsWith('could not bring') ? get() : undefined), 20_000);
  expect(failing).toMatchObject({
    status: DeploymentStatus.UNHEALTHY,
    healthMessage: expect.stringMatching(/^could not bring the agent server back: .*ENOENT.*; retrying in 1 s$/),
  });
  await rename(`${artifacts}.away`, artifacts);
  await until('READY once its folder is back', async () => ((await get()).status === DeploymentStatus.READY ? true : undefined), 30_000);
  expect(await answers((await rpc.resolveDeployment({ deploymentId })).upstreamUrl)).toBe(true);
}, 300_000);
