/**
 * A gRPC server (grpc-js) that serves protobuf-es v2 service descriptors with typed async
 * handlers. Errors thrown by handlers are mapped by `status.ts`.
 */
import { create, type DescMessage, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import { DeadlineExceededError } from '@berth/errors';
import type { Span } from '@berth/tracing';
import { silentLogger, type Logger } from '@berth/log';
import { observeGrpcCall, secondsSince } from '@berth/metrics';
import grpc from '@grpc/grpc-js';
import { AUTHORIZATION_METADATA, InternalTokenVerifier, OPEN_SERVICES } from './auth.js';
import { fromGrpcMetadata, isSupported, methodDefinition } from './codec.js';
import { RpcCancelledError, RpcConfigurationError, RpcListenError } from './errors.js';
import { statusOfError } from './status.js';
import { endServerSpan, inSpan, startServerSpan } from './tracing.js';
import type { CallContext, ServiceImplementation } from './types.js';

/** Options of {@link createRpcServer}. */
export interface RpcServerOptions {
  /** Where handler failures are logged (unexpected errors at `error`, Berth errors at `debug`). */
  logger?: Logger;
  /**
   * How long `close()` waits for calls in flight before cancelling them.
   * @default 2000
   */
  shutdownTimeoutMs?: number;
  /** Extra grpc-js server options (message size limits, keepalive, …). */
  grpcOptions?: grpc.ServerOptions;
  /**
   * The internal token (`BERTH_INTERNAL_TOKEN`, at least 32 characters) every call must carry as
   * `authorization: Bearer <token>`; other calls are answered UNAUTHENTICATED. The standard
   * health service (`grpc.health.v1.Health`) also answers calls without credentials, for probes.
   * @default none: every call is served unauthenticated — for tests and development only
   */
  internalToken?: string;
}

/** Where a listening server can be reached. */
export interface ListenAddress {
  /** A dialable `host:port`: `127.0.0.1:PORT` when bound to a wildcard address. */
  address: string;
  /** The bound port (the one chosen by the OS when listening on port 0). */
  port: number;
}

/** A gRPC server. Add services, then `listen`. */
export interface RpcServer {
  /** Serves `service` with `implementation`. Must be called before `listen`. */
  add<S extends DescService>(service: S, implementation: ServiceImplementation<S>): RpcServer;
  /** Binds `host:port` (port 0 picks a free port) and starts serving. */
  listen(host: string, port: number): Promise<ListenAddress>;
  /** Stops accepting calls, waits for calls in flight up to `shutdownTimeoutMs`, then cancels them. */
  close(): Promise<void>;
}

type AnyCall =
  | grpc.ServerUnaryCall<Message, Message>
  | grpc.ServerWritableStream<Message, Message>
  | grpc.ServerReadableStream<Message, Message>
  | grpc.ServerDuplexStream<Message, Message>;
type Handler = (request: Message | AsyncIterable<Message>, context: CallContext) => unknown;

/**
 * Refuses calls without the internal token as soon as their metadata arrives: before the request
 * message of an untrusted caller is parsed and before any handler runs, for every method alike.
 */
function tokenInterceptor(verifier: InternalTokenVerifier, logger: Logger): grpc.ServerInterceptor {
  return (method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, proceed) => {
            const values = metadata.get(AUTHORIZATION_METADATA);
            const open = OPEN_SERVICES.has(method.path.split('/')[1] ?? '');
            if ((open && values.length === 0) || verifier.verify(values)) return proceed(metadata);
            // Never the header's value: a near miss of the token must not end up in a log.
            logger.warn({ method: method.path, peer: call.getPeer(), credentials: values.length > 0 ? 'invalid' : 'missing' }, 'rpc call refused');
            call.sendStatus({ code: grpc.status.UNAUTHENTICATED, details: 'missing or invalid internal credentials', metadata: new grpc.Metadata() });
          },
        }),
    });
}

