/**
 * What each test tier (test-tiers.mjs, one jest project each) starts before its files run. Jest
 * runs a project's global setup only when at least one of its files is selected, so a run of the
 * unit tier starts nothing and a run of integration files starts no sandbox engine.
 */
import { TEST_ENV } from './env.js';

/** A server (or tool) a tier's global setup provides. */
export type TestServer = 'postgres' | 'redis' | 's3' | 'sandbox' | 'chromium';

const DATA_STORES: TestServer[] = ['postgres', 'redis', 's3'];

export const TIER_SERVERS: Record<string, readonly TestServer[]> = {
  unit: [],
  integration: DATA_STORES,
  // The private Podman engine (root), two registries and the busybox images they hold.
  sandbox: [...DATA_STORES, 'sandbox'],
  browser: [...DATA_STORES, 'chromium'],
  // Chromium too: the console's pages against a real deploy (cli/src/console-deployment-e2e.test.ts).
  e2e: [...DATA_STORES, 'sandbox', 'chromium'],
  // The image tests start a Podman engine of their own (images/tests/images.ts).
  images: DATA_STORES,
};

/** The variable of @berth/testing's env.ts through which each server reaches the test files. */
export const SERVER_ENV: Partial<Record<TestServer, keyof typeof TEST_ENV>> = {
  postgres: 'postgresUrl',
  redis: 'redisUrl',
  s3: 's3Endpoint',
  sandbox: 'sandbox',
};

export class UnknownTierError extends Error {
  override name = 'UnknownTierError';
}

export function tierServers(tier: string): readonly TestServer[] {
  const servers = TIER_SERVERS[tier];
  if (!servers) throw new UnknownTierError(`test tier "${tier}" (test-tiers.mjs) is not in libs/testing/src/tiers.ts: say what it starts there`);
  return servers;
}
