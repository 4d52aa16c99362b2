/**
 * A deployed agent server answers only requests that carry its deployment credential (the
 * gateway adds it): another process on the machine calling its port directly gets 401.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import type { RunningAgentServer } from './server.js';
import { human, startTestServer } from './__tests__/fixtures.js';

const CREDENTIAL = 'c'.repeat(43);
let db: TestDatabase;
let server: RunningAgentServer;

beforeAll(async () => {
  db = await createTestDatabase('cred');
  server = await startTestServer(db.url, { deploymentCredential: CREDENTIAL });
});

afterAll(async () => {
  await server?.close();
  await db?.drop();
});

const call = (path: string, headers: Record<string, string> = {}, body?: unknown) =>
  fetch(`${server.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

describe('deployment credential', () => {
  it('refuses every route but /ok without the credential', async () => {
    expect((await call('/ok')).status).toBe(200);
    for (const [path, body] of [
      ['/threads/search', {}],
      ['/assistants/search', {}],
      ['/runs/wait', { assistant_id: 'echo', input: human('hi') }],
      ['/info', undefined],
      ['/openapi.json', undefined],
    ] as const) {
      const res = await call(path, {}, body);
      expect({ path, status: res.status }).toEqual({ path, status: 401 });
      expect(((await res.json()) as { detail: string }).detail).toMatch(/deployment URL/);
    }
  });

  it('refuses a wrong credential and serves the right one', async () => {
    expect((await call('/threads/search', { 'x-berth-deployment-credential': `${CREDENTIAL}x` }, {})).status).toBe(401);
    const res = await call('/runs/wait', { 'x-berth-deployment-credential': CREDENTIAL }, { assistant_id: 'echo', input: human('hi') });
    expect(res.status).toBe(200);
  });
});
