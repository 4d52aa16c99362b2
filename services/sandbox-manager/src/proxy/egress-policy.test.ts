import { describe, expect, it } from '@jest/globals';
import { EgressDeniedError, EgressGuard, EgressPolicyError, hostGlob, validateAccessControl } from './egress-policy.js';

const LOCAL = ['127.0.0.1/32', '::1/128'];

function guard(lists: { allowList?: string[]; denyList?: string[]; privateAllow?: string[] }): EgressGuard {
  return new EgressGuard({ allowList: lists.allowList ?? [], denyList: lists.denyList ?? [], privateAllow: lists.privateAllow ?? [] });
}

async function refusal(g: EgressGuard, host: string, port = 80): Promise<string | undefined> {
  try {
    await g.resolve(host, port);
    return undefined;
  } catch (error) {
    if (error instanceof EgressDeniedError) return error.message;
    throw error;
  }
}

describe('host globs', () => {
  it('match subdomains at any depth but not the apex; * alone matches every host', () => {
    const glob = hostGlob('*.example.com');
    expect(glob('api.example.com')).toBe(true);
    expect(glob('a.b.example.com')).toBe(true);
    expect(glob('example.com')).toBe(false);
    expect(glob('badexample.com')).toBe(false);
    expect(glob('api.example.com.evil.net')).toBe(false);
    expect(hostGlob('*')('anything.at.all')).toBe(true);
    expect(hostGlob('API.Example.com.')('api.example.com')).toBe(true);
    expect(hostGlob('api-*.example.com')('api-eu.example.com')).toBe(true);
  });
});

describe('validateAccessControl', () => {
  it('lists every bad pattern with where it is, and refuses both lists at once', () => {
    expect(
      validateAccessControl({
        allowList: ['10.0.0.0/33', '~(unclosed', 'ok.example.com', 'bad host!', '*.ok.com', '10.1.2.3', '~api[0-9]+\\.x\\.com'],
        denyList: ['evil.com'],
      }),
    ).toEqual([
      { path: [], message: 'set allow_list or deny_list, not both' },
      { path: ['allow_list', 0], message: '"10.0.0.0/33" is not a CIDR (like 10.0.0.0/8, fd00::/8) or an IP address' },
      { path: ['allow_list', 1], message: expect.stringMatching(/^"~\(unclosed" is not a valid regular expression: /) },
      { path: ['allow_list', 3], message: '"bad host!" is not a host name, glob (*.example.com), IP, CIDR (10.0.0.0/8) or ~regex' },
    ]);
    expect(validateAccessControl({ denyList: ['*.evil.com', '169.254.0.0/16', 'fd00::/8', '~.*\\.onion'] })).toEqual([]);
    expect(validateAccessControl({ allowList: [], denyList: [] })).toEqual([]);
  });

  it('a guard refuses to compile what the validator reports', () => {
    expect(() => guard({ allowList: ['a.com'], denyList: ['b.com'] })).toThrow(EgressPolicyError);
    expect(() => guard({ denyList: ['10.0.0.0/99'] })).toThrow('deny_list[0]: "10.0.0.0/99" is not a CIDR');
    expect(() => guard({ privateAllow: ['nope'] })).toThrow('private egress CIDRs: "nope" is not a CIDR');
  });
});

