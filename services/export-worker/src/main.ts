/**
 * Runs the export-worker on its own (one Deployment per service in Kubernetes).
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadExportWorkerConfig } from './env.js';
import { start } from './index.js';

const config = loadExportWorkerConfig();
const logger = createLogger({ name: 'export-worker', level: config.logLevel });
const service = await start(config, logger);
shutdownOnSignals(logger, () => service.close());
