/**
 * Runs the agent-runtime on its own (one Deployment per service in Kubernetes).
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadAgentRuntimeConfig } from './env.js';
import { start } from './index.js';

const config = loadAgentRuntimeConfig();
const logger = createLogger({ name: 'agent-runtime', level: config.logLevel });
const service = await start(config, logger);
shutdownOnSignals(logger, () => service.close());
