/**
 * The sandbox-manager's limits and quotas from the environment: quantities as Kubernetes writes
 * them, unset ones left to the defaults, bad ones a ConfigError naming the variable.
 */
import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '@berth/config';
import { loadSandboxManagerConfig, sandboxLimitsFromEnv } from './env.js';

describe('sandbox limits from the environment', () => {
  it('reads quantities in their units, and leaves unset ones to the defaults', () => {
    expect(
      sandboxLimitsFromEnv({
        SANDBOX_DEFAULT_MEMORY: '512Mi',
        SANDBOX_DEFAULT_CPU: '500m',
        SANDBOX_MAX_CPU: '4',
        SANDBOX_MAX_STORAGE: '20Gi',
        SANDBOX_PIDS_LIMIT: '256',
        SANDBOX_TENANT_MAX_SANDBOXES: '10',
        SANDBOX_TENANT_MAX_MEMORY: '8Gi',
        SANDBOX_DEFAULT_STORAGE: '',
      }),
    ).toEqual({
      limits: { defaultMemoryBytes: 512 * 1024 ** 2, defaultCpuMillis: 500, maxCpuMillis: 4000, maxStorageBytes: 20 * 1024 ** 3, pidsLimit: 256 },
      quota: { sandboxes: 10, memoryBytes: 8 * 1024 ** 3 },
    });
    expect(sandboxLimitsFromEnv({})).toEqual({ limits: {}, quota: {} });
  });

  it('refuses what is not a positive quantity, naming the variable', () => {
    for (const [name, value] of [
      ['SANDBOX_MAX_MEMORY', '12 parsecs'],
      ['SANDBOX_DEFAULT_CPU', '0'],
      ['SANDBOX_TENANT_MAX_SANDBOXES', '-1'],
    ]) {
      const error = (() => {
        try {
          return sandboxLimitsFromEnv({ [name!]: value });
        } catch (caught) {
          return caught;
        }
      })();
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.join()).toContain(name);
    }
  });

  it('hands them to the config, with the storage quota mode of the container driver', () => {
    const config = loadSandboxManagerConfig({
      DATABASE_URL: 'postgres://x',
      BERTH_SECRET_KEY: 'k',
      SANDBOX_DRIVER: 'container',
      SANDBOX_STORAGE_QUOTA: 'ignore',
      SANDBOX_MAX_MEMORY: '2Gi',
    });
    expect(config.sandboxes).toMatchObject({ limits: { maxMemoryBytes: 2 * 1024 ** 3 }, quota: {}, driver: { kind: 'container', storageQuota: 'ignore' } });
  });
});
