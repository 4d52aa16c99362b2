/**
 * Which gateway and key a command uses: flags, then BERTH_HOST_URL / BERTH_API_KEY /
 * BERTH_TENANT_ID, then the credentials `berth up` wrote.
 */
import { CliError, GatewayClient } from './client.js';
import type { CliEnv } from './env.js';
import { StateDir } from './state.js';

export interface ConnectionFlags {
  url?: string;
  apiKey?: string;
  tenant?: string;
}

export async function gatewayClient(env: CliEnv, flags: ConnectionFlags): Promise<GatewayClient> {
  const stored = await new StateDir(env.stateDir).readCredentials();
  const url = flags.url ?? env.BERTH_HOST_URL ?? stored?.gateway_url;
  const apiKey = flags.apiKey ?? env.BERTH_API_KEY ?? stored?.api_key;
  if (!url || !apiKey) {
    throw new CliError(
      `no credentials: run \`berth up\` (writes ${new StateDir(env.stateDir).credentialsFile}) or set BERTH_HOST_URL and BERTH_API_KEY`,
    );
  }
  const fromStore = !flags.apiKey && !env.BERTH_API_KEY;
  const tenantId = flags.tenant ?? env.BERTH_TENANT_ID ?? (fromStore ? stored?.tenant_id : undefined);
  return new GatewayClient({ url, apiKey, ...(tenantId ? { tenantId } : {}) });
}

/** The tenant a command acts on: the explicit one, else the tenant of the key. */
export async function targetTenant(client: GatewayClient, explicit: string | undefined): Promise<string> {
  if (explicit) return explicit;
  if (client.tenantId) return client.tenantId;
  return (await client.request<{ tenant_id: string }>('GET', '/v1/me')).tenant_id;
}
