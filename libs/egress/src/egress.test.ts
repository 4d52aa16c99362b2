import { describe, expect, it } from '@jest/globals';
import http from 'node:http';
import { once } from 'node:events';
import { BlockList, isIP } from 'node:net';
import {
  allowedBlock,
  CidrSet,
  EGRESS_REFUSED,
  EgressRefusedError,
  InvalidCidrError,
  assertPublicUrl,
  isPrivateAddress,
  nonPublicKind,
  parseCidr,
  publicAddressBlocks,
  publicOnlyAgents,
  refusedAddressKind,
  type AddressBlock,
} from './index.js';

describe('isPrivateAddress', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::',
    'fd00::1',
    'fe80::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
  ])('%s is not public', (address) => expect(isPrivateAddress(address)).toBe(true));
  it.each(['8.8.8.8', '52.216.0.1', '172.32.0.1', '2600:1f18::1', '::ffff:8.8.8.8'])('%s is public', (address) =>
    expect(isPrivateAddress(address)).toBe(false),
  );
});

describe('assertPublicUrl', () => {
  it('refuses private literals and localhost, and lets names and public literals through', () => {
    for (const url of ['http://127.0.0.1:9000', 'http://[::1]:9000', 'http://169.254.169.254/latest', 'http://localhost:9000', 'http://s3.localhost']) {
      expect(() => assertPublicUrl(new URL(url))).toThrow(EgressRefusedError);
    }
    for (const url of ['https://s3.eu-west-1.amazonaws.com', 'https://storage.googleapis.com', 'http://8.8.8.8'])
      expect(() => assertPublicUrl(new URL(url))).not.toThrow();
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

describe('nonPublicKind and refusedAddressKind', () => {
  it('names what kind of address is refused', () => {
    expect(nonPublicKind('127.0.0.1')).toBe('loopback address');
    expect(nonPublicKind('::ffff:10.0.0.1')).toBe('private address');
    expect(nonPublicKind('169.254.169.254')).toBe('cloud metadata address');
    expect(nonPublicKind('fd00:ec2::254')).toBe('cloud metadata address');
    expect(nonPublicKind('169.254.1.1')).toBe('link-local address');
    expect(nonPublicKind('100.64.0.1')).toBe('carrier-grade NAT address');
    expect(nonPublicKind('224.0.0.1')).toBe('multicast address');
    expect(nonPublicKind('8.8.8.8')).toBeUndefined();
  });

  it('admits private addresses inside the operator CIDRs, and metadata only when listed on its own', () => {
    const allowed = new CidrSet(['127.0.0.1/32', '10.0.0.0/8', '169.254.0.0/16', 'fd00::/8']);
    expect(refusedAddressKind('127.0.0.1', allowed)).toBeUndefined();
    expect(refusedAddressKind('127.0.0.2', allowed)).toBe('loopback address');
    expect(refusedAddressKind('10.9.8.7', allowed)).toBeUndefined();
    expect(refusedAddressKind('::ffff:10.9.8.7', allowed)).toBeUndefined();
    expect(refusedAddressKind('192.168.1.1', allowed)).toBe('private address');
    expect(refusedAddressKind('169.254.169.254', allowed)).toBe('cloud metadata address');
    expect(refusedAddressKind('fd00:ec2::254', allowed)).toBe('cloud metadata address');
    expect(refusedAddressKind('169.254.169.254', new CidrSet(['169.254.169.254']))).toBeUndefined();
    expect(refusedAddressKind('8.8.8.8')).toBeUndefined();
    expect(refusedAddressKind('10.0.0.1')).toBe('private address');
  });

  it('refuses CIDRs that do not parse, naming them', () => {
    for (const bad of ['10.0.0.0/33', '10.0.0/8', 'fd00::/129', 'example.com', '10.0.0.0/8/1', '10.0.0.0/x', '']) {
      expect(() => parseCidr(bad)).toThrow(InvalidCidrError);
    }
    expect(() => new CidrSet(['10.0.0.0/8', 'nope'])).toThrow('"nope" is not a CIDR');
    expect(parseCidr('fd00::/8')).toEqual({ network: 'fd00::', prefix: 8, type: 'ipv6' });
    expect(parseCidr('10.1.2.3')).toEqual({ network: '10.1.2.3', prefix: 32, type: 'ipv4' });
  });
});

/** Whether `address` is inside one of `blocks` and in none of its holes (as a NetworkPolicy's ipBlock reads). */
function inBlocks(blocks: AddressBlock[], address: string): boolean {
  const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  const has = (cidr: string) => {
    const [network, prefix] = cidr.split('/') as [string, string];
    if ((isIP(network) === 6 ? 'ipv6' : 'ipv4') !== type) return false;
    const list = new BlockList();
    list.addSubnet(network, Number(prefix), type);
    return list.check(address, type);
  };
  return blocks.some((block) => has(block.cidr) && !(block.except ?? []).some(has));
}

// What a NetworkPolicy built from these blocks lets a pod reach must be what the proxies let through.
const SAMPLES = [
  '0.1.2.3',
  '10.0.0.1',
  '10.255.255.255',
  '100.64.0.1',
  '100.127.255.254',
  '127.0.0.1',
  '169.254.1.1',
  '169.254.169.254',
  '172.16.0.1',
  '172.31.255.255',
  '192.0.0.8',
  '192.168.1.1',
  '198.18.0.1',
  '198.19.255.255',
  '224.0.0.1',
  '239.255.255.250',
  '240.0.0.1',
  '255.255.255.255',
  '8.8.8.8',
  '1.1.1.1',
  '52.216.0.1',
  '100.63.255.255',
  '100.128.0.1',
  '172.15.255.255',
  '172.32.0.1',
  '192.0.1.1',
  '198.20.0.1',
  '223.255.255.255',
  '::',
  '::1',
  'fc00::1',
  'fd00::1',
  'fd00:ec2::254',
  'fe80::1',
  'febf::1',
  'ff02::1',
  '64:ff9b::a00:1',
  '64:ff9b::808:808',
  '::ffff:10.0.0.1',
  '::ffff:8.8.8.8',
  '2600:1f18::1',
  '2001:4860:4860::8888',
  'fec0::1',
];

describe('publicAddressBlocks', () => {
  it.each(SAMPLES)('lets %s through exactly when the proxies do', (address) => {
    const mapped = /^::ffff:/.test(address);
    // On the wire an IPv4-mapped address is never an IPv6 destination: the blocks refuse it as IPv6, whatever it maps to.
    expect(inBlocks(publicAddressBlocks(), address)).toBe(mapped ? false : !isPrivateAddress(address));
  });

  it('refuses the cloud metadata addresses', () => {
    expect(inBlocks(publicAddressBlocks(), '169.254.169.254')).toBe(false);
    expect(inBlocks(publicAddressBlocks(), 'fd00:ec2::254')).toBe(false);
  });
});

describe('allowedBlock', () => {
  it('opens an operator range but never a metadata address inside a wider one, as refusedAddressKind', () => {
    expect(allowedBlock('169.254.0.0/16')).toEqual({ cidr: '169.254.0.0/16', except: ['169.254.169.254/32'] });
    expect(allowedBlock('fd00::/8')).toEqual({ cidr: 'fd00::/8', except: ['fd00:ec2::254/128'] });
    expect(allowedBlock('169.254.169.254')).toEqual({ cidr: '169.254.169.254/32' });
    expect(allowedBlock('10.0.0.0/8')).toEqual({ cidr: '10.0.0.0/8' });
    expect(allowedBlock('0.0.0.0/0').except).toEqual(['169.254.169.254/32']);
    for (const ranges of [
      ['169.254.0.0/16', 'fd00::/8', '10.1.0.0/16'],
      ['169.254.169.254/32', '127.0.0.1'],
    ]) {
      const blocks = ranges.map(allowedBlock);
      const allowed = new CidrSet(ranges);
      for (const address of SAMPLES.filter((a) => !/^::ffff:/.test(a) && isPrivateAddress(a))) {
        expect({ address, opened: inBlocks(blocks, address) }).toEqual({ address, opened: refusedAddressKind(address, allowed) === undefined });
      }
    }
  });

  it('refuses what is not a CIDR', () => {
    expect(() => allowedBlock('10.0.0.0/33')).toThrow(InvalidCidrError);
  });
});
