/**
 * Jest `setupFiles` of every tier (jest.config.mjs): before each test file, hides the servers its
 * tier does not start, so that a file in too low a tier fails at once and by name, not only when
 * its tier happens to run alone.
 */
import { restrictTestEnv } from './env.js';
import { SERVER_ENV, tierServers } from './tiers.js';

declare global {
  /** The file's tier, from the jest project's `globals` (jest.config.mjs). */
  var berthTestTier: string | undefined;
}

const tier = globalThis.berthTestTier;
if (!tier) throw new Error('berthTestTier is not set: run tests through jest.config.mjs (one project per tier)');
const servers = tierServers(tier);
restrictTestEnv(tier, [...(servers.length ? (['tmpDir'] as const) : []), ...servers.flatMap((server) => SERVER_ENV[server] ?? [])]);
