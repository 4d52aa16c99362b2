/**
 * The platform's own tracing (docs/operate/monitor.md), through a real gateway, control plane and
 * Postgres: with an OTLP endpoint, one API call's spans reach an in-test OTLP/HTTP collector as one
 * trace, gateway request → gRPC client → gRPC server → Postgres statements, named by route template
 * and statement kind (never the URL's ids or a statement's text), and the request's log line names
 * the trace. A caller's `traceparent` is only a link: it cannot put the platform's spans into a
 * trace the caller chose. Without an endpoint nothing starts: no recording tracer, no trace ids.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { parseTracingEnv } from '@berth/config';
import { SecretBox, start as startControlPlane, type RunningControlPlane } from '@berth/control-plane';
import {
  captureLogger,
  createTestDatabase,
  spanAttribute,
  startOtlpCollector,
  type CapturedLogs,
  type ExportedSpan,
  type OtlpCollector,
  type TestDatabase,
} from '@berth/testing';
import { startTracing, type Tracing } from '@berth/tracing';
import { AGENT_SERVE_SCRIPT } from '../../agent-runtime/src/index.js';
import { start, type RunningGateway } from './index.js';
import { testGatewayConfig } from './__tests__/test-config.js';

interface Stack {
  gateway: RunningGateway;
  controlPlane: RunningControlPlane;
  gatewayLogs: CapturedLogs;
  controlPlaneLogs: CapturedLogs;
  key: string;
  close(): Promise<void>;
}

let db: TestDatabase;
let work: string;

async function startStack(): Promise<Stack> {
  const gatewayLogs = captureLogger('gateway');
  const controlPlaneLogs = captureLogger('control-plane');
  const controlPlane = await startControlPlane(
    {
      databaseUrl: db.url,
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      logLevel: 'debug',
      deployments: {
        secretKey: SecretBox.generateKey(),
        artifactsDir: join(work, 'artifacts'),
        processEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: work },
        agentServeScript: AGENT_SERVE_SCRIPT,
      },
    },
    controlPlaneLogs.logger,
  );
  const gateway = await start({ ...testGatewayConfig(db.url, controlPlane.address), logLevel: 'debug' }, gatewayLogs.logger);
  const tenant = await gateway.store.createTenant({ name: `t-${randomUUID().slice(0, 8)}` });
  const { key } = await gateway.store.createApiKey({ tenantId: tenant.id, name: 'ops', role: 'admin' });
  return {
    gateway,
    controlPlane,
    gatewayLogs,
    controlPlaneLogs,
    key,
    close: async () => {
      await gateway.close();
      await controlPlane.close();
    },
  };
}

/** A `traceparent` as a caller outside the platform would send it. */
function foreignTraceparent() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

beforeAll(async () => {
  db = await createTestDatabase('gw_platform_tracing');
  work = await mkdtemp(join(tmpdir(), 'berth-platform-tracing-'));
}, 60_000);
afterAll(async () => {
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

describe('without an OTLP endpoint', () => {
  it('starts no SDK: nothing records a span and no log line names a trace', async () => {
    const tracing = await startTracing(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }), 'berth', (message) => {
      throw new Error(message);
    });
    const stack = await startStack();
    try {
      expect(tracing.enabled).toBe(false);
      const res = await fetch(`${stack.gateway.url}/v2/deployments/${randomUUID()}`, {
        headers: { 'x-api-key': stack.key, traceparent: foreignTraceparent().header },
      });
      expect(res.status).toBe(404);
      // The API's no-op tracer is still the process's: no provider was registered.
      expect(trace.getTracer('probe').startSpan('probe').isRecording()).toBe(false);
      const lines = stack.gatewayLogs.lines();
      expect(lines.some((line) => line['msg'] === 'request completed')).toBe(true);
      expect(lines.filter((line) => 'trace_id' in line || 'span_id' in line)).toEqual([]);
    } finally {
      await stack.close();
      await tracing.shutdown();
    }
  }, 60_000);
});

