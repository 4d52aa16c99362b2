/**
 * Spans of gRPC calls, when tracing is on (@berth/tracing). A call made inside a trace gets a
 * client span and carries its `traceparent` in the call's metadata; the server continues that
 * trace in a server span, active for the whole call (the handler, and the lines logged on its failure). Calls made outside any trace (health
 * checks, background loops) are not traced, so they cost nothing and start no traces of their own.
 *
 * Trust: a server believes the `traceparent` it is sent because only the platform's services call
 * it (they hold the internal token, checked before any handler runs); no tenant reaches gRPC.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import { endSpan, extractTraceContext, injectTraceContext, inTrace, SpanKind, startSpan, tracingOn, withSpan, type Span } from '@berth/tracing';
import type grpc from '@grpc/grpc-js';
import type { CallOptions } from './types.js';

function spanName(path: string): string {
  return path.replace(/^\//, '');
}

function rpcAttributes(path: string) {
  const [, service = '', method = ''] = path.split('/');
  return { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method };
}

/** Ends `span` when `promise` settles; returns the promise. */
function endWith<T>(span: Span, promise: Promise<T>): Promise<T> {
  return promise.then(
    (value) => {
      endSpan(span);
      return value;
    },
    (error: unknown) => {
      endSpan(span, error);
      throw error;
    },
  );
}

/** Iterates `source` with `span` active in each step (a generator's body runs in its caller's context), ending it at the end. */
async function* spanned<T>(span: Span, source: AsyncIterable<T>): AsyncGenerator<T, void, undefined> {
  const iterator = withSpan(span, () => source[Symbol.asyncIterator]());
  let failure: unknown;
  try {
    for (;;) {
      const step = await withSpan(span, () => iterator.next());
      if (step.done) return;
      yield step.value;
    }
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    await iterator.return?.();
    endSpan(span, failure);
  }
}

type ClientCall = (request: unknown, options?: CallOptions) => unknown;

/** A client method that makes a CLIENT span per call inside a trace and sends its `traceparent`. */
export function tracedClientMethod(method: DescMethod, path: string, call: ClientCall): ClientCall {
  const streamingResponses = method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming';
  return (request, options = {}) => {
    if (!inTrace()) return call(request, options);
    const span = startSpan(spanName(path), { kind: SpanKind.CLIENT, attributes: rpcAttributes(path) });
    const traced = { ...options, metadata: withSpan(span, () => injectTraceContext({ ...options.metadata })) };
    return streamingResponses
      ? spanned(span, call(request, traced) as AsyncIterable<unknown>)
      : endWith(
          span,
          withSpan(span, () => call(request, traced) as Promise<unknown>),
        );
  };
}

/**
 * The SERVER span of a call that carries a `traceparent` (undefined when it carries none, or
 * tracing is off): the caller's trace goes on in it.
 */
export function startServerSpan(path: string, metadata: grpc.Metadata): Span | undefined {
  if (!tracingOn()) return undefined;
  const [traceparent] = metadata.get('traceparent');
  if (typeof traceparent !== 'string') return undefined;
  const [tracestate] = metadata.get('tracestate');
  const parent = extractTraceContext({ traceparent, ...(typeof tracestate === 'string' ? { tracestate } : {}) });
  return startSpan(spanName(path), { kind: SpanKind.SERVER, parent, attributes: rpcAttributes(path) });
}

/** Runs `fn` with `span` active, when there is one. */
export function inSpan<T>(span: Span | undefined, fn: () => T): T {
  return span ? withSpan(span, fn) : fn();
}

export function endServerSpan(span: Span | undefined, error?: unknown): void {
  if (span) endSpan(span, error);
}
