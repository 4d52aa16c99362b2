/**
 * Test support: the deployer contract's harness for the local deployer, on real Postgres with real
 * agent servers (built agent-runtime); projects are folders whose node_modules is the repository's.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase } from '@berth/testing';
import type { DeployerHarness } from '../../contract.js';
import type { LocalDeployer } from '../local-deployer.js';
import { oneGraph, projectMaker } from './projects.js';

const GOOD_GRAPH = `
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
export const graph = new StateGraph(State).addNode('noop', () => ({})).addEdge('__start__', 'noop').compile();
`;
const FAILING_REASON = 'boom: CONTRACT_API_KEY is not set';

/**
 * @param newDeployer makes the deployer under test, and the one a restarted control plane makes
 * @param leftOver whether anything else of the deployment is left on the target besides running servers
 */
export async function localHarness(
  name: string,
  newDeployer: () => LocalDeployer | Promise<LocalDeployer>,
  leftOver: (deploymentId: string) => Promise<boolean> = async () => false,
): Promise<DeployerHarness> {
  const db = await createTestDatabase(name);
  const work = await mkdtemp(join(tmpdir(), 'berth-local-deployer-'));
  const project = projectMaker(work);
  const projectWith = (graph: string) => project(oneGraph(graph));
  const deployer = await newDeployer();
  const answers = async (url: string) =>
    fetch(`${url}/ok`).then(
      (r) => r.ok,
      () => false,
    );
  return {
    deployer,
    reopen: newDeployer,
    goodArtifact: () => projectWith(GOOD_GRAPH),
    failingArtifact: async () => ({ artifact: await projectWith(`throw new Error(${JSON.stringify(FAILING_REASON)});\n`), reason: FAILING_REASON }),
    // Loads forever: the server never listens.
    slowArtifact: () => projectWith('setInterval(() => undefined, 1000);\nawait new Promise(() => undefined);\nexport const graph = undefined;\n'),
    runningRevisions: async (deploymentId) => deployer.running(deploymentId),
    exists: async (deploymentId) => deployer.running(deploymentId).length > 0 || (await leftOver(deploymentId)),
    answers,
    env: { DATABASE_URL: db.url, BERTH_AGENT_SCHEMA: 'agent_contract', LOG_LEVEL: 'warn' },
    deployTimeoutMs: 30_000,
    teardown: async () => {
      await db.drop();
      await rm(work, { recursive: true, force: true });
    },
  };
}
