/**
 * Runs the agent server of one deployed revision: what the control plane's deployers start (a
 * child process or a container on this machine, or the container of a Kubernetes Deployment). Configured by
 * environment (see `loadAgentServeConfig`); stops gracefully on SIGTERM, letting requests in
 * flight finish.
 */
import { createLogger, shutdownOnSignals } from '@berth/log';
import { loadAgentServeConfig } from './env.js';
import { openHostLinks, sendFetchThroughProxy } from './host-links.js';
import { startAgentServer } from './server.js';

const config = loadAgentServeConfig();
const logger = createLogger({ name: 'agent-server', level: config.logLevel });
// In a container: before graph code loads, so that its clients are made with the proxy in place.
if (config.egressProxy) sendFetchThroughProxy(config.egressProxy);
const links = await openHostLinks(config.hostLinks);
// A container's first process ignores signals it has no handler for: until it serves (and handles
// them by draining), a stop ends it as it ends any other process.
const stopEarly = () => process.exit(143);
process.once('SIGTERM', stopEarly).once('SIGINT', stopEarly);
const server = await startAgentServer(config.server, logger);
process.off('SIGTERM', stopEarly).off('SIGINT', stopEarly);
logger.info({ url: server.url }, 'agent server ready');
shutdownOnSignals(logger, async () => {
  await server.close();
  await links.close();
});
if (config.exitWithParent) {
  // The parent holds our stdin open while it lives; its end means the parent is gone.
  process.stdin.on('end', () => process.kill(process.pid, 'SIGTERM')).resume();
}
