/**
 * The container driver against the private Podman engine of the test run (jest global setup),
 * with images pulled from the test registries: the driver contract, then what only containers do.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import Dockerode from 'dockerode';
import { captureLogger, testSandbox } from '@berth/testing';
import { contractSpec, driverContract, runIn } from '../contract.js';
import { ImagePullError, InstanceError, type EgressPolicy } from '../driver.js';
import { ContainerDriver, type AuthProxy } from './container-driver.js';

const sandbox = testSandbox();
const image = { reference: sandbox.image, insecureRegistries: [sandbox.registry] };

async function makeDriver(options: { proxy?: AuthProxy; storageQuota?: 'enforce' | 'ignore'; socketPath?: string } = {}) {
  const runDir = await mkdtemp(join(sandbox.tmpDir, 'run-'));
  const logs = captureLogger('container-driver');
  const driver = new ContainerDriver({ socketPath: sandbox.socketPath, runDir, logger: logs.logger, ...options });
  return { driver, runDir, logs };
}

driverContract(
  'container',
  async () => ({
    driver: (await makeDriver()).driver,
    image,
    missingImage: { reference: `${sandbox.registry}/berth-test/no-such-image:1`, insecureRegistries: [sandbox.registry] },
  }),
  { memoryLimit: true, isolation: true, stopStart: true },
);
