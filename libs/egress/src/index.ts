/**
 * Where the platform may connect on a tenant's behalf. Export destinations and the sandboxes' auth
 * proxy call hosts that a tenant chose: without a guard a tenant could make the
 * platform reach its own loopback services, the private network or a cloud metadata endpoint, and
 * read the answers from error messages. The operator may allow private addresses (a laptop with a
 * local MinIO, an in-cluster object store): as a switch for exports, as CIDRs for sandboxes
 * ({@link CidrSet}, {@link refusedAddressKind}).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** The `code` of a connection refused by the guard (as Node's own errors carry one). */
export const EGRESS_REFUSED = 'EBERTH_EGRESS_REFUSED';

/** Ranges that are not public unicast, each with the words a refusal uses for it. */
const NOT_PUBLIC_RANGES: readonly (readonly [network: string, prefix: number, kind: string])[] = [
  ['0.0.0.0', 8, 'unspecified address'],
  ['10.0.0.0', 8, 'private address'],
  ['100.64.0.0', 10, 'carrier-grade NAT address'],
  ['127.0.0.0', 8, 'loopback address'],
  ['169.254.0.0', 16, 'link-local address'],
  ['172.16.0.0', 12, 'private address'],
  ['192.0.0.0', 24, 'reserved address'],
  ['192.168.0.0', 16, 'private address'],
  ['198.18.0.0', 15, 'reserved address'],
  ['224.0.0.0', 4, 'multicast address'],
  ['240.0.0.0', 4, 'reserved address'],
  ['::', 128, 'unspecified address'],
  ['::1', 128, 'loopback address'],
  ['fc00::', 7, 'private address'],
  ['fe80::', 10, 'link-local address'],
  ['ff00::', 8, 'multicast address'],
  ['64:ff9b::', 96, 'reserved address'],
];
const NOT_PUBLIC = NOT_PUBLIC_RANGES.map(([network, prefix, kind]) => {
  const list = new BlockList();
  list.addSubnet(network, prefix, isIP(network) === 6 ? 'ipv6' : 'ipv4');
  return { list, kind };
});

/** Cloud metadata endpoints (AWS, GCP, Azure; AWS's IPv6 one): they hand out the host's credentials. */
const METADATA_ADDRESSES: readonly string[] = ['169.254.169.254', 'fd00:ec2::254'];

const METADATA = new BlockList();
for (const address of METADATA_ADDRESSES) METADATA.addAddress(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');

/** An address block with holes: the form of a Kubernetes NetworkPolicy's `ipBlock`. */
export interface AddressBlock {
  cidr: string;
  /** Ranges inside `cidr` that are not part of the block; none when absent. */
  except?: string[];
}

/**
 * The public internet as address blocks: everything but the ranges {@link nonPublicKind} refuses
 * (so a NetworkPolicy and the egress proxies refuse the same addresses). IPv4-mapped IPv6 addresses
 * are excepted too: the proxies check them as the IPv4 address they reach.
 */
export function publicAddressBlocks(): AddressBlock[] {
  const except = (v6: boolean) => NOT_PUBLIC_RANGES.filter(([network]) => (isIP(network) === 6) === v6).map(([network, prefix]) => `${network}/${prefix}`);
  return [
    { cidr: '0.0.0.0/0', except: except(false) },
    { cidr: '::/0', except: [...except(true), '::ffff:0:0/96'] },
  ];
}

/**
 * `address` in the form address checks must use: an IPv4-mapped IPv6 address (::ffff:10.0.0.1)
 * reaches the IPv4 host, so it is checked as that host.
 */
export function canonicalAddress(address: string): { address: string; type: 'ipv4' | 'ipv6' } {
  const family = isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 4) return { address, type: 'ipv4' };
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? { address: mapped[1]!, type: 'ipv4' } : { address, type: 'ipv6' };
}

/**
 * What kind of non-public address `address` (an IPv4 or IPv6 literal) is, in words for a refusal
 * ("loopback address", "cloud metadata address"); undefined for a public unicast address.
 */
export function nonPublicKind(address: string): string | undefined {
  const { address: checked, type } = canonicalAddress(address);
  if (METADATA.check(checked, type)) return 'cloud metadata address';
  return NOT_PUBLIC.find(({ list }) => list.check(checked, type))?.kind;
}

/** Whether `address` (an IPv4 or IPv6 literal) is anything but a public unicast address. */
export function isPrivateAddress(address: string): boolean {
  return nonPublicKind(address) !== undefined;
}

/** A CIDR (or a bare IP) that does not parse; `message` names it and says what one looks like. */
export class InvalidCidrError extends Error {
  override readonly name = 'InvalidCidrError';
  constructor(readonly cidr: string) {
    super(`${JSON.stringify(cidr)} is not a CIDR (like 10.0.0.0/8, fd00::/8) or an IP address`);
  }
}

