/**
 * An agent server (API + workers) in its own process, for the kill -9 and multi-process tests:
 * node --conditions=berth-source --import tsx worker-process.ts <configPath> <databaseUrl> [workers] [config JSON] [log level].
 * The optional JSON holds more AgentServerConfig fields (schema, redisUrl); with a log level its
 * log lines go to stdout (else it logs nothing). Prints "ready <url>" once it takes runs.
 */
import { createLogger, silentLogger } from '@berth/log';
import { startAgentServer, type AgentServerConfig } from '../server.js';

const [configPath, databaseUrl, workers = '2', more = '{}', level] = process.argv.slice(2);
const server = await startAgentServer(
  {
    configPath: configPath!,
    databaseUrl: databaseUrl!,
    host: '127.0.0.1',
    port: 0,
    workers: Number(workers),
    leaseMs: 1000,
    ...(JSON.parse(more) as Partial<AgentServerConfig>),
  },
  level ? createLogger({ name: 'worker-process', level }) : silentLogger(),
);
process.stdout.write(`ready ${server.url}\n`);
