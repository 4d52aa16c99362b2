/**
 * The platform's own tracing (OpenTelemetry). Off unless an OTLP endpoint is configured: then no
 * SDK is loaded, the API's no-op tracer stays in place and every hook below returns at its first
 * `tracingOn()` check. On, {@link startTracing} loads the SDK (a dynamic import), registers it as
 * the process's tracer provider with an AsyncLocalStorage context manager and the W3C
 * `traceparent` propagator, and batches spans to the endpoint over OTLP/HTTP (JSON).
 *
 * The hooks live where the work is: @berth/http (a server span per request), @berth/rpc (client
 * and server spans, `traceparent` in the call's metadata), @berth/db (a span per statement),
 * @berth/log (`trace_id`/`span_id` on every line logged inside a span).
 */
import { context, propagation, trace, SpanKind, SpanStatusCode, type Attributes, type Context, type Link, type Span } from '@opentelemetry/api';

import type { EventEmitter } from 'node:events';

export { SpanKind, type Span } from '@opentelemetry/api';

/** Where spans go. Parsed from the standard `OTEL_EXPORTER_OTLP_*` variables by @berth/config's `parseTracingEnv`. */
export interface TracingConfig {
  /**
   * The OTLP/HTTP traces URL (`http://collector:4318/v1/traces`).
   * @default none: tracing is off
   */
  otlpTracesEndpoint?: string;
  /**
   * Headers sent with every export (a collector's credentials).
   * @default none
   */
  otlpHeaders?: Record<string, string>;
}

/** A started (or, without an endpoint, never started) tracing SDK. */
export interface Tracing {
  readonly enabled: boolean;
  /** Exports the spans still buffered, then stops; the process's hooks go back to doing nothing. */
  shutdown(): Promise<void>;
}

/** {@link startTracing} was called while tracing already runs in this process. */
export class TracingAlreadyStartedError extends Error {
  override name = 'TracingAlreadyStartedError';
}

let on = false;

/** Whether spans are recorded in this process: the hooks' first check, so tracing off costs one branch. */
export function tracingOn(): boolean {
  return on;
}

/**
 * Starts the SDK when `config` names an endpoint; otherwise returns a handle that does nothing.
 * Once per process (the embedded mode runs every service in one: they share the provider).
 * @param serviceName the resource's `service.name` (`gateway`, `control-plane`, `berth` in the embedded mode)
 * @param onError where failed exports are reported (the exporter otherwise retries and drops quietly)
 */
export async function startTracing(config: TracingConfig, serviceName: string, onError: (message: string) => void): Promise<Tracing> {
  const endpoint = config.otlpTracesEndpoint;
  if (endpoint === undefined) return { enabled: false, shutdown: async () => undefined };
  if (on) throw new TracingAlreadyStartedError('tracing already runs in this process');
  on = true;
  try {
    const { startSdk } = await import('./sdk.js');
    const sdk = startSdk({ endpoint, headers: config.otlpHeaders ?? {}, serviceName, onError });
    return {
      enabled: true,
      shutdown: async () => {
        on = false;
        try {
          await sdk.shutdown();
        } finally {
          trace.disable();
          context.disable();
          propagation.disable();
        }
      },
    };
  } catch (error) {
    on = false;
    throw error;
  }
}

function tracer() {
  return trace.getTracer('berth');
}

/** Options of {@link startSpan}. */
export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /**
   * The parent: the active context unless given; `root` starts a new trace.
   * @default the active context
   */
  parent?: Context | 'root';
}

/** Starts a span (tracing must be on: callers check {@link tracingOn} first). */
export function startSpan(name: string, options: SpanOptions = {}): Span {
  const { parent, ...rest } = options;
  return tracer().startSpan(
    name,
    { ...rest, ...(parent === 'root' ? { root: true } : {}) },
    parent === 'root' || parent === undefined ? context.active() : parent,
  );
}

/** Whether a span is active here: statement-level hooks trace only work that is part of a trace. */
export function inTrace(): boolean {
  return on && trace.getActiveSpan() !== undefined;
}

/** Runs `fn` with `span` active, so the spans and log lines it makes belong to it. */
export function withSpan<T>(span: Span, fn: () => T): T {
  return context.with(trace.setSpan(context.active(), span), fn);
}

/**
 * Makes the listeners later added to `emitter` run with `span` active: a request's body arrives in
 * events of its socket, whose callbacks would otherwise run outside the request's context.
 */
