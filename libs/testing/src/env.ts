/**
 * Where the servers started by the jest global setup are. Global setup writes these variables;
 * test workers inherit them. This file is the only reader of process.env in this package.
 */
export const TEST_ENV = {
  postgresUrl: 'BERTH_TEST_POSTGRES_URL',
  redisUrl: 'BERTH_TEST_REDIS_URL',
  s3Endpoint: 'BERTH_TEST_S3_ENDPOINT',
  tmpDir: 'BERTH_TEST_TMP_DIR',
  /** JSON of `TestSandbox` (sandbox-image.ts): the Podman engine and the test registries and images. */
  sandbox: 'BERTH_TEST_SANDBOX',
  /** The tier (test-tiers.mjs) of the test file running in this environment; set by tier-guard.ts. */
  tier: 'BERTH_TEST_TIER',
} as const;

type TestEnvName = keyof typeof TEST_ENV;

const WHAT: Record<TestEnvName, string> = {
  postgresUrl: 'Postgres',
  redisUrl: 'Redis',
  s3Endpoint: 'S3',
  tmpDir: 'a test folder (any tier but unit has one)',
  sandbox: 'the sandbox engine',
  tier: 'a tier',
};

export function testEnv(name: TestEnvName): string {
  const value = process.env[TEST_ENV[name]];
  if (value) return value;
  const tier = process.env[TEST_ENV.tier];
  if (tier) {
    throw new Error(
      `this test file is in the ${tier} tier (test-tiers.mjs), which does not start ${WHAT[name]}: ` +
        'move it to a tier that does (libs/testing/src/tiers.ts says what each starts; docs/contribute/testing.md)',
    );
  }
  throw new Error(`${TEST_ENV[name]} is not set: run tests with jest from the repository root (its global setup starts the servers)`);
}

/**
 * Makes this test file's environment hold only what its tier provides: a file reaches the same
 * servers whether its tier runs alone or with the others (whose global setup started more).
 */
export function restrictTestEnv(tier: string, provided: readonly TestEnvName[]): void {
  for (const name of Object.keys(TEST_ENV) as TestEnvName[]) {
    if (!provided.includes(name)) delete process.env[TEST_ENV[name]];
  }
  process.env[TEST_ENV.tier] = tier;
}
