/**
 * A local deployer with containers in a process of its own, for the test of what a control plane
 * killed with SIGKILL leaves: node --conditions=berth-source --import tsx deployer-process.ts
 * <installation folder> <project folder> <databaseUrl>. Deploys the project and prints
 * "deployed <revisionId> <url>", then serves until killed.
 */
import { randomUUID } from 'node:crypto';
import { silentLogger } from '@berth/log';
import { containerDeployer } from './containers.js';

const [root, project, databaseUrl] = process.argv.slice(2);
const { deployer } = await containerDeployer(root!, silentLogger());
const deploymentId = randomUUID();
const revisionId = randomUUID();
const { url } = await deployer.deploy(
  {
    deploymentId,
    revisionId,
    tenantId: randomUUID(),
    name: 'left-behind',
    deploymentType: 'dev',
    artifact: { kind: 'directory', path: project!, configPath: 'langgraph.json' },
    secrets: {},
    env: { DATABASE_URL: databaseUrl!, BERTH_AGENT_SCHEMA: 'agent_left', LOG_LEVEL: 'warn' },
    resources: { replicas: 1 },
  },
  () => undefined,
);
process.stdout.write(`deployed ${revisionId} ${url}\n`);
