/**
 * A gateway with a real agent server behind its deployment URL, for tests that drive both: the
 * gateway (fake DeploymentService for routing, Postgres for API keys) and the agent server of the
 * agent runtime's own tests (with `options.agent.deploymentCredential`, sent by the gateway as a
 * deployed one's), one tenant with an
 * API key, one deployment routed to the server, another tenant with a key of its own; a real
 * export-worker behind the trace routes.
 */
import { randomUUID } from 'node:crypto';
import { start as startExportWorker } from '@berth/export-worker';
import { silentLogger } from '@berth/log';
import type { AgentServerConfig } from '../../../agent-runtime/src/server.js';
import { startTestServer } from '../../../agent-runtime/src/__tests__/fixtures.js';
import { start, type GatewayConfig, type RunningGateway } from '../index.js';
import { FakeDeploymentService } from './fake-deployments.js';
import { testGatewayConfig } from './test-config.js';

export interface AgentStack {
  gateway: RunningGateway;
  agent: Awaited<ReturnType<typeof startTestServer>>;
  /** An admin API key of the tenant that owns the deployment. */
  key: string;
  tenantId: string;
  /** An admin API key of another tenant. */
  otherTenantKey: string;
  otherTenantId: string;
  deploymentId: string;
  fake: FakeDeploymentService;
  /** `{gateway}/d/{deploymentId}` */
  deploymentUrl: string;
  close(): Promise<void>;
}

/** Gateway and agent server on `databaseUrl` (their own schemas); the agent server runs one worker. */
export async function startAgentStack(
  databaseUrl: string,
  options: { agent?: Partial<AgentServerConfig>; gateway?: Partial<GatewayConfig> } = {},
): Promise<AgentStack> {
  const agentConfig = options.agent ?? {};
  const fake = await new FakeDeploymentService().start();
  const exportWorker = await startExportWorker(
    { databaseUrl, secretKey: Buffer.alloc(32, 1).toString('base64'), grpcHost: '127.0.0.1', grpcPort: 0, logLevel: 'silent' },
    silentLogger(),
  );
  const config = testGatewayConfig(databaseUrl, fake.address);
  const gateway = await start({ ...config, services: { ...config.services, 'export-worker': exportWorker.address }, ...options.gateway }, silentLogger());
  const agent = await startTestServer(databaseUrl, { workers: 1, ...agentConfig });
  const tenant = await gateway.store.createTenant({ name: 'stack' });
  const { key } = await gateway.store.createApiKey({ tenantId: tenant.id, name: 'stack', role: 'admin' });
  const other = await gateway.store.createTenant({ name: 'other' });
  const { key: otherTenantKey } = await gateway.store.createApiKey({ tenantId: other.id, name: 'other', role: 'admin' });
  const deploymentId = randomUUID();
  fake.routes.set(deploymentId, {
    tenantId: tenant.id,
    upstreamUrl: agent.url,
    customAuth: false,
    ...(agentConfig.deploymentCredential ? { upstreamCredential: agentConfig.deploymentCredential } : {}),
  });
  return {
    gateway,
    agent,
    key,
    tenantId: tenant.id,
    otherTenantKey,
    otherTenantId: other.id,
    deploymentId,
    fake,
    deploymentUrl: `${gateway.url}/d/${deploymentId}`,
    close: async () => {
      await gateway.close();
      await agent.close();
      await fake.close();
      await exportWorker.close();
    },
  };
}
