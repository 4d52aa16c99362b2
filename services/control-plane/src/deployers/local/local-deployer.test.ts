/**
 * The local deployer passes the deployer contract with real agent server processes (built
 * agent-runtime) on real Postgres. Projects are folders whose node_modules is the repository's.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { createTestDatabase } from '@berth/testing';
import { deployerContract } from '../contract.js';
import type { RevisionArtifact } from '../deployer.js';
import { LocalDeployer } from './local-deployer.js';

const repoModules = fileURLToPath(new URL('../../../../../node_modules', import.meta.url));
const GOOD_GRAPH = `
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
export const graph = new StateGraph(State).addNode('noop', () => ({})).addEdge('__start__', 'noop').compile();
`;
const FAILING_REASON = 'boom: CONTRACT_API_KEY is not set';

deployerContract('local (child processes)', async () => {
  const db = await createTestDatabase('cp_local');
  const work = await mkdtemp(join(tmpdir(), 'berth-local-deployer-'));
  let count = 0;
  const projectWith = async (graph: string): Promise<RevisionArtifact> => {
    const dir = join(work, `project-${(count += 1)}`);
    await mkdir(join(dir, 'src'), { recursive: true });
    await writeFile(join(dir, 'package.json'), JSON.stringify({ name: `p${count}`, type: 'module' }));
    await writeFile(join(dir, 'langgraph.json'), JSON.stringify({ graphs: { agent: './src/graph.ts:graph' } }));
    await writeFile(join(dir, 'src/graph.ts'), graph);
    await symlink(repoModules, join(dir, 'node_modules'));
    return { kind: 'directory', path: dir, configPath: 'langgraph.json' };
  };
  const deployer = new LocalDeployer({ serveScript: AGENT_SERVE_SCRIPT, baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, healthTimeoutMs: 20_000, drainMs: 5_000 });
  const answers = async (url: string) => fetch(`${url}/ok`).then((r) => r.ok, () => false);
  return {
    deployer,
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
