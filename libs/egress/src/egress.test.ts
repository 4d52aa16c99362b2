import { describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { once } from 'node:events';
import { EGRESS_REFUSED, EgressRefusedError, assertPublicUrl, isPrivateAddress, publicOnlyAgents } from './index.js';

describe('isPrivateAddress', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fd00::1', 'fe80::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1'])(
    '%s is not public',
    (address) => expect(isPrivateAddress(address)).toBe(true),
  );
  it.each(['8.8.8.8', '52.216.0.1', '172.32.0.1', '2600:1f18::1', '::ffff:8.8.8.8'])('%s is public', (address) => expect(isPrivateAddress(address)).toBe(false));
});

describe('assertPublicUrl', () => {
  it('refuses private literals and localhost, and lets names and public literals through', () => {
    for (const url of ['http://127.0.0.1:9000', 'http://[::1]:9000', 'http://169.254.169.254/latest', 'http://localhost:9000', 'http://s3.localhost']) {
      expect(() => assertPublicUrl(new URL(url))).toThrow(EgressRefusedError);
    }
    for (const url of ['https://s3.eu-west-1.amazonaws.com', 'https://storage.googleapis.com', 'http://8.8.8.8']) expect(() => assertPublicUrl(new URL(url))).not.toThrow();
  });
});

describe('publicOnlyAgents', () => {
  it('refuses a name that resolves to loopback, before connecting', async () => {
    let connections = 0;
    const server = http.createServer((_req, res) => res.end('reached')).listen(0, '127.0.0.1');
    server.on('connection', () => connections++);
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    const { httpAgent } = publicOnlyAgents();
    try {
      const error = await new Promise<NodeJS.ErrnoException>((resolve, reject) => {
        http.get({ host: 'localhost', port, agent: httpAgent }, () => reject(new Error('connected'))).on('error', resolve);
      });
      expect(error.code).toBe(EGRESS_REFUSED);
      expect(error.message).toMatch(/localhost \((127\.0\.0\.1|::1)\) is not a public address/);
      expect(connections).toBe(0);
    } finally {
      httpAgent.destroy();
      server.close();
    }
  });
});
