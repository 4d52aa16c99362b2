/**
 * `berth serve --service <name>` through the built binary, each service its own process as in the
 * Helm chart: two control-plane replicas started at the same moment on one fresh database (their
 * migrations and startup DDL must take turns) and a gateway that finds one of them by address.
 * Every process answers the HTTP probes `/healthz` and `/readyz`, and has its metrics apart from its public port.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@berth/local-stack';
import { parseMetrics, sampleSum } from '@berth/metrics';
import { createTestDatabase, spawnTestChild, until, type TestChild, type TestDatabase } from '@berth/testing';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const internalToken = randomBytes(32).toString('base64url');
let testDb: TestDatabase;
let temp: string;
const children: TestChild[] = [];

/** Starts `berth serve --service <service>` with only the settings the chart would give it. */
function serveService(service: string, env: Record<string, string>): TestChild {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(BERTH_|GRPC_|GATEWAY_|DATABASE_URL|REDIS_URL)/.test(name)));
  const started = spawnTestChild(process.execPath, [bin, 'serve', '--service', service], {
    env: { ...inherited, DATABASE_URL: testDb.url, LOG_LEVEL: 'warn', BERTH_INTERNAL_TOKEN: internalToken, ...env },
  });
  children.push(started);
  return started;
}

/** The gRPC health checks a service's process answered, from `/metrics` on its health listener. */
async function grpcChecks(health: string): Promise<number> {
  const response = await fetch(`${health}/metrics`);
  expect(response.status).toBe(200);
  return sampleSum(parseMetrics(await response.text()), 'berth_grpc_server_handling_seconds_count', { grpc_method: 'Check', grpc_code: 'OK' });
}

async function probe(url: string): Promise<{ status: number; body: { status?: string; checks?: Record<string, unknown> } }> {
  const response = await fetch(url);
  return { status: response.status, body: (await response.json()) as { status?: string; checks?: Record<string, unknown> } };
}

/** Waits until `/readyz` answers 200, failing early (with its output) when the process exits. */
async function ready(base: string, started: TestChild): Promise<void> {
  await until(
    `${base}/readyz`,
    async () => {
      if (started.child.exitCode !== null) throw new Error(`the service exited (${started.child.exitCode}):\n${started.output()}`);
      try {
        return (await probe(`${base}/readyz`)).status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    },
    90_000,
    250,
  );
}

beforeAll(async () => {
  testDb = await createTestDatabase('cli_serve_service');
  temp = await mkdtemp(join(tmpdir(), 'berth-serve-service-'));
});
afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await testDb?.drop();
  if (temp) await rm(temp, { recursive: true, force: true });
});

describe('berth serve --service', () => {
  it('runs control-plane replicas and a gateway as separate processes, each answering /healthz and /readyz, with its own metrics', async () => {
    const secretKey = randomBytes(32).toString('base64');
    const replicas = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const grpcPort = await freePort();
        const healthPort = await freePort();
        const started = serveService('control-plane', {
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(grpcPort),
          BERTH_HEALTH_HOST: '127.0.0.1',
          BERTH_HEALTH_PORT: String(healthPort),
          BERTH_SECRET_KEY: secretKey,
          BERTH_ARTIFACTS_DIR: join(temp, name, 'artifacts'),
        });
        return { started, grpc: `127.0.0.1:${grpcPort}`, health: `http://127.0.0.1:${healthPort}` };
      }),
    );
    await Promise.all(replicas.map((r) => ready(r.health, r.started)));
    for (const replica of replicas) {
      expect(await probe(`${replica.health}/healthz`)).toEqual({ status: 200, body: { status: 'ok' } });
      expect(await probe(`${replica.health}/readyz`)).toEqual({ status: 200, body: { status: 'ok', checks: { grpc: 'ok', postgres: 'ok' } } });
    }

    const gatewayPort = await freePort();
    const metricsPort = await freePort();
    const gateway = serveService('gateway', {
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(gatewayPort),
      CONTROL_PLANE_GRPC_ADDRESS: replicas[0]!.grpc,
      BERTH_METRICS_PORT: String(metricsPort),
    });
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    await ready(gatewayUrl, gateway);
    const checksBefore = await grpcChecks(replicas[0]!.health);
    expect(await probe(`${gatewayUrl}/healthz`)).toEqual({ status: 200, body: { status: 'ok' } });
    const readiness = await probe(`${gatewayUrl}/readyz`);
    expect(readiness.status).toBe(200);
    expect(readiness.body.checks).toMatchObject({ postgres: { status: 'ok' }, 'control-plane': { status: 'ok' } });

    // Each process's metrics: the gateway's on its metrics listener (not its public port), counting
    // the probes just made; the control plane's on its health listener, counting the gRPC health
    // check the gateway's /readyz made of it.
    const gatewayMetrics = parseMetrics(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
    expect(sampleSum(gatewayMetrics, 'berth_http_request_duration_seconds_count', { method: 'GET', route: '/healthz', status: '200' })).toBe(1);
    expect(sampleSum(gatewayMetrics, 'berth_http_request_duration_seconds_count', { route: '/readyz', status: '200' })).toBeGreaterThanOrEqual(2);
    expect((await fetch(`${gatewayUrl}/metrics`)).status).toBe(404);
    expect(await grpcChecks(replicas[0]!.health)).toBe(checksBefore + 1);

    // A stopped replica is unready at once to whoever still probes it; the other is untouched.
    replicas[1]!.started.child.kill('SIGTERM');
    await new Promise((resolve) => replicas[1]!.started.child.once('exit', resolve));
    expect(replicas[1]!.started.child.exitCode).toBe(0);
    await expect(fetch(`${replicas[1]!.health}/healthz`)).rejects.toThrow();
    expect((await probe(`${replicas[0]!.health}/readyz`)).status).toBe(200);
  }, 180_000);

  it('refuses a service it does not know, naming the choices', async () => {
    const started = serveService('agent-runtime', {});
    const code = await new Promise((resolve) => started.child.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(started.output()).toContain('--service must be one of all, gateway, control-plane, sandbox-manager, export-worker, got agent-runtime');
  });
});
