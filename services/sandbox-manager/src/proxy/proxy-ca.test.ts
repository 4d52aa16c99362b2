import { describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { ProxyCa, ProxyCaError, proxyEnvironment } from './proxy-ca.js';

describe('ProxyCa', () => {
  it('makes a ten-year CA, and leaves for names and IPs that a CA loaded from its PEM still signs', async () => {
    const ca = await ProxyCa.generate();
    const caCert = new X509Certificate(ca.certPem);
    expect(caCert.subject).toContain('CN=Berth sandbox proxy CA');
    expect(caCert.ca).toBe(true);
    const years = (Date.parse(caCert.validTo) - Date.parse(caCert.validFrom)) / (365.25 * 24 * 3600 * 1000);
    expect(Math.round(years)).toBe(10);

    const restored = await ProxyCa.fromPem({ certPem: ca.certPem, keyPem: ca.keyPem });
    for (const host of ['api.example.com', '10.1.2.3', '2001:db8::1']) {
      const leaf = new X509Certificate((await restored.leafFor(host)).certPem);
      expect(leaf.checkIssued(caCert)).toBe(true);
      expect(leaf.verify(caCert.publicKey)).toBe(true);
      expect(leaf.ca).toBe(false);
      expect(isIP(host) ? leaf.checkIP(host) : leaf.checkHost(host)).toBe(host);
      expect(Date.parse(leaf.validTo) - Date.now()).toBeLessThanOrEqual(2 * 24 * 3600 * 1000);
    }
    // Cached per host: one signature per host, not per connection.
    expect(await restored.leafFor('api.example.com')).toBe(await restored.leafFor('api.example.com'));
  });

  it('says what is wrong with a CA that does not load', async () => {
    const ca = await ProxyCa.generate();
    await expect(ProxyCa.fromPem({ certPem: ca.certPem, keyPem: 'not a key' })).rejects.toThrow(ProxyCaError);
    await expect(ProxyCa.fromPem({ certPem: 'garbage', keyPem: ca.keyPem })).rejects.toThrow(/the sandbox proxy CA does not load/);
  });
});

describe('proxyEnvironment', () => {
  it('points both spellings of the proxy variables at the local port, and CA files at the proxy CA', () => {
    expect(proxyEnvironment({ port: 3128, caPath: '/.berth/proxy-ca.crt' })).toEqual({
      HTTP_PROXY: 'http://127.0.0.1:3128',
      HTTPS_PROXY: 'http://127.0.0.1:3128',
      http_proxy: 'http://127.0.0.1:3128',
      https_proxy: 'http://127.0.0.1:3128',
      NO_PROXY: 'localhost,127.0.0.1,::1',
      no_proxy: 'localhost,127.0.0.1,::1',
      NODE_EXTRA_CA_CERTS: '/.berth/proxy-ca.crt',
    });
    expect(proxyEnvironment({ port: 3128, caPath: '/a.crt', bundlePath: '/.berth/ca-bundle.crt' })).toMatchObject({
      SSL_CERT_FILE: '/.berth/ca-bundle.crt',
      REQUESTS_CA_BUNDLE: '/.berth/ca-bundle.crt',
      CURL_CA_BUNDLE: '/.berth/ca-bundle.crt',
      GIT_SSL_CAINFO: '/.berth/ca-bundle.crt',
    });
  });
});
