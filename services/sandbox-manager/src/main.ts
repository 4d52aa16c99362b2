/**
 * Runs the sandbox-manager on its own (one Deployment per service in Kubernetes).
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadSandboxManagerConfig } from './env.js';
import { start } from './index.js';

const config = loadSandboxManagerConfig();
const logger = createLogger({ name: 'sandbox-manager', level: config.logLevel });
const service = await start(config, logger);
shutdownOnSignals(logger, () => service.close());
