/**
 * Runs the gateway on its own (one Deployment per service in Kubernetes).
 */
import { createLogger } from '@berth/log';
import { loadGatewayConfig } from './env.js';
import { start } from './index.js';

const config = loadGatewayConfig();
const logger = createLogger({ name: 'gateway', level: config.logLevel });
const gateway = await start(config, logger);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'shutting down');
    void gateway.close().then(() => process.exit(0));
  });
}
