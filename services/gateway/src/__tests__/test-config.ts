/**
 * The gateway config of tests: loopback, any free port, silent, queue checks on the test Redis,
 * the control plane (real or fake) at `controlPlane`.
 */
import { testRedisUrl } from '@berth/testing';
import type { GatewayConfig } from '../config.js';

export function testGatewayConfig(databaseUrl: string, controlPlane: string): GatewayConfig {
  return {
    databaseUrl,
    host: '127.0.0.1',
    port: 0,
    logLevel: 'silent',
    queue: { kind: 'redis', url: testRedisUrl() },
    services: { 'control-plane': controlPlane },
  };
}
