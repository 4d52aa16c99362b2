/**
 * Runs the control-plane on its own (one Deployment per service in Kubernetes).
 */
import { createLogger } from '@berth/log';
import { loadControlPlaneConfig } from './env.js';
import { start } from './index.js';

const config = loadControlPlaneConfig();
const logger = createLogger({ name: 'control-plane', level: config.logLevel });
const service = await start(config, logger);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'shutting down');
    void service.close().then(() => process.exit(0));
  });
}