export function bindToSpan<E extends EventEmitter>(span: Span, emitter: E): E {
  return context.bind(trace.setSpan(context.active(), span), emitter);
}

/**
 * Ends `span`, marking it failed when `error` is given: by the error's class only, as messages
 * quote ids and values (the log line of the failure, which names the trace, has the message).
 */
export function endSpan(span: Span, error?: unknown): void {
  if (error !== undefined) {
    const type = error instanceof Error ? error.name : typeof error;
    span.setStatus({ code: SpanStatusCode.ERROR, message: type });
    span.setAttribute('error.type', type);
  }
  span.end();
}

/** Marks `span` failed without an exception (an HTTP 5xx answer). */
export function failSpan(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** Runs `fn` in a child span of the active one, if there is one (otherwise just runs it). */
export async function traced<T>(name: string, attributes: Attributes, fn: () => Promise<T>, kind: SpanKind = SpanKind.CLIENT): Promise<T> {
  if (!inTrace()) return fn();
  const span = startSpan(name, { kind, attributes });
  try {
    const result = await withSpan(span, fn);
    endSpan(span);
    return result;
  } catch (error) {
    endSpan(span, error);
    throw error;
  }
}

/** `trace_id` and `span_id` of the active span, for log lines; undefined outside one or when tracing is off. */
export function traceFields(span: Span | undefined = on ? trace.getActiveSpan() : undefined): { trace_id: string; span_id: string } | undefined {
  if (span === undefined) return undefined;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** Writes the active context's `traceparent` (and `tracestate`) into `carrier`. */
export function injectTraceContext(carrier: Record<string, string>): Record<string, string> {
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context a carrier's `traceparent` names (the active one when it names none). */
export function extractTraceContext(carrier: Readonly<Record<string, string | string[] | undefined>>): Context {
  return propagation.extract(context.active(), carrier);
}

/** The span context a carrier's `traceparent` names, to link to; undefined when it names none. */
export function linkOf(carrier: Readonly<Record<string, string | string[] | undefined>>): Link | undefined {
  const spanContext = trace.getSpanContext(extractTraceContext(carrier));
  return spanContext && trace.isSpanContextValid(spanContext) ? { context: spanContext } : undefined;
}

// Spans of Redis commands and S3 calls made inside a trace, for the clients the services create
// (ioredis, the AWS SDK v3). Structural types: this package depends on neither client. Both
// wrappers return the client untouched when tracing is off.

/** What {@link traceRedis} needs of an ioredis client. */
interface RedisClient {
  sendCommand(command: { name: string }, ...rest: never[]): unknown;
}

/** A span per command (`GET`, `XADD`; never its keys or values) made inside a trace. */
export function traceRedis<R extends RedisClient>(client: R): R {
  if (!tracingOn()) return client;
  const plain = client.sendCommand.bind(client) as (command: { name: string }, ...rest: unknown[]) => unknown;
  (client as unknown as { sendCommand: typeof plain }).sendCommand = (command, ...rest) => {
    if (!inTrace()) return plain(command, ...rest);
    const name = command.name.toUpperCase();
    const span = startSpan(name, { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'db.operation.name': name } });
    const result = plain(command, ...rest) as Promise<unknown>;
    result.then(
      () => endSpan(span),
      (error: unknown) => endSpan(span, error),
    );
    return result;
  };
  return client;
}

type Middleware = (next: (args: unknown) => Promise<unknown>, context: { commandName?: string }) => (args: unknown) => Promise<unknown>;

/** What {@link traceS3} needs of an AWS SDK v3 client (its middleware types, loosely: this package does not depend on the SDK). */
interface AwsClient {
  middlewareStack: { add(middleware: never, options: never): void };
}

/** A span per S3 call (`S3.PutObject`; never its bucket's keys) made inside a trace. */
export function traceS3<C extends AwsClient>(client: C): C {
  if (!tracingOn()) return client;
  const stack = client.middlewareStack as unknown as { add(middleware: Middleware, options: { step: 'initialize'; name: string }): void };
  stack.add(
    (next, context) => (args) => {
      const method = (context.commandName ?? 'Unknown').replace(/Command$/, '');
      return traced(`S3.${method}`, { 'rpc.system': 'aws-api', 'rpc.service': 'S3', 'rpc.method': method }, () => next(args));
    },
    { step: 'initialize', name: 'berthTracing' },
  );
  return client;
}
