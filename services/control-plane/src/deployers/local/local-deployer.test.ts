/**
 * The local deployer passes the deployer contract with its agent servers as child processes (as
 * where the platform has no container engine) and in containers (as root with one).
 */
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { silentLogger } from '@berth/log';
import { testEnv } from '@berth/testing';
import { deployerContract } from '../contract.js';
import { containerDeployer, testPodman } from './__tests__/containers.js';
import { localHarness } from './__tests__/contract-harness.js';
import { LocalDeployer } from './local-deployer.js';

deployerContract('local (child processes)', () =>
  localHarness(
    'cp_local',
    () =>
      new LocalDeployer({
        serveScript: AGENT_SERVE_SCRIPT,
        logger: silentLogger(),
        baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        healthTimeoutMs: 20_000,
        drainMs: 5_000,
      }),
  ),
);

deployerContract('local (containers)', async () => {
  const root = await mkdtemp(join(testEnv('tmpDir'), 'contract-'));
  return localHarness(
    'cp_local_containers',
    async () => (await containerDeployer(root, silentLogger())).deployer,
    // A removed deployment leaves no container behind, running or stopped.
    async (deploymentId) => (await testPodman().run(['ps', '--all', '--quiet', '--filter', `label=berth.deployment=${deploymentId}`])).trim() !== '',
  );
});
