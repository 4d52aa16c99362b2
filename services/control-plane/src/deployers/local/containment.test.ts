/**
 * Agent servers in containers stay within their limits and leave nothing behind: a graph that takes
 * more memory than its deployment's limit is killed, and its server restarts and says why; a
 * control plane killed with SIGKILL leaves its containers behind, which the next one removes when it
 * starts; and containers that no running revision owns are removed while it runs.
 */
import { afterAll, afterEach, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { silentLogger } from '@berth/log';
import { createTestDatabase, spawnTestChild, testEnv, type TestDatabase } from '@berth/testing';
import { collectLog } from '../contract.js';
import type { RevisionHealthEvent, RevisionSpec } from '../deployer.js';
import { agentSocketsDir } from './agent-containers.js';
import { containerDeployer, installationContainers, testPodman } from './__tests__/containers.js';
import { oneGraph, projectMaker } from './__tests__/projects.js';
import type { LocalDeployer } from './local-deployer.js';
import { answers, until } from '../../__tests__/until.js';

const deployerScript = fileURLToPath(new URL('./__tests__/deployer-process.ts', import.meta.url));

/** Serves; a run of it takes memory until something stops it. */
const HOG_GRAPH = `
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
const hog: Buffer[] = [];
export const graph = new StateGraph(State)
  .addNode('hog', async () => {
    for (;;) {
      hog.push(Buffer.alloc(16 * 1024 * 1024, 1));
      await new Promise((resolve) => setImmediate(resolve));
    }
  })
  .addEdge('__start__', 'hog')
  .compile();
`;
const IDLE_GRAPH = `
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
export const graph = new StateGraph(State).addNode('noop', () => ({})).addEdge('__start__', 'noop').compile();
`;

let db: TestDatabase;
let work: string;
let project: ReturnType<typeof projectMaker>;
const deployers: LocalDeployer[] = [];

beforeAll(async () => {
  db = await createTestDatabase('cp_containment');
  work = await mkdtemp(join(testEnv('tmpDir'), 'containment-'));
  project = projectMaker(join(work, 'projects'));
});
afterEach(async () => {
  await Promise.all(deployers.splice(0).map((d) => d.close()));
});
afterAll(async () => {
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

async function spec(files: Record<string, string>, resources: RevisionSpec['resources'] = { replicas: 1 }): Promise<RevisionSpec> {
  const deploymentId = randomUUID();
  return {
    deploymentId,
    revisionId: randomUUID(),
    tenantId: randomUUID(),
    name: `contained-${deploymentId.slice(0, 8)}`,
    deploymentType: 'dev',
    artifact: await project(files),
    secrets: {},
    env: { DATABASE_URL: db.url, BERTH_AGENT_SCHEMA: `agent_${deploymentId.replace(/-/g, '')}`, LOG_LEVEL: 'warn' },
    resources,
  };
}

it('kills a graph that takes more than its memory limit, and restarts its server saying why', async () => {
  const { deployer } = await containerDeployer(join(work, 'memory'), silentLogger(), { restart: { initialDelayMs: 200 } });
  deployers.push(deployer);
  const events: RevisionHealthEvent[] = [];
  deployer.onHealth((event) => events.push(event));
  const revision = await spec(oneGraph(HOG_GRAPH), { replicas: 1, memoryMb: 256 });
  const log = collectLog();
  const { url } = await deployer.deploy(revision, log.log);
  expect(log.text()).toContain('256 MiB');
  // Its run never ends by itself: the kernel ends it.
  void fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ assistant_id: 'agent', input: { messages: [] } }),
  }).catch(() => undefined);
  const down = await until('the memory kill', () => events.find((e) => !e.healthy), 60_000);
  expect(down).toMatchObject({ healthy: false, reason: expect.stringMatching(/^the agent server exited with code 137; restarting in/) });
  await until('the reason in the deploy log', () => (/killed.*memory limit \(256 MiB\)/.test(log.text()) ? true : undefined), 10_000);
  const up = await until('the restart', () => events.find((e) => e.healthy), 30_000);
  expect(up).toMatchObject({ healthy: true, url });
  expect(await answers(url)).toBe(true);
}, 120_000);

it('removes, when it starts, the containers a control plane killed with SIGKILL left behind', async () => {
  const root = join(work, 'killed');
  const artifact = await project(oneGraph(IDLE_GRAPH));
  const first = spawnTestChild(process.execPath, ['--conditions=berth-source', '--import', 'tsx', deployerScript, root, artifact.path, db.url], {
    env: process.env,
  });
  const [, revisionId, url] = await first.waitForOutput(/deployed (\S+) (\S+)/);
  expect(await answers(url!)).toBe(true);
  first.child.kill('SIGKILL');
  await first.stop();
  const { deployer, installation } = await containerDeployer(root, silentLogger());
  deployers.push(deployer);
  // Its container is still there (its agent server may have stopped with its stdin, not gone).
  expect(await installationContainers(installation)).toEqual([`berth-agent-${revisionId}`]);
  expect(existsSync(join(agentSocketsDir(installation), revisionId!))).toBe(true);

  await deployer.start();
  expect(await installationContainers(installation)).toEqual([]);
  expect(existsSync(join(agentSocketsDir(installation), revisionId!))).toBe(false);
  expect(await answers(url!)).toBe(false);
}, 120_000);

it('removes containers that no running revision owns while it runs, and keeps its own', async () => {
  const { deployer, installation } = await containerDeployer(join(work, 'periodic'), silentLogger(), { reconcileIntervalMs: 200 });
  deployers.push(deployer);
  await deployer.start();
  const own = await spec(oneGraph(IDLE_GRAPH));
  const { url } = await deployer.deploy(own, collectLog().log);
  // What a failed cleanup would leave: a container of this installation for a revision nobody runs.
  const stray = `berth-agent-${randomUUID()}`;
  const image = (await testPodman().run(['inspect', '--format', '{{.ImageName}}', `berth-agent-${own.revisionId}`])).trim();
  await testPodman().run([
    'run',
    '--detach',
    '--name',
    stray,
    '--network',
    'none',
    '--label',
    `berth.installation=${installation}`,
    '--label',
    `berth.revision=${stray.slice('berth-agent-'.length)}`,
    '--mount',
    'type=bind,source=/usr,destination=/usr,readonly=true',
    image,
    '/usr/bin/sleep',
    '600',
  ]);
  await until('the stray container to go', async () => ((await installationContainers(installation)).includes(stray) ? undefined : true), 20_000);
  expect(await installationContainers(installation)).toEqual([`berth-agent-${own.revisionId}`]);
  expect(await answers(url)).toBe(true);
  // Stopped, it leaves nothing: no container, no socket folder.
  await deployer.close();
  expect(await installationContainers(installation)).toEqual([]);
  expect(existsSync(agentSocketsDir(installation))).toBe(false);
}, 120_000);
