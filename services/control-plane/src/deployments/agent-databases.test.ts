/**
 * A deployment's agent servers connect as roles of their own, to a database of their own: they
 * reach nothing of the platform or of other deployments, and the password rotates per revision
 * without cutting off the revision still serving.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { silentLogger } from '@berth/log';
import { startAgentServer, type RunningAgentServer } from '@berth/agent-runtime';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { fileURLToPath } from 'node:url';
import { AgentDatabases, agentDatabaseName } from './agent-databases.js';

const echoProject = fileURLToPath(new URL('../../../agent-runtime/test-projects/echo/langgraph.json', import.meta.url));

let db: TestDatabase;
let databases: AgentDatabases;
const clients: pg.Client[] = [];
const deploymentA = randomUUID();
const deploymentB = randomUUID();

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  clients.push(client);
  return client;
}

/** The error code (or message) of a failed connection or query. */
async function refusal(work: () => Promise<unknown>): Promise<string> {
  try {
    await work();
  } catch (error) {
    return (error as { code?: string }).code ?? (error as Error).message;
  }
  return 'allowed';
}

const withUser = (url: string, user: string, password: string, database: string) => {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  u.pathname = `/${database}`;
  return u.toString();
};

beforeAll(async () => {
  db = await createTestDatabase('agentdb');
  const admin = await connect(db.url);
  await admin.query('CREATE SCHEMA control_plane; CREATE TABLE control_plane.secrets (value text); INSERT INTO control_plane.secrets VALUES ($$platform$$)');
  databases = new AgentDatabases({ adminUrl: db.url, connectionLimit: 30 });
  // The tests' superuser may close every database: none is left open.
  expect(await databases.lockPlatformDatabase()).toEqual([]);
});

afterAll(async () => {
  for (const client of clients) await client.end().catch(() => undefined);
  await databases.drop(deploymentA);
  await databases.drop(deploymentB);
  await db.drop();
});

describe('agent databases', () => {
  it('gives a deployment a database it owns, and nothing else', async () => {
    const a = await databases.provision(deploymentA);
    const b = await databases.provision(deploymentB);
    expect(a.database).toBe(agentDatabaseName(deploymentA));
    const client = await connect(a.url);
    const { rows } = await client.query<{ current_user: string; rolsuper: boolean }>(
      'SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) AS rolsuper',
    );
    expect(rows[0]).toEqual({ current_user: agentDatabaseName(deploymentA), rolsuper: false });
    await client.query('CREATE SCHEMA agent; CREATE TABLE agent.threads (id text)');

    const platformDb = new URL(db.url).pathname.slice(1);
    const own = new URL(a.url);
    // The platform's database, another deployment's database and the superuser are out of reach.
    expect(await refusal(() => connect(withUser(a.url, own.username, decodeURIComponent(own.password), platformDb)))).toBe('42501');
    expect(await refusal(() => connect(withUser(a.url, own.username, decodeURIComponent(own.password), b.database)))).toBe('42501');
    // Nor the server's own databases, which every role could connect to by default.
    expect(await refusal(() => connect(withUser(a.url, own.username, decodeURIComponent(own.password), 'postgres')))).toBe('42501');
    expect(await refusal(() => connect(withUser(a.url, own.username, decodeURIComponent(own.password), 'template1')))).toBe('42501');
    expect(await refusal(() => connect(withUser(a.url, new URL(db.url).username, decodeURIComponent(own.password), platformDb)))).toBe('28P01');
    expect(await refusal(() => client.query('CREATE ROLE sneaky LOGIN'))).toBe('42501');
    expect(await refusal(() => client.query('CREATE DATABASE sneaky'))).toBe('42501');
    expect(await refusal(() => client.query("COPY (SELECT 1) TO PROGRAM 'true'"))).toBe('42501');
  });

  it('rotates the password per revision without cutting off the one serving', async () => {
    const first = await databases.provision(deploymentA);
    const serving = await connect(first.url);
    const second = await databases.provision(deploymentA);
    expect(second.role).not.toBe(first.role);
    // Both revisions work side by side, old connections and new ones.
    expect((await serving.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    expect(await refusal(() => connect(first.url))).toBe('allowed');
    expect(await refusal(() => connect(second.url))).toBe('allowed');
    // The revision after that gets the first login again, with a new password: the old one is void.
    await serving.end();
    for (const client of clients.splice(0)) await client.end().catch(() => undefined);
    const holder = await connect(second.url);
    const third = await databases.provision(deploymentA);
    expect(third.role).toBe(first.role);
    expect(await refusal(() => connect(first.url))).toBe('28P01');
    expect(await refusal(() => connect(third.url))).toBe('allowed');
    await holder.end();
  });

  it('gives the login a revision names, or the other one, whether or not anyone holds a session', async () => {
    // Nobody connected: the count of sessions alone would give both revisions the same login.
    const serving = await databases.provision(deploymentB);
    const next = await databases.provision(deploymentB, { avoid: serving.role });
    expect(next.role).not.toBe(serving.role);
    expect(await refusal(() => connect(serving.url))).toBe('allowed');
    // The serving revision brought back takes its own login again, with a new password.
    const back = await databases.provision(deploymentB, { use: serving.role });
    expect(back.role).toBe(serving.role);
    expect(await refusal(() => connect(serving.url))).toBe('28P01');
    expect(await refusal(() => connect(back.url))).toBe('allowed');
    expect(await refusal(() => connect(next.url))).toBe('allowed');
    // Another deployment's login is not one of its own: the count of sessions decides instead.
    const fallback = await databases.provision(deploymentB, { use: `${agentDatabaseName(deploymentA)}_a` });
    expect(fallback.database).toBe(agentDatabaseName(deploymentB));
    expect(fallback.role.startsWith(agentDatabaseName(deploymentB))).toBe(true);
    for (const client of clients.splice(0)) await client.end().catch(() => undefined);
  });

  it('runs an agent server without any platform privilege', async () => {
    const login = await databases.provision(deploymentB);
    let server: RunningAgentServer | undefined;
    try {
      server = await startAgentServer(
        { configPath: echoProject, databaseUrl: login.url, schema: 'agent_b', host: '127.0.0.1', port: 0, workers: 2 },
        silentLogger(),
      );
      const res = await fetch(`${server.url}/runs/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'hi' }] } }),
      });
      expect(res.status).toBe(200);
      expect(JSON.stringify(await res.json())).toContain('hi');
    } finally {
      await server?.close();
    }
  });

  it('drops the database and roles with the deployment', async () => {
    const login = await databases.provision(deploymentB);
    await databases.drop(deploymentB);
    const admin = await connect(db.url);
    const { rows } = await admin.query('SELECT rolname FROM pg_roles WHERE rolname LIKE $1', [`${agentDatabaseName(deploymentB)}%`]);
    expect(rows).toEqual([]);
    expect(await refusal(() => connect(login.url))).toBe('28P01');
  });
});
