/**
 * The whole platform as `berth up` starts it, for end-to-end tests: its own database, a temporary
 * folder (the platform's state lives in `<temp>/platform`) and the bootstrap tenant's admin key.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '@berth/log';
import { createTestDatabase, testSandbox, type TestDatabase } from '@berth/testing';
import { loadCliEnv } from '../env.js';
import { startPlatform, type RunningPlatform } from '../platform.js';
import type { PlatformSandboxConfig } from '../sandbox-engine.js';
import { bootstrapKey } from './bootstrap-key.js';

export interface TestPlatform {
  platform: RunningPlatform;
  testDb: TestDatabase;
  /** A temporary folder the test may use; removed by close(). */
  temp: string;
  /** The bootstrap tenant's admin API key. */
  adminKey: string;
  close(): Promise<void>;
}

export interface TestPlatformOptions {
  /** @default off */
  sandboxes?: PlatformSandboxConfig;
  /** The state folder's name under the temporary folder. @default 'platform' */
  stateDirName?: string;
  /** Settings the services read from the environment (PlatformConfig.serviceEnv). @default {} */
  serviceEnv?: Record<string, string>;
}

/**
 * The tests' Podman engine as the platform's (as `berth up` starts its own as root): sandboxes on,
 * and deployments' agent servers in containers there.
 */
export function testEngine(): PlatformSandboxConfig {
  const engine = testSandbox();
  return {
    engine: {
      socketPath: engine.socketPath,
      storageQuota: engine.storageQuota ? 'enforce' : 'ignore',
      defaultImage: engine.image,
      podmanCommand: engine.podman,
    },
  };
}

export async function startTestPlatform(name: string, options: TestPlatformOptions = {}): Promise<TestPlatform> {
  const testDb = await createTestDatabase(`cli_${name.replaceAll('-', '_')}`);
  const temp = await mkdtemp(join(tmpdir(), `berth-${name}-`));
  // As `berth up` keeps its state folder: the deployments' users (as root) pass through to their builds.
  await chmod(temp, 0o711);
  let platform: RunningPlatform | undefined;
  const close = async () => {
    await platform?.close();
    await testDb.drop();
    await rm(temp, { recursive: true, force: true });
  };
  try {
    platform = await startPlatform(
      {
        databaseUrl: testDb.url,
        host: '127.0.0.1',
        port: 0,
        logLevel: 'silent',
        stateDir: join(temp, options.stateDirName ?? 'platform'),
        processEnv: loadCliEnv().processEnv,
        ...(options.sandboxes ? { sandboxes: options.sandboxes } : {}),
        ...(options.serviceEnv ? { serviceEnv: options.serviceEnv } : {}),
      },
      silentLogger(),
    );
    return { platform, testDb, temp, adminKey: await bootstrapKey(testDb.url), close };
  } catch (error) {
    await close();
    throw error;
  }
}
