/**
 * `berth login`: start a login flow on a gateway, print the approval link, wait (long-poll) until
 * someone approves it with an API key in a browser, and keep the bearer token it yields in the
 * user's config folder. `berth logout` forgets it.
 */
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError, GatewayClient } from '../client.js';
import { gatewayUrl, type ConnectionFlags } from '../connection.js';
import type { CliEnv } from '../env.js';
import { LoginFile, type LoginCredentials } from '../login-credentials.js';

type Print = (line: string) => void;

export interface LoginFlags extends Pick<ConnectionFlags, 'url' | 'host'> {
  /** Give up after this many seconds (checked by its flag parser; default: when the approval link expires). */
  timeout?: number;
}

interface LoginStarted {
  auth_id: string;
  url: string;
  expires_at: string;
}

interface WaitAnswer {
  status: 'completed' | 'pending' | 'timeout' | 'not_found';
  token: string | null;
}

interface Me {
  tenant_id: string;
  tenant_name: string;
  role: string;
}

/** Seconds per long-poll; the server allows up to 300, proxies often cut idle requests at 60. */
const POLL_SECONDS = 30;
/** Consecutive failed polls tolerated (a restarting gateway) before giving up. */
const MAX_POLL_FAILURES = 5;

export async function login(env: CliEnv, flags: LoginFlags, print: Print): Promise<LoginCredentials> {
  // The gateway to log in to: the URL every command resolves, without a credential.
  const host = await gatewayUrl(env, flags);
  const overallMs = flags.timeout !== undefined ? flags.timeout * 1000 : Infinity;
  const gateway = new GatewayClient({ url: host });
  const started = await gateway.request<LoginStarted>(
    'POST',
    '/v2/auth/login',
    { client_name: `berth CLI on ${hostname()}`.slice(0, 200) },
    { timeoutMs: 15_000 },
  );
  print('Open this link in a browser and approve with an API key of your tenant:');
  print('');
  print(`  ${started.url}`);
  print('');
  print(`Waiting for approval (the link expires at ${started.expires_at}; Ctrl-C to stop)...`);

  const deadline = Math.min(Date.parse(started.expires_at), Date.now() + overallMs);
  const token = await waitForToken(host, started.auth_id, deadline);
  const me = await new GatewayClient({ url: host, token }).request<Me>('GET', '/v1/me');
  const credentials: LoginCredentials = {
    host,
    token,
    tenant_id: me.tenant_id,
    tenant_name: me.tenant_name,
    role: me.role,
    created_at: new Date().toISOString(),
  };
  const file = new LoginFile(env.loginFile);
  await file.write(credentials);
  print(`Logged in to ${host} as tenant "${me.tenant_name}" (${me.tenant_id}, ${me.role}).`);
  print(`Token saved in ${file.path}; \`berth logout\` removes it.`);
  return credentials;
}

async function waitForToken(host: string, authId: string, deadline: number): Promise<string> {
  const gateway = new GatewayClient({ url: host });
  let failures = 0;
  for (;;) {
    const remaining = Math.ceil((deadline - Date.now()) / 1000);
    if (remaining <= 0) throw new CliError('the login was not approved in time; run `berth login` again');
    const timeout = Math.min(POLL_SECONDS, remaining);
    let answer: WaitAnswer;
    try {
      answer = await gateway.request<WaitAnswer>('GET', `/v2/auth/wait/${encodeURIComponent(authId)}?timeout=${timeout}`, undefined, {
        timeoutMs: (timeout + 30) * 1000,
      });
      failures = 0;
    } catch (error) {
      // A gateway restarting mid-wait: try again a few times before giving up.
      if (++failures >= MAX_POLL_FAILURES) throw error;
      await sleep(1000);
      continue;
    }
    switch (answer.status) {
      case 'completed':
        if (answer.token) return answer.token;
        throw new CliError('the login was approved, but its token was already collected by another client; run `berth login` again');
      case 'not_found':
        throw new CliError('the login link expired before it was approved; run `berth login` again');
      case 'pending':
        // The wait ended early (the server is restarting): do not spin.
        await sleep(1000);
        break;
      case 'timeout':
        break;
    }
  }
}

export async function logout(env: CliEnv, print: Print): Promise<boolean> {
  const file = new LoginFile(env.loginFile);
  const stored = await file.read();
  if (!(await file.remove())) {
    print('Not logged in.');
    return false;
  }
  print(`Logged out of ${stored!.host} (removed ${file.path}).`);
  return true;
}
