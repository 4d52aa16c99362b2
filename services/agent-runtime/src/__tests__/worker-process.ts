/**
 * A worker-only agent server in its own process, for the kill -9 test: node --conditions=berth-source
 * --import tsx worker-process.ts <configPath> <databaseUrl>. Prints "ready" once it takes runs.
 */
import { silentLogger } from '@berth/log';
import { startAgentServer } from '../server.js';

const [configPath, databaseUrl] = process.argv.slice(2);
await startAgentServer({ configPath: configPath!, databaseUrl: databaseUrl!, host: '127.0.0.1', port: 0, workers: 2, leaseMs: 1000 }, silentLogger());
process.stdout.write('ready\n');
