/**
 * What a client sees when a dependency is down, with the errors the real drivers throw (pg,
 * ioredis, grpc-js through @berth/rpc): 503 + Retry-After and a plain message; and what any other
 * failure shows: "Internal Server Error" and the request id, nothing of the error itself.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { UnavailableError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { EchoService } from '@berth/proto';
import { createRpcClient } from '@berth/rpc';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { freePort } from '@berth/local-stack';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Cleanup } from '../../rpc/src/__tests__/servers.js';
import { Api } from './api.js';
import { createApp, listen, type RunningServer } from './app.js';

const cleanup = new Cleanup();
let db: TestDatabase;
let server: RunningServer;
let closed: number;

async function pgQuery(connectionString: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(text);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** An EchoService whose handler fails the way `fail` does, behind a real gRPC server. */
async function echoServer(fail: () => Promise<void>): Promise<string> {
  const { address } = await cleanup.server((s) =>
    s.add(EchoService, {
      collect: async () => ({}),
      chat: async function* () {},
      echo: async () => {
        await fail();
        return { message: '' };
      },
      count: async function* () {},
    }),
  );
  return address;
}

const failures: Record<string, () => Promise<void>> = {
  'pg-refused': () => pgQuery(`postgres://berth:secret@127.0.0.1:${closed}/berth`, 'SELECT 1'),
  // The server ends the session (57P01), as `pg_ctl stop -m fast` does.
  'pg-terminated': () => pgQuery(db.url, 'SELECT pg_terminate_backend(pg_backend_pid())'),
  redis: async () => {
    const redis = new Redis({ host: '127.0.0.1', port: closed, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    redis.on('error', () => undefined);
    try {
      await redis.connect().catch(() => undefined);
      await redis.ping();
    } finally {
      redis.disconnect();
    }
  },
  'grpc-refused': async () => {
    const client = createRpcClient(EchoService, `127.0.0.1:${closed}`);
    try {
      await client.echo({});
    } finally {
      client.close();
    }
  },
  // A service whose own Postgres is down answers UNAVAILABLE, not INTERNAL.
  'grpc-service-without-db': async () => {
    const client = createRpcClient(EchoService, await echoServer(failures['pg-refused']!));
    try {
      await client.echo({});
    } finally {
      client.close();
    }
  },
  'pg-syntax': () => pgQuery(db.url, 'SELEC secret_column FROM db_internal_host'),
  thrown: async () => {
    throw new Error('connect to db.internal.example:5432 as admin failed');
  },
};

beforeAll(async () => {
  db = await createTestDatabase('http_dep');
  closed = await freePort();
  const api = new Api();
  for (const [name, fail] of Object.entries(failures)) {
    api.route({ method: 'get', path: `/${name}`, access: 'public', summary: name, handler: fail });
  }
  server = await listen(createApp({ logger: silentLogger(), routes: [api.router()] }), '127.0.0.1', 0);
});
afterAll(async () => {
  await server?.close();
  await cleanup.run();
  await db?.drop();
});

async function get(name: string) {
  const res = await fetch(`${server.url}/${name}`, { headers: { 'x-request-id': `req-${name}` } });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), text: await res.text() };
}

describe('a dependency that is down', () => {
  it.each([
    ['pg-refused', 'a service this request needs'],
    ['pg-terminated', 'the database'],
    ['redis', 'Redis'],
    ['grpc-refused', 'an internal service'],
    // The service's own plain message crosses unchanged.
    ['grpc-service-without-db', 'a service this request needs'],
  ])('%s: 503 with Retry-After and a plain message', async (name, what) => {
    const res = await get(name);
    expect(res).toEqual({ status: 503, retryAfter: '5', text: JSON.stringify({ detail: `${what} is unavailable, retry shortly` }) });
  });

  it('crosses gRPC as UnavailableError with the plain message', async () => {
    const client = createRpcClient(EchoService, await echoServer(failures['pg-terminated']!));
    const error = await client.echo({}).catch((e: unknown) => e);
    client.close();
    expect(error).toBeInstanceOf(UnavailableError);
    expect((error as Error).message).toBe('the database is unavailable, retry shortly');
  });
});

describe('any other failure', () => {
  it.each(['pg-syntax', 'thrown'])('%s: 500 with the request id only', async (name) => {
    expect(await get(name)).toEqual({ status: 500, retryAfter: null, text: JSON.stringify({ detail: 'Internal Server Error', request_id: `req-${name}` }) });
  });
});
