/**
 * A control plane in its own process, for the restart test: node --conditions=berth-source
 * --import tsx control-plane-process.ts <databaseUrl> <artifactsDir> <secretKey>. Prints
 * "ready <grpc address>" once it serves; stops (with its agent servers) on SIGTERM.
 */
import { silentLogger } from '@berth/log';
import { start } from '../index.js';
import { testControlPlaneConfig } from './test-config.js';

const [databaseUrl, artifactsDir, secretKey] = process.argv.slice(2);
const plane = await start(
  // Short job lock and stall checks, so a step of a killed control plane is resumed within seconds.
  testControlPlaneConfig(databaseUrl!, artifactsDir!, { secretKey: secretKey!, pipeline: { lockDurationMs: 2000, stalledIntervalMs: 1000 } }),
  silentLogger(),
);
process.stdout.write(`ready ${plane.address}\n`);
process.once('SIGTERM', () => void plane.close().then(() => process.exit(0)));