/** Parses `10.0.0.0/8`, `fd00::/8` or a bare address (a /32 or /128); InvalidCidrError otherwise. */
export function parseCidr(cidr: string): { network: string; prefix: number; type: 'ipv4' | 'ipv6' } {
  const [network = '', prefixText, extra] = cidr.trim().split('/');
  const family = isIP(network);
  const max = family === 6 ? 128 : 32;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (family === 0 || extra !== undefined || !(prefix >= 0 && prefix <= max)) throw new InvalidCidrError(cidr);
  return { network, prefix, type: family === 6 ? 'ipv6' : 'ipv4' };
}

/**
 * `cidr` as an address block that lets through what {@link refusedAddressKind} lets through when
 * the operator allows `cidr`: the range, but no cloud metadata address inside it unless `cidr` is
 * that address alone (169.254.0.0/16 does not open 169.254.169.254; 169.254.169.254/32 does).
 */
export function allowedBlock(cidr: string): AddressBlock {
  const { network, prefix, type } = parseCidr(cidr);
  const range = new BlockList();
  range.addSubnet(network, prefix, type);
  const single = prefix === (type === 'ipv6' ? 128 : 32);
  const metadata = single ? [] : METADATA_ADDRESSES.filter((address) => (isIP(address) === 6) === (type === 'ipv6') && range.check(address, type));
  const except = metadata.map((address) => `${address}/${type === 'ipv6' ? 128 : 32}`);
  return { cidr: `${network}/${prefix}`, ...(except.length > 0 ? { except } : {}) };
}

/** A set of CIDRs (e.g. the operator's `BERTH_SANDBOX_PRIVATE_EGRESS`); InvalidCidrError for a bad one. */
export class CidrSet {
  private readonly list = new BlockList();
  /** Addresses listed on their own (/32, /128): only these open a metadata endpoint. */
  private readonly singles = new BlockList();

  constructor(cidrs: readonly string[]) {
    for (const cidr of cidrs) {
      const { network, prefix, type } = parseCidr(cidr);
      this.list.addSubnet(network, prefix, type);
      if (prefix === (type === 'ipv6' ? 128 : 32)) this.singles.addAddress(network, type);
    }
  }

  has(address: string): boolean {
    const { address: checked, type } = canonicalAddress(address);
    return this.list.check(checked, type);
  }

  /** Whether `address` was listed on its own rather than as part of a wider range. */
  listsExactly(address: string): boolean {
    const { address: checked, type } = canonicalAddress(address);
    return this.singles.check(checked, type);
  }
}

/**
 * Why a connection to `address` is refused by default, or undefined when it may go ahead: public
 * addresses may; non-public ones only when inside the operator's `allowed` CIDRs — and a cloud
 * metadata endpoint only when listed on its own (a /32), never as part of a wider range such as
 * 169.254.0.0/16, since it hands out the host's credentials.
 */
export function refusedAddressKind(address: string, allowed?: CidrSet): string | undefined {
  const kind = nonPublicKind(address);
  if (kind === undefined || !allowed) return kind;
  if (kind === 'cloud metadata address') return allowed.listsExactly(address) ? undefined : kind;
  return allowed.has(address) ? undefined : kind;
}

/** A connection the guard refused: `host` is, or resolves to, a non-public `address`. */
export class EgressRefusedError extends Error {
  readonly code = EGRESS_REFUSED;
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(
      `${host === address ? host : `${host} (${address})`} is not a public address, and this platform does not connect to private ones on a tenant's behalf`,
    );
    this.name = 'EgressRefusedError';
  }
}

/**
 * Refuses a URL's host when it is a non-public IP literal or `localhost` (names are checked when
 * they resolve, by {@link publicOnlyLookup}: checking them here could be undone by DNS later).
 */
export function assertPublicUrl(url: URL): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) throw new EgressRefusedError(host, '127.0.0.1');
  if (isIP(host) && isPrivateAddress(host)) throw new EgressRefusedError(host, host);
}

/**
 * A `lookup` for sockets that fails when a name resolves to an address {@link refusedAddressKind}
 * refuses (any non-public one without `allowed`). The check is on the addresses the connection
 * will use, so DNS answering differently later (rebinding) cannot get around it. Sockets skip
 * `lookup` for IP literals: check those with {@link refusedAddressKind} first.
 */
export function guardedLookup(allowed?: CidrSet): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error, '', 4);
      const refused = addresses.find((a) => refusedAddressKind(a.address, allowed) !== undefined);
      if (refused) return callback(new EgressRefusedError(hostname, refused.address), '', 4);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const first = addresses[0]!;
      callback(null, first.address, first.family);
    });
  };
}

/** A `lookup` for sockets that fails when a name resolves to a non-public address (see {@link guardedLookup}). */
export const publicOnlyLookup: LookupFunction = guardedLookup();

/** HTTP(S) agents whose connections go to public addresses only (keep-alive, like the SDKs' own). */
export function publicOnlyAgents(): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  return {
    httpAgent: new http.Agent({ keepAlive: true, lookup: publicOnlyLookup }),
    httpsAgent: new https.Agent({ keepAlive: true, lookup: publicOnlyLookup }),
  };
}
