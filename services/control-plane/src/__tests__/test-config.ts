/**
 * The control plane config of tests: loopback gRPC on any free port, silent, deployments on, built
 * into `artifactsDir`, with only PATH and HOME passed to builds and agent servers; local agent
 * servers in containers on the tests' Podman engine (as `berth up` runs them as root), their uids
 * claimed in this test run's own registry.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { testEnv, testSandbox } from '@berth/testing';
import type { ControlPlaneConfig, DeploymentsConfig } from '../config.js';
import { SecretBox } from '@berth/secret-box';

export function testControlPlaneConfig(databaseUrl: string, artifactsDir: string, deployments: Partial<DeploymentsConfig> = {}): ControlPlaneConfig {
  return {
    grpcHost: '127.0.0.1',
    grpcPort: 0,
    logLevel: 'silent',
    databaseUrl,
    deployments: {
      secretKey: SecretBox.generateKey(),
      artifactsDir,
      processEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? tmpdir() },
      agentServeScript: AGENT_SERVE_SCRIPT,
      agentLogLevel: 'warn',
      agentEngine: testSandbox().podman,
      uidRegistryDir: join(testEnv('tmpDir'), 'uids'),
      ...deployments,
    },
  };
}
