/**
 * Test support: local deployers whose agent servers run in containers on the tests' Podman engine,
 * as the control plane wires them as root (agent-containers.ts), with their uids claimed in a
 * registry of the test's own. An "installation" is a folder: deployers on the same one share its
 * containers' label (as a restarted control plane does).
 */
import { chmod, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import type { Logger } from '@berth/log';
import { testSandbox } from '@berth/testing';
import { AgentContainers, agentSocketsDir, installationId } from '../agent-containers.js';
import { LocalDeployer, type LocalDeployerOptions } from '../local-deployer.js';
import { OsUsers } from '../os-users.js';
import { Podman } from '../podman.js';

/** The podman CLI against the tests' engine. */
export const testPodman = (): Podman => new Podman(testSandbox().podman);

/** A deployer with containers on the installation at `root` (a folder others may traverse). */
export async function containerDeployer(
  root: string,
  logger: Logger,
  options: Partial<LocalDeployerOptions> & { privateEgress?: string[] } = {},
): Promise<{ deployer: LocalDeployer; installation: string; artifactsDir: string }> {
  await mkdir(root, { recursive: true });
  await chmod(root, 0o755);
  const artifactsDir = join(root, 'artifacts');
  const users = new OsUsers({ homesDir: join(root, 'agents'), artifactsDir, registryDir: join(root, 'uids') });
  const installation = installationId(root);
  const containers = new AgentContainers({
    podman: testSandbox().podman,
    installation,
    socketsDir: agentSocketsDir(installation),
    serveScript: AGENT_SERVE_SCRIPT,
    hidden: [root],
    privateEgress: options.privateEgress ?? [],
    logger,
  });
  const deployer = new LocalDeployer({
    serveScript: AGENT_SERVE_SCRIPT,
    logger,
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    healthTimeoutMs: 20_000,
    drainMs: 5_000,
    users,
    containers,
    ...options,
  });
  return { deployer, installation, artifactsDir };
}

/** Names of the installation's containers on the engine (running or not). */
export async function installationContainers(installation: string): Promise<string[]> {
  const out = await testPodman().run(['ps', '--all', '--filter', `label=berth.installation=${installation}`, '--format', '{{.Names}}']);
  return out.split('\n').filter(Boolean);
}
