/**
 * The trace API's real parts for a test: a test database, an export-worker on it and a gateway
 * calling it over gRPC, two tenants with an API key each; and a second gateway app whose every key
 * acts as a deployment's tracing credential bound to one project (what the gateway's authenticate
 * produces for one).
 */
import { randomUUID } from 'node:crypto';
import type { AuthStore } from '@berth/auth';
import type { Clock } from '@berth/clock';
import { start as startExportWorker, type ExportWorkerConfig, type RunningExportWorker } from '@berth/export-worker';
import { listen, type RunningServer } from '@berth/http';
import { silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { createGatewayApp } from '../app.js';
import { ControlPlaneClients } from '../control-plane.js';
import { ExportWorkerClients } from '../export-worker.js';
import { start, type RunningGateway } from '../index.js';
import type { TraceLimits } from '../routes/traces/runs.js';
import { testGatewayConfig } from './test-config.js';

export interface TraceStack {
  worker: RunningExportWorker;
  gateway: RunningGateway;
  /** Keys of two tenants, `a` and `b`. */
  keyA: string;
  keyB: string;
  /** The test database (the export-worker's tables are in schema berth_export). */
  databaseUrl: string;
  close(): Promise<void>;
}

/**
 * Starts the stack on a database named after `name`; `clock` is the export-worker's, `controlPlane` the gateway's (none by
 * default), `worker` more settings of the export-worker.
 */
export async function startTraceStack(
  name: string,
  options: { clock?: Clock; controlPlane?: string; worker?: Pick<ExportWorkerConfig, 'feedbackLimits' | 'traceIngestMaxBatchesInFlight'> } = {},
): Promise<TraceStack> {
  let testDb: TestDatabase | undefined;
  let worker: RunningExportWorker | undefined;
  let gateway: RunningGateway | undefined;
  const close = async () => {
    await gateway?.close();
    await worker?.close();
    await testDb?.drop();
  };
  try {
    testDb = await createTestDatabase(name);
    worker = await startExportWorker(
      {
        databaseUrl: testDb.url,
        secretKey: Buffer.alloc(32, 7).toString('base64'),
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        logLevel: 'silent',
        ...options.worker,
        ...(options.clock ? { bulkExports: { clock: options.clock } } : {}),
      },
      silentLogger(),
    );
    const services = { 'export-worker': worker.address, ...(options.controlPlane ? { 'control-plane': options.controlPlane } : {}) };
    gateway = await start({ ...testGatewayConfig(testDb.url, ''), services }, silentLogger());
    const a = await gateway.store.createTenant({ name: `${name}-a` });
    const b = await gateway.store.createTenant({ name: `${name}-b` });
    const keyA = (await gateway.store.createApiKey({ tenantId: a.id, name: 'dev' })).key;
    const keyB = (await gateway.store.createApiKey({ tenantId: b.id, name: 'dev' })).key;
    return { worker, gateway, keyA, keyB, databaseUrl: testDb.url, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** A gateway app on the stack's export-worker where every valid key is bound to `project`. */
export async function boundCredentialServer(stack: TraceStack, project: { id: string; name: string }): Promise<RunningServer> {
  const { gateway } = stack;
  const store = Object.create(gateway.store, {
    verifyApiKey: { value: async (key: string) => ({ ...(await gateway.store.verifyApiKey(key))!, tracingProject: project }) },
  }) as AuthStore;
  return traceServer(stack, { store });
}

/** Another gateway app on the stack's export-worker, with its own auth store or trace limits. */
export async function traceServer(stack: TraceStack, options: { store?: AuthStore; traceLimits?: Partial<TraceLimits> }): Promise<RunningServer> {
  const app = createGatewayApp({
    logger: silentLogger(),
    store: options.store ?? stack.gateway.store,
    readiness: {},
    controlPlane: new ControlPlaneClients(undefined),
    exportWorker: new ExportWorkerClients(stack.worker.address),
    ...(options.traceLimits ? { traceLimits: options.traceLimits } : {}),
  });
  return listen(app, '127.0.0.1', 0);
}

/** A new root run as the langsmith client posts it (a chain step with inputs), with `extra` fields. */
export function rootRun(extra: Record<string, unknown> = {}): Record<string, any> {
  const id = randomUUID();
  const start = new Date().toISOString();
  return {
    id,
    trace_id: id,
    dotted_order: `${start.replace(/[-:.]/g, '')}${id}`,
    name: 'step',
    run_type: 'chain',
    start_time: start,
    inputs: { q: 1 },
    ...extra,
  };
}
