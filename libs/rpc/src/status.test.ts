import { afterEach, describe, expect, it } from '@jest/globals';
import {
  BerthError,
  ConflictError,
  DeadlineExceededError,
  ERROR_CODES,
  GrpcStatus,
  InternalError,
  NotFoundError,
  PermissionDeniedError,
  RequestValidationError,
  UnavailableError,
  errorFromCode,
  grpcStatusOf,
  type ErrorCode,
  type ValidationIssue,
} from '@berth/errors';
import { EchoService, Health } from '@berth/proto';
import grpc from '@grpc/grpc-js';
import { createRpcClient } from './client.js';
import { INTERNAL_ERROR_MESSAGE } from './status.js';
import { Cleanup, aborted, captureLogger, closedPort, streamingEcho } from './__tests__/servers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

function client(address: string, timeoutMs?: number) {
  const c = createRpcClient(EchoService, address, { defaultTimeoutMs: timeoutMs });
  cleanup.add(() => c.close());
  return c;
}

/** A server whose Echo throws whatever `fail(message)` returns. */
async function failingServer(fail: (message: string) => unknown, logger = captureLogger().logger) {
  return cleanup.server(
    (server) =>
      server.add(EchoService, {
        ...streamingEcho,
        echo: async (request) => {
          throw fail(request.message);
        },
        count: async function* (request) {
          yield { index: 0 };
          throw fail(request.count.toString());
        },
      }),
    logger,
  );
}

function causeCode(error: unknown): number | undefined {
  return ((error as Error).cause as Partial<grpc.ServiceError> | undefined)?.code;
}

describe('error mapping', () => {
  it('delivers a thrown BerthError as the same class, message and gRPC status', async () => {
    const { address } = await failingServer((message) => new NotFoundError(`deployment ${message} not found`));
    const error = await client(address)
      .echo({ message: 'd-1' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({ name: 'NotFoundError', code: 'not_found', message: 'deployment d-1 not found' });
    expect(causeCode(error)).toBe(GrpcStatus.NOT_FOUND);
  });

  it('keeps the issues of a RequestValidationError', async () => {
    const issues: ValidationIssue[] = [
      { loc: ['body', 'items', 0, 'name'], msg: 'Field required', type: 'missing' },
      { loc: ['body', 'extra'], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' },
    ];
    const { address } = await failingServer(() => new RequestValidationError(issues));
    const error = await client(address)
      .echo({})
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RequestValidationError);
    expect((error as RequestValidationError).issues).toEqual(issues);
    expect((error as Error).message).toBe(new RequestValidationError(issues).message);
    expect(causeCode(error)).toBe(GrpcStatus.INVALID_ARGUMENT);
  });

  it('maps every Berth error code to its class and gRPC status', async () => {
    const codes = ERROR_CODES;
    const { address } = await failingServer((code) => errorFromCode(code as ErrorCode, `failed with ${code}`));
    const echo = client(address);
    for (const code of codes) {
      const error = await echo.echo({ message: code }).catch((e: unknown) => e);
      const expected = errorFromCode(code, `failed with ${code}`);
      expect(error).toBeInstanceOf(expected.constructor);
      expect(error).toMatchObject({ code, message: expected.message });
      expect(causeCode(error)).toBe(grpcStatusOf(code));
    }
  });

  it('answers an unexpected error with a generic InternalError and logs it on the server', async () => {
    const captured = captureLogger();
    const { address } = await failingServer(() => new Error('password=hunter2 in connection string'), captured.logger);
    const error = await client(address)
      .echo({ message: 'x' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InternalError);
    expect((error as Error).message).toBe(INTERNAL_ERROR_MESSAGE);
    expect(JSON.stringify(error, Object.getOwnPropertyNames(error))).not.toContain('hunter2');
    expect(causeCode(error)).toBe(GrpcStatus.INTERNAL);
    expect(((error as Error).cause as grpc.ServiceError).details).not.toContain('hunter2');
    const logged = captured.lines().find((line) => line.msg === 'rpc handler failed');
    expect(logged).toMatchObject({ level: 50, method: '/berth.testing.v1.EchoService/Echo' });
    expect(JSON.stringify(logged)).toContain('hunter2');
  });

  it('ends a server stream with the mapped error after the responses sent so far', async () => {
    const { address } = await failingServer(() => new ConflictError('revision moved on'));
    const seen: number[] = [];
    const error = await (async () => {
      for await (const response of client(address).count({ count: 1 })) seen.push(response.index);
    })().catch((e: unknown) => e);
    expect(seen).toEqual([0]);
    expect(error).toBeInstanceOf(ConflictError);
    expect((error as Error).message).toBe('revision moved on');
  });

  it('maps a server that is down to UnavailableError, keeping the gRPC error as cause', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const error = await client(address)
      .echo({})
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnavailableError);
    expect(causeCode(error)).toBe(GrpcStatus.UNAVAILABLE);
    const streamError = await (async () => {
      for await (const _ of client(address).count({ count: 1 })) void _;
    })().catch((e: unknown) => e);
    expect(streamError).toBeInstanceOf(UnavailableError);
  });

  it('maps a passed deadline to DeadlineExceededError and aborts the handler', async () => {
    let handlerSignal: AbortSignal | undefined;
    const { address } = await cleanup.server((server) =>
      server.add(EchoService, {
        ...streamingEcho,
        // It never answers: only the deadline can end the call.
        echo: async (_request, context) => {
          handlerSignal = context.signal;
          await aborted(context.signal);
          return {};
        },
        count: async function* () {},
      }),
    );
    const error = await client(address)
      .echo({}, { timeoutMs: 100 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeadlineExceededError);
    expect(causeCode(error)).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    await aborted(handlerSignal!);

    // The client's default deadline applies when the call passes none.
    const error2 = await client(address, 100)
      .echo({})
      .catch((e: unknown) => e);
    expect(error2).toBeInstanceOf(DeadlineExceededError);
  });

  it('maps a status without Berth detail by its gRPC code', async () => {
    // A plain grpc-js server (not @berth/rpc) answering PERMISSION_DENIED with no trailer.
    const raw = new grpc.Server();
    raw.addService(
      {
        echo: {
          path: '/berth.testing.v1.EchoService/Echo',
          requestStream: false,
          responseStream: false,
          requestSerialize: (v: Buffer) => v,
          requestDeserialize: (v: Buffer) => v,
          responseSerialize: (v: Buffer) => v,
          responseDeserialize: (v: Buffer) => v,
        },
      },
      {
        echo: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) => callback({ code: grpc.status.PERMISSION_DENIED, details: 'no access' }),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      raw.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    cleanup.add(() => raw.forceShutdown());
    const error = await client(`127.0.0.1:${port}`)
      .echo({})
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermissionDeniedError);
    expect((error as Error).message).toContain('no access');
    expect(causeCode(error)).toBe(GrpcStatus.PERMISSION_DENIED);

    // A method the server does not serve: UNIMPLEMENTED → InternalError.
    const { address } = await cleanup.server((server) => server.add(Health, { check: async () => ({}), watch: async function* () {} }));
    const unimplemented = await client(address)
      .echo({})
      .catch((e: unknown) => e);
    expect(unimplemented).toBeInstanceOf(InternalError);
    expect(unimplemented).toBeInstanceOf(BerthError);
    expect(causeCode(unimplemented)).toBe(GrpcStatus.UNIMPLEMENTED);
  });
});
