/**
 * Spans of gRPC calls, when tracing is on (@berth/tracing). A call made inside a trace gets a
 * client span and carries its `traceparent` in the call's metadata; the server continues that
 * trace in a server span, active while the handler runs. Calls made outside any trace (health
 * checks, background loops) are not traced, so they cost nothing and start no traces of their own.
 *
 * Trust: a server believes the `traceparent` it is sent because only the platform's services call
 * it (they hold the internal token, checked before any handler runs); no tenant reaches gRPC.
 */
import type { DescMethod } from '@bufbuild/protobuf';
import { endSpan, extractTraceContext, injectTraceContext, inTrace, SpanKind, startSpan, tracingOn, withSpan, type Span } from '@berth/tracing';
import type { CallContext, CallOptions } from './types.js';

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

type Handler = (request: never, context: CallContext) => unknown;

/** A handler that continues the caller's trace (when the call carries one) in a SERVER span. */
export function tracedHandler<H extends Handler>(method: DescMethod, handler: H): H {
  const streamingResponses = method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming';
  return ((request: never, call: CallContext) => {
    if (!tracingOn() || call.metadata['traceparent'] === undefined) return handler(request, call);
    const parent = extractTraceContext(call.metadata);
    const span = startSpan(spanName(call.method), { kind: SpanKind.SERVER, parent, attributes: rpcAttributes(call.method) });
    return streamingResponses
      ? spanned(span, handler(request, call) as AsyncIterable<unknown>)
      : endWith(
          span,
          withSpan(span, async () => handler(request, call)),
        );
  }) as H;
}
