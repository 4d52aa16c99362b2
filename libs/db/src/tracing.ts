/**
 * A span per Postgres statement made inside a trace, when tracing is on (@berth/tracing): named
 * by the statement's kind and the schema (`SELECT control_plane`), never its text or values.
 * Statements outside any trace (background loops) are not traced.
 */
import type pg from 'pg';
import { endSpan, failSpan, inTrace, SpanKind, startSpan, type Span } from '@berth/tracing';

/** The statement's first keyword (`SELECT`, `INSERT`, `WITH`, ...); `QUERY` when it has none. */
export function statementKind(text: unknown): string {
  const match = typeof text === 'string' ? /^\s*([A-Za-z]{1,16})\b/.exec(text) : null;
  return match?.[1]?.toUpperCase() ?? 'QUERY';
}

/** Ends a statement's span; a failure is named by its SQLSTATE only (pg's messages can quote values). */
function endStatement(span: Span, error: unknown): void {
  if (error) {
    const code = (error as { code?: unknown }).code;
    failSpan(span, typeof code === 'string' ? `SQLSTATE ${code}` : 'statement failed');
    span.setAttribute('error.type', typeof code === 'string' ? code : 'Error');
  }
  endSpan(span);
}

type Query = (...args: unknown[]) => unknown;

/** Wraps `client.query` of a new pool connection so each statement made inside a trace gets a span. */
export function traceStatements(client: pg.PoolClient, schema: string): void {
  const plain = client.query.bind(client) as Query;
  (client as unknown as { query: Query }).query = (...args: unknown[]) => {
    const [first] = args;
    // Cursors and streams (objects that submit themselves) are not wrapped.
    if (!inTrace() || typeof (first as { submit?: unknown } | undefined)?.submit === 'function') return plain(...args);
    const kind = statementKind(typeof first === 'string' ? first : (first as { text?: unknown } | undefined)?.text);
    const span = startSpan(`${kind} ${schema}`, {
      kind: SpanKind.CLIENT,
      attributes: { 'db.system.name': 'postgresql', 'db.namespace': schema, 'db.operation.name': kind },
    });
    const callbackAt = args.findIndex((arg) => typeof arg === 'function');
    if (callbackAt >= 0) {
      const callback = args[callbackAt] as (error: unknown, result: unknown) => void;
      args[callbackAt] = (error: unknown, result: unknown) => {
        endStatement(span, error);
        callback(error, result);
      };
      return plain(...args);
    }
    const result = plain(...args) as Promise<unknown>;
    result.then(
      () => endStatement(span, undefined),
      (error: unknown) => endStatement(span, error),
    );
    return result;
  };
}
