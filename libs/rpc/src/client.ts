/**
 * A typed gRPC client (grpc-js) for a protobuf-es v2 service descriptor. Failed calls reject with
 * BerthErrors, mapped by `status.ts`.
 */
import { create, type DescMessage, type DescMethod, type DescService, type Message } from '@bufbuild/protobuf';
import grpc from '@grpc/grpc-js';
import { AUTHORIZATION_METADATA, assertValidInternalToken, bearer } from './auth.js';
import { isSupported, methodDefinition, toGrpcMetadata } from './codec.js';
import { RpcConfigurationError } from './errors.js';
import { errorOfStatus } from './status.js';
import { tracedClientMethod } from './tracing.js';
import type { CallOptions, RpcClient } from './types.js';

/** Options of {@link createRpcClient}. */
export interface RpcClientOptions {
  /**
   * Deadline of unary calls that pass no `timeoutMs`, in milliseconds. Server-streaming calls
   * have no default deadline. `Infinity` disables it.
   * @default 30000
   */
  defaultTimeoutMs?: number;
  /** Extra grpc-js channel options (keepalive, message size limits, …). */
  channelOptions?: grpc.ChannelOptions;
  /**
   * The internal token (`BERTH_INTERNAL_TOKEN`) sent on every call as `authorization: Bearer <token>`;
   * it replaces any `authorization` a call's metadata names.
   * @default none: calls carry no credentials (servers without a token only, i.e. tests and development)
   */
  internalToken?: string;
}

/** Builds each call's metadata: the call's own, plus the token. */
type MetadataOf = (options: CallOptions) => grpc.Metadata;

type RequestInit = Record<string, unknown> | undefined;

function grpcCallOptions(timeoutMs: number | undefined): grpc.CallOptions {
  return timeoutMs === undefined || timeoutMs === Infinity ? {} : { deadline: Date.now() + timeoutMs };
}

/**
 * A call with one response (unary or client-streaming): `start` makes it with the callback given;
 * the promise settles with the response, the call's status as a BerthError, or the signal's reason.
 */
