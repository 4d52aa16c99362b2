import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { silentLogger } from '@berth/log';
import { createApp, listen, type RunningServer } from './app.js';
import { cors, type CorsOptions } from './cors.js';

const servers: RunningServer[] = [];
const urls = new Map<string, string>();
const policies: Record<string, CorsOptions> = {
  default: {},
  credentials: { allow_credentials: true },
  listed: {
    allow_origins: ['https://app.example'],
    allow_origin_regex: 'https://[a-z0-9]+\\.preview\\.example',
    allow_headers: ['content-type', 'x-api-key'],
    max_age: 600,
    expose_headers: ['x-mine'],
  },
};

beforeAll(async () => {
  for (const [name, options] of Object.entries(policies)) {
    const app = createApp({ logger: silentLogger(), routes: [cors(options), (_req, res) => void res.json({ ok: true })] });
    const server = await listen(app, '127.0.0.1', 0);
    servers.push(server);
    urls.set(name, server.url);
  }
});
afterAll(() => Promise.all(servers.map((s) => s.close())));

const preflight = (policy: string, origin: string, requestHeaders = 'content-type,x-api-key') =>
  fetch(`${urls.get(policy)}/threads`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': requestHeaders },
  });
const headersOf = (res: Response) => Object.fromEntries([...res.headers].filter(([name]) => name.startsWith('access-control-') || name === 'vary'));

describe('CORS', () => {
  it('allows any origin by default, with a wildcard and the requested headers', async () => {
    const res = await preflight('default', 'http://anywhere.example');
    expect(res.status).toBe(204);
    expect(headersOf(res)).toEqual({
      'access-control-allow-origin': '*',
      'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
      'access-control-allow-headers': 'content-type,x-api-key',
    });
    const actual = await fetch(`${urls.get('default')}/threads`, { headers: { origin: 'http://anywhere.example' } });
    expect(headersOf(actual)).toEqual({
      'access-control-allow-origin': '*',
      'access-control-expose-headers': 'content-location, location, x-pagination-total, x-pagination-next',
    });
  });

  it('never pairs credentials with a wildcard: the origin is echoed and answers vary by it', async () => {
    const res = await preflight('credentials', 'http://anywhere.example');
    expect(headersOf(res)).toMatchObject({
      'access-control-allow-origin': 'http://anywhere.example',
      'access-control-allow-credentials': 'true',
      vary: 'Origin',
    });
    const actual = await fetch(`${urls.get('credentials')}/threads`, { headers: { origin: 'http://other.example' } });
    expect(headersOf(actual)).toMatchObject({
      'access-control-allow-origin': 'http://other.example',
      'access-control-allow-credentials': 'true',
      vary: 'Origin',
    });
  });

  it('allows listed origins and those the whole regex matches, and no others', async () => {
    for (const origin of ['https://app.example', 'https://pr1.preview.example']) {
      const res = await preflight('listed', origin);
      expect(headersOf(res)).toEqual({
        'access-control-allow-origin': origin,
        'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
        'access-control-allow-headers': 'content-type, x-api-key',
        'access-control-max-age': '600',
        vary: 'Origin',
      });
    }
    for (const origin of ['https://evil.example', 'https://pr1.preview.example.evil.example', 'https://app.example.evil.example']) {
      const res = await preflight('listed', origin);
      expect({ origin, status: res.status, headers: headersOf(res) }).toEqual({ origin, status: 204, headers: { vary: 'Origin' } });
    }
    const actual = await fetch(`${urls.get('listed')}/threads`, { headers: { origin: 'https://app.example' } });
    expect(headersOf(actual)['access-control-expose-headers']).toBe('content-location, location, x-pagination-total, x-pagination-next, x-mine');
  });
});
