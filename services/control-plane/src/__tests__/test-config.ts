/**
 * The control plane config of tests: loopback gRPC on any free port, silent, deployments on, built
 * into `artifactsDir`, with only PATH and HOME passed to builds and agent servers.
 */
import { tmpdir } from 'node:os';
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
      agentLogLevel: 'warn',
      ...deployments,
    },
  };
}
