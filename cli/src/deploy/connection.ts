/**
 * Which gateway and credential the deploy commands use. First match wins:
 * - host: `--host`, BERTH_HOST_URL (environment, then the project's `.env`), the host of
 *   `berth login`, the platform `berth up` started here, else http://127.0.0.1:8080;
 * - key: `--api-key`, BERTH_API_KEY (environment, then `.env`), the `berth login` token (for its
 *   own host only), the key `berth up` wrote.
 * Failures come out as messages that say what to check.
 */
import { CliError, GatewayClient, GatewayHttpError, GatewayUnreachableError } from '../client.js';
import { gatewayClient } from '../connection.js';
import type { CliEnv } from '../env.js';
import { LoginFile, normalizeHost } from '../login-credentials.js';
import { StateDir } from '../state.js';

export const DEFAULT_HOST = 'http://127.0.0.1:8080';

export interface DeployConnectionFlags {
  host?: string;
  apiKey?: string;
}

export async function deployClient(env: CliEnv, flags: DeployConnectionFlags, projectEnv: Record<string, string>): Promise<GatewayClient> {
  const state = new StateDir(env.stateDir);
  const given =
    flags.host ??
    env.BERTH_HOST_URL ??
    projectEnv.BERTH_HOST_URL ??
    (await new LoginFile(env.loginFile).read())?.host ??
    (await state.readCredentials())?.gateway_url ??
    (await state.readPlatform())?.url ??
    DEFAULT_HOST;
  const url = normalizeHost(given);
  if (!url) throw new CliError(`--host must be an http(s) URL such as ${DEFAULT_HOST}, not ${JSON.stringify(given)}`);
  const apiKey = flags.apiKey ?? env.BERTH_API_KEY ?? projectEnv.BERTH_API_KEY;
  return gatewayClient(env, { url, ...(apiKey ? { apiKey } : {}) });
}

/** A clearer message for the failures a person can fix: a refused credential, an unreachable host. */
export function explain(error: unknown, client: GatewayClient): unknown {
  if (error instanceof GatewayUnreachableError) {
    return new CliError(`cannot reach Berth at ${client.url}${error.why}: check --host / BERTH_HOST_URL, or start the platform with \`berth up\``, {
      cause: error,
    });
  }
  if (error instanceof GatewayHttpError && (error.status === 401 || error.status === 403)) {
    const what = client.credential === 'token' ? 'the `berth login` token' : 'the API key';
    return new CliError(
      `${client.url} refused ${what} (${error.status}: ${error.detail}): check --api-key or BERTH_API_KEY (environment or the project's .env), or run \`berth login\``,
      { cause: error },
    );
  }
  return error;
}
