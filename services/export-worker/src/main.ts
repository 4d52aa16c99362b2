/**
 * Runs the export-worker on its own (one Deployment per service in Kubernetes).
 */
import { createLogger } from '@berth/log';
import { loadExportWorkerConfig } from './env.js';
import { start } from './index.js';

const config = loadExportWorkerConfig();
const logger = createLogger({ name: 'export-worker', level: config.logLevel });
const service = await start(config, logger);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    logger.info({ signal }, 'shutting down');
    void service.close().then(() => process.exit(0));
  });
}
