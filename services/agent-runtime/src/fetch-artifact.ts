/**
 * The init container of a Kubernetes source revision: fetches the revision's built project from
 * the control plane, verifies its checksum and unpacks it where the agent server's container
 * serves it (see `artifact/fetch.ts`). Configured by environment (`loadArtifactFetchConfig`);
 * exits 1, saying why, when the artifact cannot be had, so the pod does not start.
 */
import { createLogger } from '@berth/log';
import { fetchArtifact } from './artifact/fetch.js';
import { loadArtifactFetchConfig } from './env.js';

const config = loadArtifactFetchConfig();
const logger = createLogger({ name: 'artifact-fetch', level: config.logLevel });
try {
  const { bytes } = await fetchArtifact({ ...config, log: (line) => logger.info(line) });
  logger.info({ bytes, dir: config.dir }, 'artifact ready');
} catch (error) {
  logger.error({ err: error }, (error as Error).message);
  process.exitCode = 1;
}
