/**
 * Runs the agent-runtime on its own (one Deployment per service in Kubernetes).
 */
import { createLogger } from '@berth/log';
import { loadAgentRuntimeConfig } from './env.js';
import { start } from './index.js';

const config = loadAgentRuntimeConfig();
const logger = createLogger({ name: 'agent-runtime', level: config.logLevel });
const service = await start(config, logger);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'shutting down');
    void service.close().then(() => process.exit(0));
  });
}
