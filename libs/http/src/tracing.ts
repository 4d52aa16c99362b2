/**
 * The server span of an HTTP request, when tracing is on (@berth/tracing).
 *
 * Trust: every request starts a new trace. The gateway is reached by tenants and by their deployed
 * graphs, and a `traceparent` from one would otherwise put the platform's spans into a trace id the
 * caller chose, another tenant's trace included. The caller's `traceparent` is kept only as a span
 * link (its ids, not a parent), which joins nothing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bindToSpan, endSpan, failSpan, linkOf, SpanKind, startSpan, tracingOn, type Span } from '@berth/tracing';

/** Starts the request's span (undefined when tracing is off), active for the listeners of `req`. */
export function startRequestSpan(req: IncomingMessage, requestId: string): Span | undefined {
  if (!tracingOn()) return undefined;
  const link = linkOf(req.headers);
  const span = startSpan(req.method ?? 'HTTP', {
    kind: SpanKind.SERVER,
    parent: 'root',
    ...(link ? { links: [link] } : {}),
    attributes: { 'http.request.method': req.method ?? '', 'berth.request_id': requestId },
  });
  bindToSpan(span, req);
  return span;
}

/** Names the span by the route template that served it (never the URL, which holds ids), and ends it. */
export function endRequestSpan(span: Span, req: IncomingMessage, res: ServerResponse): void {
  if (req.routeTemplate) {
    span.updateName(`${req.method} ${req.routeTemplate}`);
    span.setAttribute('http.route', req.routeTemplate);
  }
  span.setAttribute('http.response.status_code', res.statusCode);
  if (res.statusCode >= 500) failSpan(span, `HTTP ${res.statusCode}`);
  if (!res.writableFinished) span.setAttribute('berth.aborted', true);
  endSpan(span);
}
