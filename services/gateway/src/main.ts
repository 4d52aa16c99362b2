/**
 * Runs the gateway on its own (one Deployment per service in Kubernetes).
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadGatewayConfig } from './env.js';
import { start } from './index.js';

const config = loadGatewayConfig();
const logger = createLogger({ name: 'gateway', level: config.logLevel });
const gateway = await start(config, logger);
shutdownOnSignals(logger, () => gateway.close());
