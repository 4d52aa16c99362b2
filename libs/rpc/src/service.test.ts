import { streamingEcho } from './__tests__/servers.js';
import { describe, expect, it } from '@jest/globals';
import { EchoService } from '@berth/proto';
import { createRpcClient } from './client.js';
import { checkHealth } from './health.js';
import { startGrpcService } from './service.js';

describe('startGrpcService', () => {
  it('serves health for the server and its name plus the given handlers, and closes', async () => {
    const service = await startGrpcService({
      name: 'berth.testing.v1',
      host: '127.0.0.1',
      port: 0,
      setup: (server) => server.add(EchoService, { ...streamingEcho, echo: async (request) => ({ message: request.message }), count: async function* () {} }),
    });
    try {
      expect(service.address).toBe(`127.0.0.1:${service.port}`);
      expect(await checkHealth(service.address)).toBe('SERVING');
      expect(await checkHealth(service.address, { service: 'berth.testing.v1' })).toBe('SERVING');
      const client = createRpcClient(EchoService, service.address);
      expect((await client.echo({ message: 'ok' })).message).toBe('ok');
      client.close();
    } finally {
      await service.close();
    }
    expect(service.health.getStatus('berth.testing.v1')).toBe('NOT_SERVING');
    await expect(checkHealth(service.address, { timeoutMs: 1000 })).rejects.toMatchObject({ name: 'UnavailableError' });
  });
});
