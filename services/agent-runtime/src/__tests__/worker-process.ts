/**
 * An agent server (API + workers) in its own process, for the kill -9 and multi-process tests:
 * node --conditions=berth-source --import tsx worker-process.ts <configPath> <databaseUrl> [workers] [config JSON].
 * The optional JSON holds more AgentServerConfig fields (schema, redisUrl). Prints "ready <url>" once it takes runs.
 */
import { silentLogger } from '@berth/log';
import { startAgentServer, type AgentServerConfig } from '../server.js';

const [configPath, databaseUrl, workers = '2', more = '{}'] = process.argv.slice(2);
const server = await startAgentServer(
  { configPath: configPath!, databaseUrl: databaseUrl!, host: '127.0.0.1', port: 0, workers: Number(workers), leaseMs: 1000, ...(JSON.parse(more) as Partial<AgentServerConfig>) },
  silentLogger(),
);
process.stdout.write(`ready ${server.url}\n`);
