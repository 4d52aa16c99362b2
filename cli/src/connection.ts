/**
 * Which gateway and credential a command uses: the one place that decides. First match wins.
 * - URL: `--url` (or its alias `--host`), BERTH_HOST_URL from the environment, then from the
 *   project's `.env` (deploy commands), the host of `berth login`, the platform `berth up` started
 *   here (`.berth/credentials.json`, `.berth/platform.json`) or else in the checkout this CLI runs
 *   from, else http://127.0.0.1:8080.
 * - Credential: `--api-key`, BERTH_API_KEY (environment, then the project's `.env`), the token of
 *   `berth login`, the key `berth up` wrote. A stored credential goes only to its own gateway.
 */
import { CliError, GatewayClient } from './client.js';
import type { CliEnv } from './env.js';
import { LoginFile, normalizeHost, sameHost } from './login-credentials.js';
import { StateDir } from './state.js';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The state folder of the platform `berth up` started: this folder's, else the CLI's checkout's. */
export async function localPlatform(env: CliEnv): Promise<StateDir> {
  const here = new StateDir(env.stateDir);
  if (!env.checkoutStateDir || (await here.readCredentials()) || (await here.readPlatform())) return here;
  const checkout = new StateDir(env.checkoutStateDir);
  return (await checkout.readCredentials()) ? checkout : here;
}

/** The connection flags of every command that calls a gateway (defined once, in index.ts). */
export interface ConnectionFlags {
  url?: string;
  /** Alias of `url`. */
  host?: string;
  apiKey?: string;
  /** Sent as X-Tenant-Id (keys commands: also the tenant acted on). */
  tenant?: string;
}

/** Variables of a project's `.env` (deploy commands read BERTH_HOST_URL / BERTH_API_KEY there). */
export type ProjectEnv = Record<string, string | undefined>;

/** The gateway URL, normalised (`localhost:8080` → `http://localhost:8080`). */
export async function gatewayUrl(env: CliEnv, flags: Pick<ConnectionFlags, 'url' | 'host'>, projectEnv: ProjectEnv = {}): Promise<string> {
  const explicit = (
    [
      [flags.url, '--url'],
      [flags.host, '--host'],
      [env.BERTH_HOST_URL, 'BERTH_HOST_URL'],
      [projectEnv.BERTH_HOST_URL, 'BERTH_HOST_URL in .env'],
    ] as const
  ).find(([value]) => value !== undefined);
  const state = await localPlatform(env);
  const given =
    explicit?.[0] ??
    (await new LoginFile(env.loginFile).read())?.host ??
    (await state.readCredentials())?.gateway_url ??
    (await state.readPlatform())?.url ??
    DEFAULT_URL;
  const url = normalizeHost(given);
  if (!url) throw new CliError(`${explicit?.[1] ?? 'the stored gateway URL'} must be an http(s) URL such as ${DEFAULT_URL}, not ${JSON.stringify(given)}`);
  return url;
}

export async function gatewayClient(env: CliEnv, flags: ConnectionFlags, projectEnv: ProjectEnv = {}): Promise<GatewayClient> {
  const url = await gatewayUrl(env, flags, projectEnv);
  const apiKey = flags.apiKey ?? env.BERTH_API_KEY ?? projectEnv.BERTH_API_KEY;
  const explicitTenant = flags.tenant ?? env.BERTH_TENANT_ID;
  const tenant = (tenantId: string | undefined) => (tenantId ? { tenantId } : {});
  if (apiKey) return new GatewayClient({ url, apiKey, ...tenant(explicitTenant) });
  const login = await new LoginFile(env.loginFile).read();
  if (login && sameHost(login.host, url)) return new GatewayClient({ url, token: login.token, ...tenant(explicitTenant ?? login.tenant_id) });
  const state = await localPlatform(env);
  const stored = await state.readCredentials();
  if (stored?.api_key && sameHost(stored.gateway_url, url)) {
    return new GatewayClient({ url, apiKey: stored.api_key, ...tenant(explicitTenant ?? stored.tenant_id) });
  }
  throw new CliError(
    `no credentials for ${url}: pass --api-key or set BERTH_API_KEY, or run \`berth login\` (or \`berth up\`, which writes ${state.credentialsFile})`,
  );
}

/** The tenant a command acts on: the explicit one, else the tenant of the key. */
export async function targetTenant(client: GatewayClient, explicit: string | undefined): Promise<string> {
  if (explicit) return explicit;
  if (client.tenantId) return client.tenantId;
  return (await client.request<{ tenant_id: string }>('GET', '/v1/me')).tenant_id;
}
