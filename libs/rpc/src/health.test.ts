import { afterEach, describe, expect, it } from '@jest/globals';
import { GrpcStatus, NotFoundError, UnavailableError } from '@berth/errors';
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from '@berth/proto';
import type grpc from '@grpc/grpc-js';
import { createRpcClient } from './client.js';
import { HealthService, checkHealth } from './health.js';
import { Cleanup, closedPort } from './__tests__/servers.js';

const cleanup = new Cleanup();
afterEach(() => cleanup.run());

async function healthServer(health: HealthService) {
  return cleanup.server((server) => server.add(Health, health.implementation));
}

describe('HealthService', () => {
  it('answers Check for the server, for named services, and NOT_FOUND for unknown names', async () => {
    const health = new HealthService();
    const { address } = await healthServer(health);
    expect(await checkHealth(address)).toBe('SERVING');
    expect(await checkHealth(address, { service: 'berth.control_plane.v1.ControlPlaneService' })).toBe('SERVICE_UNKNOWN');

    health.setStatus('berth.control_plane.v1.ControlPlaneService', 'NOT_SERVING');
    expect(await checkHealth(address, { service: 'berth.control_plane.v1.ControlPlaneService' })).toBe('NOT_SERVING');
    health.setStatus('berth.control_plane.v1.ControlPlaneService', 'SERVING');
    expect(await checkHealth(address, { service: 'berth.control_plane.v1.ControlPlaneService' })).toBe('SERVING');
    health.setStatus('', 'NOT_SERVING');
    expect(await checkHealth(address)).toBe('NOT_SERVING');

    // Per the spec, Check of an unknown service fails with NOT_FOUND.
    const client = createRpcClient(Health, address);
    cleanup.add(() => client.close());
    const error = await client.check({ service: 'nope' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect(((error as Error).cause as grpc.ServiceError).code).toBe(GrpcStatus.NOT_FOUND);
  });

  it('streams status changes on Watch until cancelled', async () => {
    const health = new HealthService({});
    const { address } = await healthServer(health);
    const client = createRpcClient(Health, address);
    cleanup.add(() => client.close());

    const controller = new AbortController();
    const stream = client.watch({ service: 'svc' }, { signal: controller.signal })[Symbol.asyncIterator]();
    const next = async () => ((await stream.next()).value as { status: ServingStatus }).status;

    expect(await next()).toBe(ServingStatus.SERVICE_UNKNOWN);
    health.setStatus('svc', 'SERVING');
    expect(await next()).toBe(ServingStatus.SERVING);
    health.setStatus('svc', 'SERVING'); // no change, no message
    health.setStatus('other', 'NOT_SERVING'); // another service, no message
    health.setStatus('svc', 'NOT_SERVING');
    expect(await next()).toBe(ServingStatus.NOT_SERVING);

    const pending = stream.next();
    controller.abort(new Error('done watching'));
    await expect(pending).rejects.toThrow('done watching');
  });

  it('checkHealth throws UnavailableError when nothing listens', async () => {
    const address = `127.0.0.1:${await closedPort()}`;
    const error = await checkHealth(address, { timeoutMs: 2000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnavailableError);
    expect((error as Error).message).toContain(address);
  });
});
