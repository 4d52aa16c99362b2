/**
 * Runs the control-plane on its own (one Deployment per service in Kubernetes).
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadControlPlaneConfig } from './env.js';
import { start } from './index.js';

const config = loadControlPlaneConfig();
const logger = createLogger({ name: 'control-plane', level: config.logLevel });
const service = await start(config, logger);
shutdownOnSignals(logger, () => service.close());
