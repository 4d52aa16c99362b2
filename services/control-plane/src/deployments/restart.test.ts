/**
 * A control plane killed (kill -9) in the middle of a build: another one resumes the revision's
 * step and deploys it. Both are real processes on one Postgres.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeploymentService, RevisionStatus } from '@berth/proto';
import { createRpcClient } from '@berth/rpc';
import { createTestDatabase, spawnTestChild, type TestChild, type TestDatabase } from '@berth/testing';
import { echoProject } from '../build/__tests__/tarballs.js';
import { revisionLifecycle, revisionStatusWire } from './revision-lifecycle.js';
import { SecretBox } from '@berth/secret-box';
import { until } from '../__tests__/until.js';

const script = fileURLToPath(new URL('../__tests__/control-plane-process.ts', import.meta.url));
const tarball = echoProject();

let db: TestDatabase;
let work: string;
const key = SecretBox.generateKey();
const children: TestChild[] = [];

beforeAll(async () => {
  db = await createTestDatabase('cp_restart');
  work = await mkdtemp(join(tmpdir(), 'berth-restart-test-'));
  // As `berth up` keeps its state folder: deployments' OS users (as root) pass through to theirs.
  await chmod(work, 0o711);
});
afterAll(async () => {
  for (const child of children) await child.stop();
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

/** Starts a control plane process; resolves with its gRPC address once it serves. */
async function controlPlane(): Promise<TestChild & { address: string }> {
  const started = spawnTestChild(process.execPath, ['--conditions=berth-source', '--import', 'tsx', script, db.url, join(work, 'artifacts'), key], {
    env: process.env,
    stderr: 'inherit',
  });
  children.push(started);
  const [, address] = await started.waitForOutput(/ready (\S+)/);
  return { ...started, address: address! };
}

it('resumes a build whose control plane was killed, and deploys the revision', async () => {
  const tenantId = randomUUID();
  const a = await controlPlane();
  const clientA = createRpcClient(DeploymentService, a.address);
  const { deployment } = await clientA.createDeployment({ tenantId, name: 'resume', source: 'internal_source', sourceRevisionConfig: {} });
  const deploymentId = deployment!.id;
  const revisionId = deployment!.latestRevisionId;
  await clientA.uploadSource({ tenantId, deploymentId, data: tarball, last: true });
  // Kill it once the dependency install is under way.
  await until(
    'the install to start',
    async () => {
      const { logs } = await clientA.getRevisionLogs({ tenantId, deploymentId, revisionId, type: 'build', limit: 1000 });
      return logs.some((l) => /npm/.test(l.message)) ? true : undefined;
    },
    60_000,
  );
  a.child.kill('SIGKILL');
  await a.stop();
  clientA.close();

  const b = await controlPlane();
  const clientB = createRpcClient(DeploymentService, b.address);
  try {
    expect((await clientB.getRevision({ tenantId, deploymentId, revisionId })).revision!.status).toBe(RevisionStatus.BUILDING);
    const status = await until(
      'the revision to settle',
      async () => {
        const { revision } = await clientB.getRevision({ tenantId, deploymentId, revisionId });
        return revisionLifecycle.isTerminal(revisionStatusWire.decode(revision!.status)!) ? revision!.status : undefined;
      },
      120_000,
    );
    expect(status).toBe(RevisionStatus.DEPLOYED);
    const { logs } = await clientB.getRevisionLogs({ tenantId, deploymentId, revisionId, type: 'build', limit: 1000 });
    expect(logs.filter((l) => l.message.startsWith('building ')).length).toBe(2);
    const { upstreamUrl, upstreamCredential } = await clientB.resolveDeployment({ deploymentId });
    const response = await fetch(`${upstreamUrl}/runs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-berth-deployment-credential': upstreamCredential },
      body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'back' }] } }),
    });
    expect(((await response.json()) as { messages: { content: string }[] }).messages.at(-1)!.content).toBe('echo: back');
  } finally {
    clientB.close();
  }
}, 180_000);
