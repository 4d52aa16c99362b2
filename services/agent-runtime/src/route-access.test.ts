/**
 * Every built-in route of the agent server and who may call it (api/access.ts), checked against the
 * table in route-access.txt: a new route, or a route whose credentials change, shows up in review
 * as a change of that table. Then, from the attacker's side, each route is called as its
 * declaration says it may not be: without the deployment credential (another process on the
 * machine calling the port directly), and, on a project with an auth handler, without a user.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './server.js';
import { startTestServer } from './__tests__/fixtures.js';

const TABLE = new URL('./route-access.txt', import.meta.url);
const CREDENTIAL = 'r'.repeat(43);
const authProject = fileURLToPath(new URL('../test-projects/auth/langgraph.json', import.meta.url));

let db: TestDatabase;
let server: RunningAgentServer;
let withAuth: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('route_access');
  server = await startTestServer(db.url, { deploymentCredential: CREDENTIAL, workers: 0 });
  withAuth = await startTestServer(db.url, { configPath: authProject, deploymentCredential: CREDENTIAL, workers: 0, schema: 'route_access_auth' });
});
afterAll(async () => {
  await server?.close();
  await withAuth?.close();
  await db?.drop();
});

/** A request to each route, its path parameters made up, with an empty JSON body where the method may carry one. */
async function send(base: RunningAgentServer, method: string, template: string, headers: Record<string, string>) {
  const path = template.replace(/\{[^}]+\}/g, () => randomUUID());
  const withBody = method !== 'get' && method !== 'delete';
  const res = await fetch(`${base.url}${path}`, {
    method: method.toUpperCase(),
    headers: { ...headers, ...(withBody ? { 'content-type': 'application/json' } : {}) },
    ...(withBody ? { body: '{}' } : {}),
  });
  return { route: `${method.toUpperCase()} ${template}`, status: res.status, detail: ((await res.json().catch(() => ({}))) as { detail?: unknown }).detail };
}

describe('agent server route access', () => {
  it('lists every route with the credentials it takes, as the checked-in table says', () => {
    const rows = server.routes.map(
      ({ method, path, access }) => `${method.toUpperCase().padEnd(7)} ${path.padEnd(56)} ${access === 'public' ? 'public' : access.join(', ')}`,
    );
    const table = readFileSync(TABLE, 'utf8')
      .split('\n')
      .filter((line) => line && !line.startsWith('#'));
    // On a difference: the route added or changed is in the diff; update route-access.txt in the same change.
    expect(rows.join('\n')).toBe(table.join('\n'));
  });

  it('refuses every route but the public ones without the deployment credential', async () => {
    for (const { method, path, access } of server.routes) {
      const res = await send(server, method, path, {});
      if (access === 'public') expect(res.status).toBe(200);
      else expect(res).toEqual({ route: res.route, status: 401, detail: expect.stringMatching(/call it through the deployment URL/) });
    }
  });

  it('asks the project’s auth handler on the routes that take custom_auth only', async () => {
    let asked = 0;
    for (const { method, path, access } of withAuth.routes) {
      const res = await send(withAuth, method, path, { 'x-berth-deployment-credential': CREDENTIAL });
      if (access !== 'public' && access.includes('custom_auth')) {
        asked++;
        expect({ route: res.route, status: res.status }).toEqual({ route: res.route, status: 401 });
      } else {
        expect({ route: res.route, status: res.status }).not.toEqual({ route: res.route, status: 401 });
      }
    }
    expect(asked).toBeGreaterThan(40);
  });
});
