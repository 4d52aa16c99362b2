/**
 * Postgres goes away under a gateway and the agent server behind it: every
 * answer meanwhile is a 2xx/4xx or a 503 with Retry-After and a plain message (no hosts, SQL or
 * driver text), and both serve normally again once Postgres is back, without a restart.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, PostgresServer } from '@berth/local-stack';
import { testEnv, until } from '@berth/testing';
import { startAgentStack, type AgentStack } from './__tests__/agent-stack.js';

let dir: string;
let postgres: PostgresServer;
let stack: AgentStack;
let threadId: string;

interface Seen {
  name: string;
  status: number;
  retryAfter: string | null;
  text: string;
}

/** Text that would tell a client how the platform is built. */
const INTERNAL = /127\.0\.0\.1|localhost|ECONN|postgres|sql|select |terminat|pg_|stack|at .*\(|:\d{4,5}\b/i;

function requests(): Record<string, () => Promise<Response>> {
  const key = { 'x-api-key': stack.key };
  const json = { ...key, 'content-type': 'application/json' };
  const timeout = () => AbortSignal.timeout(15_000);
  return {
    'gateway /v1/me': () => fetch(`${stack.gateway.url}/v1/me`, { headers: key, signal: timeout() }),
    'gateway POST /v1/auth/tokens': () => fetch(`${stack.gateway.url}/v1/auth/tokens`, { method: 'POST', headers: json, body: '{}', signal: timeout() }),
    'gateway /readyz': () => fetch(`${stack.gateway.url}/readyz`, { signal: timeout() }),
    'proxied GET thread': () => fetch(`${stack.deploymentUrl}/threads/${threadId}`, { headers: key, signal: timeout() }),
    'proxied POST /threads': () => fetch(`${stack.deploymentUrl}/threads`, { method: 'POST', headers: json, body: '{}', signal: timeout() }),
    'agent /ok?check_db=1': () => fetch(`${stack.agent.url}/ok?check_db=1`, { signal: timeout() }),
    'agent POST /threads/search': () => fetch(`${stack.agent.url}/threads/search`, { method: 'POST', headers: json, body: '{}', signal: timeout() }),
    'agent GET state': () => fetch(`${stack.agent.url}/threads/${threadId}/state`, { signal: timeout() }),
  };
}

/** One round: every request once, at the same time. */
async function round(): Promise<Seen[]> {
  return Promise.all(
    Object.entries(requests()).map(async ([name, send]) => {
      const res = await send();
      return { name, status: res.status, retryAfter: res.headers.get('retry-after'), text: await res.text() };
    }),
  );
}

/** Success; for /readyz (whose fake control plane never answers health checks), Postgres passing. */
const ok = (r: Seen) =>
  r.name === 'gateway /readyz' ? (JSON.parse(r.text) as { checks: { postgres: { status: string } } }).checks.postgres.status === 'ok' : r.status < 300;

beforeAll(async () => {
  dir = await mkdtemp(join(testEnv('tmpDir'), 'outage-'));
  postgres = new PostgresServer({ baseDir: join(dir, 'postgres'), port: await freePort(), mode: 'fast' });
  await postgres.start();
  stack = await startAgentStack(postgres.connectionString);
  threadId = (
    (await (await fetch(`${stack.agent.url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as {
      thread_id: string;
    }
  ).thread_id;
}, 120_000);
afterAll(async () => {
  await stack?.close();
  await postgres?.stop();
  await rm(dir, { recursive: true, force: true });
});

it('answers 503 with Retry-After and a plain message while Postgres is down, and recovers', async () => {
  expect((await round()).filter((r) => !ok(r))).toEqual([]);

  const during: Seen[] = [];
  await postgres.stop();
  // Rounds until both servers noticed — the gateway's own routes and the agent server's answer
  // 503 — and one round more: the outage lasts as long as that takes, not a fixed time.
  const noticed = ['gateway /v1/me', 'agent POST /threads/search', 'agent GET state'];
  const unavailable = () => new Set(during.filter((r) => r.status === 503).map((r) => r.name));
  await until('the gateway and the agent server to answer 503', async () => {
    const seenBefore = noticed.every((name) => unavailable().has(name));
    during.push(...(await round()));
    return seenBefore || undefined;
  });
  await postgres.start();

  // Back without a restart: rounds until every request succeeds again.
  const after: Seen[] = [];
  await until(
    'every request to succeed again',
    async () => {
      const last = await round();
      after.push(...last);
      return last.every(ok) || undefined;
    },
    30_000,
    200,
  );

  for (const r of [...during, ...after]) {
    const acceptable = (r.status >= 200 && r.status < 500) || (r.status === 503 && r.retryAfter !== null);
    expect({ ...r, acceptable }).toEqual({ ...r, acceptable: true });
    if (r.status < 400) continue;
    // /readyz names its checks (one is called "postgres"); their details must be plain.
    const text =
      r.name === 'gateway /readyz'
        ? Object.values((JSON.parse(r.text) as { checks: Record<string, { detail?: string }> }).checks)
            .map((c) => c.detail)
            .join(' ')
        : r.text;
    expect({ name: r.name, internal: INTERNAL.exec(text)?.[0] }).toEqual({ name: r.name, internal: undefined });
  }
}, 90_000);