function deadlineMs(call: AnyCall): number {
  const deadline = call.getDeadline();
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/**
 * The context of one call; `finish(code)` marks the handler done so a late cancel is not reported,
 * and records the call's metrics with the status it ends with.
 */
function callContext(call: AnyCall): { context: CallContext; finish(code: grpc.status | undefined): void; cancelled(): boolean } {
  const started = performance.now();
  const controller = new AbortController();
  let finished = false;
  const onCancel = () => {
    if (finished || controller.signal.aborted) return;
    const reason =
      Date.now() >= deadlineMs(call)
        ? new DeadlineExceededError(`deadline of ${call.getPath()} exceeded`)
        : new RpcCancelledError(`call ${call.getPath()} was cancelled`);
    controller.abort(reason);
  };
  // The call kinds' `on` overloads differ only in their stream events; 'cancelled' is on all.
  const events = call as grpc.ServerUnaryCall<Message, Message>;
  events.on('cancelled', onCancel);
  if (call.cancelled) onCancel();
  // Handlers never see the internal token, so none can log or forward it by accident.
  const { [AUTHORIZATION_METADATA]: _credentials, ...metadata } = fromGrpcMetadata(call.metadata);
  return {
    context: {
      signal: controller.signal,
      metadata,
      peer: call.getPeer(),
      method: call.getPath(),
    },
    finish: (code) => {
      if (finished) return;
      finished = true;
      events.off('cancelled', onCancel);
      observeGrpcCall({ path: call.getPath(), code: grpc.status[code ?? grpc.status.UNKNOWN], seconds: secondsSince(started) });
    },
    cancelled: () => controller.signal.aborted,
  };
}

/** The request messages of a client- or bidi-streaming call; ends when the client half-closes. */
async function* requestsOf(call: grpc.ServerReadableStream<Message, Message> | grpc.ServerDuplexStream<Message, Message>): AsyncGenerator<Message> {
  // A plain `for await` destroys the stream when the requests end, which on a duplex call also
  // kills the response side before its status is sent.
  for await (const message of call.iterator({ destroyOnReturn: false })) yield message as Message;
}

/** Unary and client-streaming calls: one response through the callback. */
function singleResponseHandler(
  method: DescMethod,
  handler: Handler,
  logger: Logger,
): grpc.handleUnaryCall<Message, Message> & grpc.handleClientStreamingCall<Message, Message> {
  type Call = grpc.ServerUnaryCall<Message, Message> | grpc.ServerReadableStream<Message, Message>;
  const handle = (call: Call, callback: grpc.sendUnaryData<Message>, span: Span | undefined) => {
    const { context, finish, cancelled } = callContext(call);
    Promise.resolve()
      .then(() =>
        handler(
          method.methodKind === 'unary'
            ? (call as grpc.ServerUnaryCall<Message, Message>).request
            : requestsOf(call as grpc.ServerReadableStream<Message, Message>),
          context,
        ),
      )
      .then(
        (response) => {
          const message = create(method.output as DescMessage, response as Record<string, unknown> | undefined);
          finish(grpc.status.OK);
          callback(null, message);
          endServerSpan(span);
        },
        (error: unknown) => {
          const status = statusOfError(error, { method: context.method, logger, cancelled: cancelled() });
          finish(status.code);
          callback(status);
          endServerSpan(span, error);
        },
      )
      .catch((error: unknown) => {
        // Building the response failed (e.g. a response init of the wrong shape).
        const status = statusOfError(error, { method: context.method, logger, cancelled: cancelled() });
        finish(status.code);
        callback(status);
        endServerSpan(span, error);
      });
  };
  // The whole call in its span, so the handler's spans and the lines logged on its failure name the trace.
  return (call: Call, callback: grpc.sendUnaryData<Message>) => {
    const span = startServerSpan(call.getPath(), call.metadata);
    inSpan(span, () => handle(call, callback, span));
  };
}

/** Resolves when the stream can take more data or the call ended. */
function drained(call: grpc.ServerWritableStream<Message, Message> | grpc.ServerDuplexStream<Message, Message>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.on('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Server- and bidi-streaming calls: the handler's async iterable is written out. */
function streamingResponseHandler(
  method: DescMethod,
  handler: Handler,
  logger: Logger,
): grpc.handleServerStreamingCall<Message, Message> & grpc.handleBidiStreamingCall<Message, Message> {
  return (call: grpc.ServerWritableStream<Message, Message> | grpc.ServerDuplexStream<Message, Message>) => {
    const { context, finish, cancelled } = callContext(call);
    const span = startServerSpan(call.getPath(), call.metadata);
    void inSpan(span, async () => {
      try {
        const input =
          method.methodKind === 'server_streaming'
            ? (call as grpc.ServerWritableStream<Message, Message>).request
            : requestsOf(call as grpc.ServerDuplexStream<Message, Message>);
        const responses = handler(input, context) as AsyncIterable<Record<string, unknown>>;
        for await (const response of responses) {
          if (context.signal.aborted) break;
          if (!call.write(create(method.output as DescMessage, response))) await drained(call, context.signal);
          if (context.signal.aborted) break;
        }
        finish(call.cancelled ? grpc.status.CANCELLED : grpc.status.OK);
        if (!call.cancelled) call.end();
        endServerSpan(span);
      } catch (error) {
        const status = statusOfError(error, { method: context.method, logger, cancelled: cancelled() });
        finish(call.cancelled ? grpc.status.CANCELLED : status.code);
        if (!call.cancelled) call.emit('error', status);
        endServerSpan(span, error);
      }
    });
  };
}

function formatAddress(host: string, port: number): string {
  const dialable = host === '0.0.0.0' || host === '::' || host === '' ? '127.0.0.1' : host;
  return dialable.includes(':') ? `[${dialable}]:${port}` : `${dialable}:${port}`;
}

/** Creates a gRPC server; see {@link RpcServer}. */
export function createRpcServer(options: RpcServerOptions = {}): RpcServer {
  const logger = options.logger ?? silentLogger();
  const shutdownTimeoutMs = options.shutdownTimeoutMs ?? 2000;
  const tokenCheck = options.internalToken === undefined ? [] : [tokenInterceptor(new InternalTokenVerifier(options.internalToken), logger)];
  const server = new grpc.Server({ ...options.grpcOptions, interceptors: [...tokenCheck, ...(options.grpcOptions?.interceptors ?? [])] });
  let state: 'new' | 'listening' | 'closed' = 'new';

  const rpcServer: RpcServer = {
    add(service, implementation) {
      if (state !== 'new') throw new RpcConfigurationError(`cannot add ${service.typeName}: the server already listens`);
      const definition: Record<string, grpc.MethodDefinition<Message, Message>> = {};
      const handlers: grpc.UntypedServiceImplementation = {};
      for (const method of service.methods.filter(isSupported)) {
        const handler = (implementation as Record<string, unknown>)[method.localName];
        if (typeof handler !== 'function') {
          throw new RpcConfigurationError(`the implementation of ${service.typeName} has no handler for ${method.localName}`);
        }
        const bound = (handler as Handler).bind(implementation);
        definition[method.localName] = methodDefinition(method);
        handlers[method.localName] =
          method.methodKind === 'unary' || method.methodKind === 'client_streaming'
            ? singleResponseHandler(method, bound, logger)
            : streamingResponseHandler(method, bound, logger);
      }
      try {
        server.addService(definition, handlers);
      } catch (cause) {
        throw new RpcConfigurationError(`cannot add ${service.typeName}: ${(cause as Error).message}`, { cause });
      }
      logger.debug({ service: service.typeName, methods: Object.values(definition).map((d) => d.path) }, 'rpc service added');
      return rpcServer;
    },

    async listen(host, port) {
      if (state !== 'new') throw new RpcListenError(`the server is ${state === 'listening' ? 'already listening' : 'closed'}`);
      state = 'listening';
      const bindHost = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
      const bound = await new Promise<number>((resolve, reject) => {
        server.bindAsync(`${bindHost}:${port}`, grpc.ServerCredentials.createInsecure(), (error, boundPort) => {
          if (error) reject(new RpcListenError(`cannot listen on ${bindHost}:${port}: ${error.message}`, { cause: error }));
          else resolve(boundPort);
        });
      }).catch((error: unknown) => {
        state = 'new';
        throw error;
      });
      const address = formatAddress(host, bound);
      logger.info({ address }, 'rpc server listening');
      return { address, port: bound };
    },

    async close() {
      if (state === 'closed') return;
      state = 'closed';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, shutdownTimeoutMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
  return rpcServer;
}
