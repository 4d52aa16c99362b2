/**
 * An agent server (API + workers) in its own process, for the kill -9 tests: node
 * --conditions=berth-source --import tsx worker-process.ts <configPath> <databaseUrl> [workers].
 * Prints "ready <url>" once it takes runs.
 */
import { silentLogger } from '@berth/log';
import { startAgentServer } from '../server.js';

const [configPath, databaseUrl, workers = '2'] = process.argv.slice(2);
const server = await startAgentServer(
  { configPath: configPath!, databaseUrl: databaseUrl!, host: '127.0.0.1', port: 0, workers: Number(workers), leaseMs: 1000 },
  silentLogger(),
);
process.stdout.write(`ready ${server.url}\n`);
