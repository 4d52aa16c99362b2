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
} as const;

export function testEnv(name: keyof typeof TEST_ENV): string {
  const value = process.env[TEST_ENV[name]];
  if (!value) {
    throw new Error(`${TEST_ENV[name]} is not set: run tests with jest from the repository root (its global setup starts the servers)`);
  }
  return value;
}