describe('with an OTLP endpoint', () => {
  let collector: OtlpCollector;
  let tracing: Tracing;
  let stack: Stack;
  const deploymentId = randomUUID();
  const foreign = foreignTraceparent();
  let status: number;
  let requestId: string | null;

  beforeAll(async () => {
    collector = await startOtlpCollector();
    const exportErrors: string[] = [];
    tracing = await startTracing(parseTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url }), 'berth', (message) => exportErrors.push(message));
    stack = await startStack();
    const res = await fetch(`${stack.gateway.url}/v2/deployments/${deploymentId}`, { headers: { 'x-api-key': stack.key, traceparent: foreign.header } });
    status = res.status;
    requestId = res.headers.get('x-request-id');
    await stack.close();
    // Shutting down exports what is still batched.
    await tracing.shutdown();
    expect(exportErrors).toEqual([]);
    expect(new Set(collector.exports.map((e) => `${e.path} ${e.type}`))).toEqual(new Set(['/v1/traces application/json']));
  }, 60_000);
  afterAll(async () => {
    await collector?.close();
  });

  function requestSpan(): ExportedSpan {
    const found = collector.spans.filter((span) => span.name === 'GET /v2/deployments/{deployment_id}');
    expect(found).toHaveLength(1);
    return found[0]!;
  }
  const childrenOf = (parent: ExportedSpan) => collector.spans.filter((span) => span.parentSpanId === parent.spanId && span.traceId === parent.traceId);

  it('exports the call as one trace: request → gRPC client → gRPC server → Postgres statements', () => {
    expect(status).toBe(404);
    expect(collector.services).toEqual(new Set(['berth']));
    const request = requestSpan();
    expect(request.parentSpanId ?? '').toBe('');
    expect(spanAttribute(request, 'http.route')).toEqual({ stringValue: '/v2/deployments/{deployment_id}' });
    expect(spanAttribute(request, 'http.response.status_code')).toEqual({ intValue: 404 });
    expect(spanAttribute(request, 'berth.request_id')).toEqual({ stringValue: requestId });

    const rpcName = 'berth.controlplane.v1.DeploymentService/GetDeployment';
    const client = childrenOf(request).filter((span) => span.name === rpcName);
    expect(client).toHaveLength(1);
    const server = childrenOf(client[0]!).filter((span) => span.name === rpcName);
    expect(server).toHaveLength(1);
    const statements = childrenOf(server[0]!);
    expect(statements.map((span) => span.name)).toContain('SELECT control_plane');
    // The gateway's own statements (the API key's lookup) belong to the request too.
    expect(childrenOf(request).map((span) => span.name)).toContain('SELECT gateway');
  });

  it('names spans by template and statement kind: no id of the URL and no statement text is in any span', () => {
    const exported = JSON.stringify(collector.spans);
    expect(exported).not.toContain(deploymentId);
    expect(exported).not.toMatch(/\b(from|where|values|returning)\s|\$1/i);
    for (const span of collector.spans.filter((s) => spanAttribute(s, 'db.system.name'))) {
      expect(span.attributes.map((a) => a.key).sort()).toEqual(['db.namespace', 'db.operation.name', 'db.system.name']);
    }
  });

  it("keeps a caller's traceparent as a link only: no span joins the caller's trace", () => {
    expect(collector.spans.filter((span) => span.traceId === foreign.traceId)).toEqual([]);
    expect(requestSpan().links?.map(({ traceId, spanId }) => ({ traceId, spanId }))).toEqual([{ traceId: foreign.traceId, spanId: foreign.spanId }]);
  });

  it("writes the trace and span ids into the request's log line, and into the control plane's line on the call", () => {
    const request = requestSpan();
    const line = stack.gatewayLogs.lines().find((l) => l['msg'] === 'request completed' && (l['req'] as { id?: string }).id === requestId);
    expect(line).toMatchObject({ trace_id: request.traceId, span_id: request.spanId });
    const served = collector.spans.find((span) => span.name === 'berth.controlplane.v1.DeploymentService/GetDeployment' && span.kind === 2)!;
    const notFound = stack.controlPlaneLogs.lines().find((l) => l['method'] === '/berth.controlplane.v1.DeploymentService/GetDeployment');
    expect(notFound).toMatchObject({ msg: 'rpc handler returned an error', trace_id: request.traceId, span_id: served.spanId });
  });
});
