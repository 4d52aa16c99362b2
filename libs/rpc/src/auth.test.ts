import { afterEach, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { httpStatusOf, UnauthenticatedError } from '@berth/errors';
import { EchoService, Health } from '@berth/proto';
import grpc from '@grpc/grpc-js';
import { createRpcClient, type RpcClientOptions } from './client.js';
import { RpcConfigurationError, RpcCredentialsRefusedError } from './errors.js';
import { checkHealth, HealthService } from './health.js';
import { createRpcServer } from './server.js';
import { startGrpcService } from './service.js';
import { Cleanup, captureLogger, streamingEcho } from './__tests__/servers.js';
import type { CallContext } from './types.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

const TOKEN = randomBytes(32).toString('base64url');
const OTHER = randomBytes(32).toString('base64url');

function client(address: string, options: RpcClientOptions = {}) {
  const c = createRpcClient(EchoService, address, options);
  cleanup.add(() => c.close());
  return c;
}

/** A server requiring TOKEN that records the contexts its handlers saw. */
async function guardedServer(logger = captureLogger().logger) {
  const seen: CallContext[] = [];
  const server = createRpcServer({ internalToken: TOKEN, logger, shutdownTimeoutMs: 500 });
  server.add(Health, new HealthService().implementation);
  server.add(EchoService, {
    ...streamingEcho,
    echo: async (request, context) => {
      seen.push(context);
      if (request.message === 'who') throw new UnauthenticatedError('the user behind this call is unknown');
      return { message: `echo: ${request.message}`, metadata: { ...context.metadata } };
    },
    count: async function* (request, context) {
      seen.push(context);
      for (let index = 0; index < request.count; index++) yield { index };
    },
  });
  const { address } = await server.listen('127.0.0.1', 0);
  cleanup.add(() => server.close());
  return { address, seen };
}

async function refusal(call: Promise<unknown>): Promise<RpcCredentialsRefusedError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(RpcCredentialsRefusedError);
  const refused = error as RpcCredentialsRefusedError;
  // On the wire it is UNAUTHENTICATED; to the platform an unavailable dependency (HTTP 503).
  expect((refused.cause as grpc.ServiceError).code).toBe(grpc.status.UNAUTHENTICATED);
  expect(refused.code).toBe('unavailable');
  expect(httpStatusOf(refused.code)).toBe(503);
  expect(refused.message).toBe("internal service refused the platform's credentials");
  return refused;
}

describe('internal token', () => {
  it('refuses unary and streaming calls without the token or with a wrong one, before any handler runs', async () => {
    const { address, seen } = await guardedServer();
    for (const options of [{}, { internalToken: OTHER }]) {
      const refused = await refusal(client(address, options).echo({ message: 'hi' }));
      expect(refused.method).toBe('/berth.testing.v1.EchoService/Echo');
      await refusal(
        (async () => {
          for await (const _ of client(address, options).count({ count: 3 })) throw new Error('a refused stream yielded');
        })(),
      );
    }
    // A token sent by hand in other schemes or twice does not pass either.
    await refusal(client(address).echo({ message: 'hi' }, { metadata: { authorization: TOKEN } }));
    await refusal(client(address).echo({ message: 'hi' }, { metadata: { authorization: `Basic ${TOKEN}` } }));
    expect(seen).toHaveLength(0);
  });

  it('serves calls that carry the token, and hides it from handlers', async () => {
    const { address, seen } = await guardedServer();
    const c = client(address, { internalToken: TOKEN });
    // The client's token replaces an authorization the call names itself.
    const response = await c.echo({ message: 'hi' }, { metadata: { authorization: `Bearer ${OTHER}`, 'x-tenant-id': 't1' } });
    expect(response.message).toBe('echo: hi');
    expect(response.metadata['x-tenant-id']).toBe('t1');
    expect(response.metadata).not.toHaveProperty('authorization');
    const indexes: number[] = [];
    for await (const item of c.count({ count: 3 })) indexes.push(item.index);
    expect(indexes).toEqual([0, 1, 2]);
    expect(seen.map((context) => context.metadata['authorization'])).toEqual([undefined, undefined]);
    // The scheme is case-insensitive.
    expect((await client(address).echo({ message: 'x' }, { metadata: { authorization: `bearer ${TOKEN}` } })).message).toBe('echo: x');
  });

  it("keeps a handler's own UnauthenticatedError apart from a refused token", async () => {
    const { address } = await guardedServer();
    const error = await client(address, { internalToken: TOKEN })
      .echo({ message: 'who' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnauthenticatedError);
    expect(error).not.toBeInstanceOf(RpcCredentialsRefusedError);
    expect((error as Error).message).toBe('the user behind this call is unknown');
  });

  it('leaves health open to probes without credentials, but refuses a wrong token there too', async () => {
    const { address } = await guardedServer();
    expect(await checkHealth(address)).toBe('SERVING');
    expect(await checkHealth(address, { internalToken: TOKEN })).toBe('SERVING');
    await expect(checkHealth(address, { internalToken: OTHER })).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringContaining("refused the platform's credentials"),
    });
  });

  it('logs a refusal with method and peer, never the credentials sent', async () => {
    const capture = captureLogger();
    const { address } = await guardedServer(capture.logger);
    await refusal(client(address, { internalToken: OTHER }).echo({ message: 'hi' }));
    await refusal(client(address).echo({ message: 'hi' }));
    const refused = capture.lines().filter((line) => line['msg'] === 'rpc call refused');
    expect(refused.map((line) => [line['method'], line['credentials']])).toEqual([
      ['/berth.testing.v1.EchoService/Echo', 'invalid'],
      ['/berth.testing.v1.EchoService/Echo', 'missing'],
    ]);
    expect(JSON.stringify(capture.lines())).not.toContain(OTHER);
  });

  it('is passed through startGrpcService', async () => {
    const service = await startGrpcService({
      name: 'berth.test.v1',
      host: '127.0.0.1',
      port: 0,
      internalToken: TOKEN,
      setup: (server) => server.add(EchoService, { ...streamingEcho, echo: async (request) => ({ message: request.message }), count: async function* () {} }),
    });
    cleanup.add(() => service.close());
    await refusal(client(service.address).echo({ message: 'hi' }));
    expect((await client(service.address, { internalToken: TOKEN }).echo({ message: 'hi' })).message).toBe('hi');
    expect(await checkHealth(service.address, { service: 'berth.test.v1' })).toBe('SERVING');
  });

  it('refuses to start with a token too short or unfit for a header', () => {
    for (const token of ['short', `${'x'.repeat(40)} y`, `${'x'.repeat(40)}\n`]) {
      expect(() => createRpcServer({ internalToken: token })).toThrow(RpcConfigurationError);
      expect(() => createRpcClient(EchoService, '127.0.0.1:1', { internalToken: token })).toThrow(RpcConfigurationError);
    }
  });
});
