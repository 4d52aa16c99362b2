/**
 * Where the platform may connect on a tenant's behalf. Export destinations (and, later, the
 * sandboxes' auth proxy) call hosts that a tenant chose: without a guard a tenant could make the
 * platform reach its own loopback services, the private network or a cloud metadata endpoint, and
 * read the answers from error messages. The operator may allow private addresses (a laptop with a
 * local MinIO, an in-cluster object store).
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/** The `code` of a connection refused by the guard (as Node's own errors carry one). */
export const EGRESS_REFUSED = 'EBERTH_EGRESS_REFUSED';

/** Loopback, private, link-local (metadata), carrier-grade NAT, multicast and reserved ranges. */
const NOT_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) {
  NOT_PUBLIC.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) {
  NOT_PUBLIC.addSubnet(net, prefix, 'ipv6');
}

/** Whether `address` (an IPv4 or IPv6 literal) is anything but a public unicast address. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 6) {
    // An IPv4-mapped address (::ffff:10.0.0.1) reaches the IPv4 host.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return NOT_PUBLIC.check(mapped[1]!, 'ipv4');
    return NOT_PUBLIC.check(address, 'ipv6');
  }
  return NOT_PUBLIC.check(address, 'ipv4');
}

/** A connection the guard refused: `host` is, or resolves to, a non-public `address`. */
export class EgressRefusedError extends Error {
  readonly code = EGRESS_REFUSED;
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host === address ? host : `${host} (${address})`} is not a public address, and this platform does not connect to private ones on a tenant's behalf`);
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
 * A `lookup` for sockets that fails when a name resolves to a non-public address. The check is on
 * the addresses the connection will use, so DNS answering differently later (rebinding) cannot
 * get around it.
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
    if (error) return callback(error, '', 4);
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused) return callback(new EgressRefusedError(hostname, refused.address), '', 4);
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    const first = addresses[0]!;
    callback(null, first.address, first.family);
  });
};

/** HTTP(S) agents whose connections go to public addresses only (keep-alive, like the SDKs' own). */
export function publicOnlyAgents(): { httpAgent: http.Agent; httpsAgent: https.Agent } {
  return {
    httpAgent: new http.Agent({ keepAlive: true, lookup: publicOnlyLookup }),
    httpsAgent: new https.Agent({ keepAlive: true, lookup: publicOnlyLookup }),
  };
}
