/**
 * gRPC calls in the platform's own traces (docs/operate/monitor.md): a call made inside a trace has
 * a client span, its `traceparent` travels in the metadata, and the server's span continues the
 * trace while the handler runs, through each step of a streaming answer; lines the handler logs name
 * the trace. A call made outside any trace records nothing.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';
import { EchoService } from '@berth/proto';
import { createLogger } from '@berth/log';
import { startOtlpCollector, type ExportedSpan, type OtlpCollector } from '@berth/testing';
import { endSpan, startSpan, startTracing, withSpan } from '@berth/tracing';
import { createRpcClient } from './client.js';
import { Cleanup, streamingEcho } from './__tests__/servers.js';

const cleanup = new Cleanup();
let collector: OtlpCollector;
const logged: Record<string, unknown>[] = [];

beforeAll(async () => {
  collector = await startOtlpCollector();
  const tracing = await startTracing({ otlpTracesEndpoint: `${collector.url}/v1/traces` }, 'test', (message) => {
    throw new Error(message);
  });
  const lines = new PassThrough();
  lines.on('data', (chunk: Buffer) =>
    logged.push(
      ...chunk
        .toString('utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    ),
  );
  const log = createLogger({ name: 'server', destination: lines });
  try {
    const { address } = await cleanup.server(
      (server) =>
        server.add(EchoService, {
          ...streamingEcho,
          echo: async (request) => {
            if (request.message === 'fail') throw new Error('the handler failed');
            log.info({ message: request.message }, 'echoing');
            // Only in the traced call: outside a trace, a span made here would start a trace of its own.
            if (request.message === 'traced') endSpan(startSpan('inside echo'));
            return { message: request.message };
          },
          count: async function* (request) {
            for (let index = 0; index < request.count; index++) {
              endSpan(startSpan(`step ${index}`));
              yield { index };
            }
          },
        }),
      log,
    );
    const client = createRpcClient(EchoService, address);
    cleanup.add(() => client.close());
    const caller = startSpan('caller');
    await withSpan(caller, async () => {
      await client.echo({ message: 'traced' });
      for await (const _ of client.count({ count: 2 }));
      await expect(client.echo({ message: 'fail' })).rejects.toThrow();
    });
    endSpan(caller);
    await client.echo({ message: 'untraced' });
  } finally {
    await cleanup.run();
    await tracing.shutdown();
  }
});
afterAll(async () => {
  await collector?.close();
});

const named = (name: string) => collector.spans.filter((span) => span.name === name);
const childOf = (parent: ExportedSpan, name: string) => {
  const found = collector.spans.filter((span) => span.name === name && span.parentSpanId === parent.spanId && span.traceId === parent.traceId);
  expect(found).toHaveLength(1);
  return found[0]!;
};

it("continues the caller's trace on the server: caller → client span → server span → the handler's spans", () => {
  const [caller] = named('caller');
  const echo = `${EchoService.typeName}/Echo`;
  // The call that succeeded (the failing one is the last test's).
  const client = collector.spans.find((span) => span.name === echo && span.parentSpanId === caller!.spanId && span.status?.code !== 2)!;
  const server = childOf(client, echo);
  childOf(server, 'inside echo');
  const count = `${EchoService.typeName}/Count`;
  const streaming = childOf(childOf(caller!, count), count);
  childOf(streaming, 'step 0');
  childOf(streaming, 'step 1');
});

it("names the trace in the handler's log lines and in the line that logs its failure", () => {
  const [served, failed] = named(`${EchoService.typeName}/Echo`).filter((span) => span.kind === 2);
  expect(logged.find((line) => line['msg'] === 'echoing')).toMatchObject({ trace_id: served!.traceId, span_id: served!.spanId });
  expect(failed!.status).toMatchObject({ code: 2, message: 'Error' });
  const failure = logged.find((line) => (line['err'] as { message?: string } | undefined)?.message === 'the handler failed');
  expect(failure).toMatchObject({ trace_id: failed!.traceId, span_id: failed!.spanId });
});

it('records nothing for a call made outside any trace', () => {
  expect(named(`${EchoService.typeName}/Echo`)).toHaveLength(4);
  expect(collector.spans.map((span) => span.traceId).every((id) => id === named('caller')[0]!.traceId)).toBe(true);
});
