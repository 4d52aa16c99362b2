/**
 * Which gateway and credential a command uses, first match wins:
 * 1. `--url` / `--api-key` flags, then BERTH_HOST_URL / BERTH_API_KEY / BERTH_TENANT_ID;
 * 2. the bearer token `berth login` stored (user config dir), for its own host only;
 * 3. the credentials `berth up` wrote (`.berth/credentials.json`).
 */
import { CliError, GatewayClient } from './client.js';
import type { CliEnv } from './env.js';
import { LoginFile, sameHost } from './login-credentials.js';
import { StateDir } from './state.js';

export interface ConnectionFlags {
  url?: string;
  apiKey?: string;
  tenant?: string;
}

export async function gatewayClient(env: CliEnv, flags: ConnectionFlags): Promise<GatewayClient> {
  const stored = await new StateDir(env.stateDir).readCredentials();
  const login = await new LoginFile(env.loginFile).read();
  const url = flags.url ?? env.BERTH_HOST_URL ?? login?.host ?? stored?.gateway_url;
  const explicitKey = flags.apiKey ?? env.BERTH_API_KEY;
  const explicitTenant = flags.tenant ?? env.BERTH_TENANT_ID;
  if (url && explicitKey) {
    return new GatewayClient({ url, apiKey: explicitKey, ...(explicitTenant ? { tenantId: explicitTenant } : {}) });
  }
  // A login token goes only to the host that issued it.
  if (url && login && sameHost(login.host, url)) {
    const tenantId = explicitTenant ?? login.tenant_id;
    return new GatewayClient({ url, token: login.token, ...(tenantId ? { tenantId } : {}) });
  }
  if (url && stored?.api_key) {
    const tenantId = explicitTenant ?? stored.tenant_id;
    return new GatewayClient({ url, apiKey: stored.api_key, ...(tenantId ? { tenantId } : {}) });
  }
  throw new CliError(
    `no credentials: run \`berth login\` or \`berth up\` (writes ${new StateDir(env.stateDir).credentialsFile}), or set BERTH_HOST_URL and BERTH_API_KEY`,
  );
}

/** The tenant a command acts on: the explicit one, else the tenant of the key. */
export async function targetTenant(client: GatewayClient, explicit: string | undefined): Promise<string> {
  if (explicit) return explicit;
  if (client.tenantId) return client.tenantId;
  return (await client.request<{ tenant_id: string }>('GET', '/v1/me')).tenant_id;
}
