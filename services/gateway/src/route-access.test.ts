/**
 * Every route of the gateway and who may call it, checked against the table in route-access.txt:
 * a new route, or a route whose credentials change, shows up in review as a change of that table.
 * The deployment proxy is not an Api route; its row is written from what it takes too.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { AuthStore } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { silentLogger } from '@berth/log';
import { PROXY_CREDENTIALS } from './access.js';
import { gatewayApi } from './app.js';
import { ControlPlaneClients } from './control-plane.js';

const TABLE = new URL('./route-access.txt', import.meta.url);

// Listing routes opens no connection: the database and the control plane are never reached.
const database = createDatabase({ connectionString: 'postgres://nobody@127.0.0.1:1/none', schema: 'auth' });
const controlPlane = new ControlPlaneClients('127.0.0.1:1');
afterAll(async () => {
  controlPlane.close();
  await database.close();
});

/** One line per route: method, path, and `public` or the kinds of credential it takes. */
function accessTable(rows: readonly { method: string; path: string; access: 'public' | readonly string[] }[]): string {
  return rows
    .map(({ method, path, access }) => `${method.toUpperCase().padEnd(7)} ${path.padEnd(72)} ${access === 'public' ? 'public' : access.join(', ')}`.trimEnd())
    .join('\n');
}

describe('route access', () => {
  it('lists every route with the credentials it takes, as the checked-in table says', () => {
    const api = gatewayApi({ logger: silentLogger(), store: new AuthStore(database.db as never), readiness: {}, controlPlane });
    const rows = [...api.routes, { method: 'any', path: '/d/{deployment_id}/{path}', access: PROXY_CREDENTIALS }];
    const table = readFileSync(TABLE, 'utf8')
      .split('\n')
      .filter((line) => line && !line.startsWith('#'))
      .join('\n');
    // On a difference: the route added or changed is in the diff; update route-access.txt in the same change.
    expect(accessTable(rows)).toBe(table);
  });

  it('lets a console session call every route an API key can, except minting bearer tokens', () => {
    const api = gatewayApi({ logger: silentLogger(), store: new AuthStore(database.db as never), readiness: {}, controlPlane });
    // A token minted with a session would outlive its sign-out and its idle expiry.
    const keyOnly = api.routes
      .filter(({ access }) => access !== 'public' && access.includes('api_key') && !access.includes('session'))
      .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(keyOnly).toEqual(['POST /v1/auth/tokens']);
  });
});
