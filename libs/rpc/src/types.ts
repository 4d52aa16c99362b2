/**
 * Types that derive server implementations and clients from protobuf-es v2 service descriptors
 * (`GenService` exports of the generated `*_pb.ts` files).
 */
import type { DescMessage, DescMethod, DescService, MessageInitShape, MessageShape } from '@bufbuild/protobuf';

/** The method kinds @berth/rpc serves and calls (all four gRPC kinds). */
export type SupportedMethodKind = 'unary' | 'server_streaming' | 'client_streaming' | 'bidi_streaming';

/** What a handler knows about the call it serves. */
export interface CallContext {
  /**
   * Aborted when the call ends before the handler does: the client cancelled or gave up at its
   * deadline, the connection dropped or the server shut down (reason `RpcCancelledError`), or
   * the server's own deadline timer fired first (reason `DeadlineExceededError`). Pass it on to
   * anything slow the handler awaits.
   */
  readonly signal: AbortSignal;
  /**
   * Request metadata as a plain record of lower-case keys (first value of a repeated key).
   * Values of binary `*-bin` keys are base64 strings.
   */
  readonly metadata: Readonly<Record<string, string>>;
  /** The client's address, e.g. `127.0.0.1:53422`. */
  readonly peer: string;
  /** The full method path, e.g. `/grpc.health.v1.Health/Check`. */
  readonly method: string;
}

/** A unary handler: one request in, one response (a message or its init object) out. */
export type UnaryMethodImpl<I extends DescMessage, O extends DescMessage> = (request: MessageShape<I>, context: CallContext) => Promise<MessageInitShape<O>>;

/**
 * A server-streaming handler: an async iterable (typically an async generator) of responses.
 * The call ends when it finishes; a throw ends the call with the mapped error status. A
 * generator that waits for a long time should watch `context.signal`.
 */
export type ServerStreamingMethodImpl<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  context: CallContext,
) => AsyncIterable<MessageInitShape<O>>;

/**
 * A client-streaming handler: the requests as an async iterable (it ends when the client half-closes),
 * one response out.
 */
export type ClientStreamingMethodImpl<I extends DescMessage, O extends DescMessage> = (
  requests: AsyncIterable<MessageShape<I>>,
  context: CallContext,
) => Promise<MessageInitShape<O>>;

/**
 * A bidi-streaming handler: the requests as an async iterable, the responses as one. The call ends
 * when the responses end; a throw ends it with the mapped error status.
 */
export type BidiStreamingMethodImpl<I extends DescMessage, O extends DescMessage> = (
  requests: AsyncIterable<MessageShape<I>>,
  context: CallContext,
) => AsyncIterable<MessageInitShape<O>>;

/** The handler type of one method descriptor. */
export type MethodImpl<M extends DescMethod> = M['methodKind'] extends 'unary'
  ? UnaryMethodImpl<M['input'], M['output']>
  : M['methodKind'] extends 'server_streaming'
    ? ServerStreamingMethodImpl<M['input'], M['output']>
    : M['methodKind'] extends 'client_streaming'
      ? ClientStreamingMethodImpl<M['input'], M['output']>
      : M['methodKind'] extends 'bidi_streaming'
        ? BidiStreamingMethodImpl<M['input'], M['output']>
        : never;

/** Names (`localName`, e.g. `check`) of the unary and server-streaming methods of a service. */
export type SupportedMethodName<S extends DescService> = {
  [K in keyof S['method']]: S['method'][K]['methodKind'] extends SupportedMethodKind ? K : never;
}[keyof S['method']];

/** A server implementation of a service: one handler per unary or server-streaming method. */
export type ServiceImplementation<S extends DescService> = {
  [K in SupportedMethodName<S>]: MethodImpl<S['method'][K]>;
};

/** Per-call options of a client method. */
export interface CallOptions {
  /**
   * Deadline of the call in milliseconds from now; `Infinity` for none. When omitted, unary
   * calls use the client's `defaultTimeoutMs` and server-streaming calls have no deadline.
   */
  timeoutMs?: number;
  /** Cancels the call; the call then rejects (or the stream throws) with `signal.reason`. */
  signal?: AbortSignal;
  /** Request metadata. Keys are lower-case; values of `*-bin` keys are base64 strings. */
  metadata?: Readonly<Record<string, string>>;
}

/**
 * The client method of one method descriptor. Streaming requests are an async iterable the call
 * reads as the server can take them (see `Pushable` for one fed from callbacks); the request stream
 * is half-closed when the iterable ends.
 */
export type ClientMethod<M extends DescMethod> = M['methodKind'] extends 'unary'
  ? (request?: MessageInitShape<M['input']>, options?: CallOptions) => Promise<MessageShape<M['output']>>
  : M['methodKind'] extends 'server_streaming'
    ? (request?: MessageInitShape<M['input']>, options?: CallOptions) => AsyncIterable<MessageShape<M['output']>>
    : M['methodKind'] extends 'client_streaming'
      ? (requests: AsyncIterable<MessageInitShape<M['input']>>, options?: CallOptions) => Promise<MessageShape<M['output']>>
      : M['methodKind'] extends 'bidi_streaming'
        ? (requests: AsyncIterable<MessageInitShape<M['input']>>, options?: CallOptions) => AsyncIterable<MessageShape<M['output']>>
        : never;

/** A typed client of a service: one method per unary or server-streaming method, plus `close()`. */
export type RpcClient<S extends DescService> = {
  [K in SupportedMethodName<S>]: ClientMethod<S['method'][K]>;
} & {
  /** Closes the channel; calls in flight are cancelled. */
  close(): void;
};