function singleResponse(path: string, signal: AbortSignal | undefined, start: (done: grpc.requestCallback<Message>) => { cancel(): void }): Promise<Message> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<Message>((resolve, reject) => {
    const call = start((error, response) => {
      signal?.removeEventListener('abort', onAbort);
      if (signal?.aborted) reject(signal.reason);
      else if (error || response === undefined) reject(errorOfStatus(error, path));
      else resolve(response);
    });
    function onAbort() {
      call.cancel();
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function unaryMethod(client: grpc.Client, method: DescMethod, defaultTimeoutMs: number, metadataOf: MetadataOf) {
  const definition = methodDefinition(method);
  return (request: RequestInit, options: CallOptions = {}): Promise<Message> =>
    singleResponse(definition.path, options.signal, (done) =>
      client.makeUnaryRequest<Message, Message>(
        definition.path,
        definition.requestSerialize,
        definition.responseDeserialize,
        create(method.input as DescMessage, request),
        metadataOf(options),
        grpcCallOptions(options.timeoutMs ?? defaultTimeoutMs),
        done,
      ),
    );
}

function serverStreamingMethod(client: grpc.Client, method: DescMethod, metadataOf: MetadataOf) {
  const definition = methodDefinition(method);
  return async function* (request: RequestInit, options: CallOptions = {}): AsyncGenerator<Message, void, undefined> {
    const { signal } = options;
    if (signal?.aborted) throw signal.reason;
    const call = client.makeServerStreamRequest<Message, Message>(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      create(method.input as DescMessage, request),
      metadataOf(options),
      grpcCallOptions(options.timeoutMs),
    );
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const response of call) yield response as Message;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw errorOfStatus(error, definition.path);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Stopped early (break, throw in the loop body): end the call; ignore its CANCELLED status.
      call.on('error', () => undefined);
      call.cancel();
    }
  };
}

/** Writes the requests of a streaming call, honouring backpressure, then half-closes it. */
async function writeRequests(
  call: grpc.ClientWritableStream<Message> | grpc.ClientDuplexStream<Message, Message>,
  method: DescMethod,
  requests: AsyncIterable<RequestInit>,
): Promise<void> {
  try {
    for await (const request of requests) {
      if (call.destroyed || call.writableEnded) return;
      if (!call.write(create(method.input as DescMessage, request))) {
        await new Promise<void>((resolve) => {
          const done = () => {
            call.off('drain', done);
            call.off('close', done);
            resolve();
          };
          call.on('drain', done);
          call.on('close', done);
        });
      }
    }
    if (!call.destroyed && !call.writableEnded) call.end();
  } catch (error) {
    // The request source failed: the call cannot go on.
    call.cancel();
    throw error;
  }
}

function clientStreamingMethod(client: grpc.Client, method: DescMethod, defaultTimeoutMs: number, metadataOf: MetadataOf) {
  const definition = methodDefinition(method);
  return (requests: AsyncIterable<RequestInit>, options: CallOptions = {}): Promise<Message> => {
    let writing: Promise<void> = Promise.resolve();
    const response = singleResponse(definition.path, options.signal, (done) => {
      const call = client.makeClientStreamRequest<Message, Message>(
        definition.path,
        definition.requestSerialize,
        definition.responseDeserialize,
        metadataOf(options),
        grpcCallOptions(options.timeoutMs ?? defaultTimeoutMs),
        done,
      );
      writing = writeRequests(call, method, requests);
      return call;
    });
    // A failed request source fails the call (writeRequests cancels it) with its own error.
    return Promise.race([response, writing.then(() => response)]);
  };
}

function bidiStreamingMethod(client: grpc.Client, method: DescMethod, metadataOf: MetadataOf) {
  const definition = methodDefinition(method);
  return async function* (requests: AsyncIterable<RequestInit>, options: CallOptions = {}): AsyncGenerator<Message, void, undefined> {
    const { signal } = options;
    if (signal?.aborted) throw signal.reason;
    const call = client.makeBidiStreamRequest<Message, Message>(
      definition.path,
      definition.requestSerialize,
      definition.responseDeserialize,
      metadataOf(options),
      grpcCallOptions(options.timeoutMs),
    );
    const onAbort = () => call.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    let sourceError: unknown;
    writeRequests(call, method, requests).catch((error: unknown) => {
      sourceError = error;
    });
    try {
      for await (const response of call) yield response as Message;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (sourceError !== undefined) throw sourceError;
      throw errorOfStatus(error, definition.path);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      call.on('error', () => undefined);
      call.cancel();
    }
  };
}

/**
 * Creates a client of `service` at `address` (`host:port`, plaintext). Unary methods return a
 * promise of the response message; server-streaming methods return an async iterable that
 * starts the call when iteration begins and cancels it when iteration stops early. Failures are
 * BerthErrors: the server's own error class when it sent one, otherwise the class the gRPC
 * status maps to (e.g. `UnavailableError` when the server is down, `DeadlineExceededError`),
 * with the grpc-js error as `cause`; `RpcCredentialsRefusedError` when the server refused the
 * internal token. A call aborted through `signal` rejects with `signal.reason`.
 */
export function createRpcClient<S extends DescService>(service: S, address: string, options: RpcClientOptions = {}): RpcClient<S> {
  const supported = service.methods.filter(isSupported);
  if (supported.some((method) => method.localName === 'close')) {
    throw new RpcConfigurationError(`${service.typeName} has a method named "close", which clashes with RpcClient.close()`);
  }
  const defaultTimeoutMs = options.defaultTimeoutMs ?? 30_000;
  const { internalToken } = options;
  if (internalToken !== undefined) assertValidInternalToken(internalToken);
  const metadataOf: MetadataOf = (call) =>
    toGrpcMetadata(internalToken === undefined ? call.metadata : { ...call.metadata, [AUTHORIZATION_METADATA]: bearer(internalToken) });
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), options.channelOptions);
  const methods: Record<string, unknown> = {
    close: () => client.close(),
  };
  for (const method of supported) {
    const call =
      method.methodKind === 'unary'
        ? unaryMethod(client, method, defaultTimeoutMs, metadataOf)
        : method.methodKind === 'server_streaming'
          ? serverStreamingMethod(client, method, metadataOf)
          : method.methodKind === 'client_streaming'
            ? clientStreamingMethod(client, method, defaultTimeoutMs, metadataOf)
            : bidiStreamingMethod(client, method, metadataOf);
    methods[method.localName] = tracedClientMethod(method, methodDefinition(method).path, call as Parameters<typeof tracedClientMethod>[2]);
  }
  return methods as RpcClient<S>;
}