describe('EgressGuard', () => {
  it('refuses non-public addresses by default, saying what they are', async () => {
    const g = guard({});
    expect(await refusal(g, '127.0.0.1')).toBe('egress to 127.0.0.1 refused: loopback address');
    expect(await refusal(g, '10.0.0.1')).toBe('egress to 10.0.0.1 refused: private address');
    expect(await refusal(g, '169.254.169.254')).toBe('egress to 169.254.169.254 refused: cloud metadata address');
    expect(await refusal(g, '[fd00:ec2::254]')).toBe('egress to fd00:ec2::254 refused: cloud metadata address');
    expect(await refusal(g, '100.64.1.1')).toBe('egress to 100.64.1.1 refused: carrier-grade NAT address');
    expect(await refusal(g, '::ffff:192.168.0.1')).toBe('egress to ::ffff:192.168.0.1 refused: private address');
    // A name that resolves to loopback is refused on the address it resolves to.
    expect(await refusal(g, 'localhost')).toBe('egress to localhost (127.0.0.1) refused: loopback address');
    expect(await refusal(g, '8.8.8.8')).toBeUndefined();
  });

  it('admits private addresses inside the operator CIDRs only', async () => {
    const g = guard({ privateAllow: ['127.0.0.1/32', '10.1.0.0/16'] });
    expect(await refusal(g, '127.0.0.1')).toBeUndefined();
    expect(await refusal(g, 'localhost')).toBeUndefined();
    expect(await refusal(g, '10.1.2.3')).toBeUndefined();
    expect(await refusal(g, '10.2.0.1')).toBe('egress to 10.2.0.1 refused: private address');
    expect(await g.resolve('127.0.0.1', 8080)).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('a deny list refuses by name (exact, glob, regex) before resolving, and by address', async () => {
    const g = guard({ denyList: ['evil.com', '*.evil.org', '~.*\\.onion', '8.8.0.0/16', '1.1.1.1'], privateAllow: LOCAL });
    expect(await refusal(g, 'EVIL.com.')).toBe('egress to evil.com refused: on the deny list');
    expect(await refusal(g, 'x.y.evil.org')).toBe('egress to x.y.evil.org refused: on the deny list');
    expect(await refusal(g, 'abc.onion')).toBe('egress to abc.onion refused: on the deny list');
    expect(await refusal(g, '8.8.4.4')).toBe('egress to 8.8.4.4 refused: on the deny list');
    expect(await refusal(g, '1.1.1.1')).toBe('egress to 1.1.1.1 refused: on the deny list');
    expect(await refusal(g, '1.1.1.2')).toBeUndefined();
    expect(await refusal(g, 'localhost')).toBeUndefined();
    // The glob does not cover the apex.
    expect(await refusal(guard({ denyList: ['*.localhost'], privateAllow: LOCAL }), 'localhost')).toBeUndefined();
    expect(await refusal(guard({ denyList: ['127.0.0.0/8'], privateAllow: LOCAL }), 'localhost')).toBe(
      'egress to localhost (127.0.0.1) refused: on the deny list',
    );
  });

  it('an allow list admits matching names or addresses and refuses the rest; it cannot open private addresses', async () => {
    expect(await refusal(guard({ allowList: ['*.example.com'] }), 'other.org')).toBe('egress to other.org refused: not on the allow list');
    expect(await refusal(guard({ allowList: ['*.localhost'], privateAllow: LOCAL }), 'localhost')).toBe('egress to localhost refused: not on the allow list');
    expect(await refusal(guard({ allowList: ['localhost'], privateAllow: LOCAL }), 'localhost')).toBeUndefined();
    expect(await refusal(guard({ allowList: ['~local[a-z]+'], privateAllow: LOCAL }), 'localhost')).toBeUndefined();
    // The regex must match the whole name.
    expect(await refusal(guard({ allowList: ['~local'], privateAllow: LOCAL }), 'localhost')).toBe('egress to localhost refused: not on the allow list');
    expect(await refusal(guard({ allowList: ['127.0.0.0/8'], privateAllow: LOCAL }), 'localhost')).toBeUndefined();
    expect(await refusal(guard({ allowList: ['8.8.8.8'] }), '8.8.4.4')).toBe('egress to 8.8.4.4 refused: not on the allow list');
    expect(await refusal(guard({ allowList: ['8.8.8.8'] }), '8.8.8.8')).toBeUndefined();
    // A tenant's allow list does not reach what the operator did not allow.
    expect(await refusal(guard({ allowList: ['localhost', '10.0.0.0/8'] }), 'localhost')).toBe('egress to localhost (127.0.0.1) refused: loopback address');
    expect(await refusal(guard({ allowList: ['10.0.0.0/8'] }), '10.0.0.1')).toBe('egress to 10.0.0.1 refused: private address');
  });

  it('refuses an impossible port', async () => {
    expect(await refusal(guard({}), '8.8.8.8', 0)).toBe('egress to 8.8.8.8 refused: port 0 is not a valid port');
  });
});
