/**
 * The local deployer passes the deployer contract with real agent server processes (built
 * agent-runtime) on real Postgres. Projects are folders whose node_modules is the repository's.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { silentLogger } from '@berth/log';
import { createTestDatabase } from '@berth/testing';
import { deployerContract } from '../contract.js';
import { oneGraph, projectMaker } from './__tests__/projects.js';
import { LocalDeployer } from './local-deployer.js';

const GOOD_GRAPH = `
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
export const graph = new StateGraph(State).addNode('noop', () => ({})).addEdge('__start__', 'noop').compile();
`;
const FAILING_REASON = 'boom: CONTRACT_API_KEY is not set';

deployerContract('local (child processes)', async () => {
  const db = await createTestDatabase('cp_local');
  const work = await mkdtemp(join(tmpdir(), 'berth-local-deployer-'));
  const project = projectMaker(work);
  const projectWith = (graph: string) => project(oneGraph(graph));
  const newDeployer = () =>
    new LocalDeployer({ serveScript: AGENT_SERVE_SCRIPT, logger: silentLogger(), baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, healthTimeoutMs: 20_000, drainMs: 5_000 });
  const deployer = newDeployer();
  const answers = async (url: string) => fetch(`${url}/ok`).then((r) => r.ok, () => false);
  return {
    deployer,
    reopen: newDeployer,
    goodArtifact: () => projectWith(GOOD_GRAPH),
    failingArtifact: async () => ({ artifact: await projectWith(`throw new Error(${JSON.stringify(FAILING_REASON)});\n`), reason: FAILING_REASON }),
    // Loads forever: the server never listens.
    slowArtifact: () => projectWith('setInterval(() => undefined, 1000);\nawait new Promise(() => undefined);\nexport const graph = undefined;\n'),
    runningRevisions: async (deploymentId) => deployer.running(deploymentId),
    exists: async (deploymentId) => deployer.running(deploymentId).length > 0,
    answers,
    env: { DATABASE_URL: db.url, BERTH_AGENT_SCHEMA: 'agent_contract', LOG_LEVEL: 'warn' },
    deployTimeoutMs: 30_000,
    teardown: async () => {
      await db.drop();
      await rm(work, { recursive: true, force: true });
    },
  };
});
