/**
 * Runs the sandbox-manager on its own (one Deployment per service in Kubernetes).
 */
import { createLogger } from '@berth/log';
import { loadSandboxManagerConfig } from './env.js';
import { start } from './index.js';

const config = loadSandboxManagerConfig();
const logger = createLogger({ name: 'sandbox-manager', level: config.logLevel });
const service = await start(config, logger);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'shutting down');
    void service.close().then(() => process.exit(0));
  });
}
