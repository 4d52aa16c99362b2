/**
 * Where a sandbox may connect: the tenant's `access_control` list, then the platform's default.
 *
 * Patterns (allow_list or deny_list, never both):
 * - `api.example.com` — that host exactly (case-insensitive, a trailing dot ignored);
 * - `*.example.com` — a glob: `*` stands for one or more characters, dots included, so it matches
 *   `a.example.com` and `a.b.example.com` but NOT the apex `example.com` (list both to mean both);
 *   `*` alone matches every host. Rules' `matchHosts` use the same globs;
 * - `10.1.2.3`, `2001:db8::1` — an IP; `10.0.0.0/8`, `2001:db8::/32` — a CIDR. These match the
 *   addresses a name resolves to as well as IP literals;
 * - `~regex` — a JavaScript regular expression matched against the WHOLE host name
 *   (case-insensitive): `~api[0-9]+\.example\.com`.
 *
 * A deny list refuses a host whose name matches, or any of whose addresses matches. An allow list
 * admits a host whose name matches, or all of whose addresses match; everything else is refused.
 * Then, whatever the lists say, the default applies to every resolved address: public addresses
 * only, unless the operator allows private CIDRs (`EgressPolicy.privateAllow`) — a tenant's allow
 * list cannot open the platform's private network. The name is resolved once and the connection
 * goes to the addresses that were checked, so DNS answering differently later cannot get around it.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { CidrSet, InvalidCidrError, canonicalAddress, parseCidr, refusedAddressKind } from '@berth/egress';
import type { EgressPolicy } from '../drivers/driver.js';

/** A destination the policy refuses; `message` is the plain-text reason the sandbox sees. */
export class EgressDeniedError extends Error {
  override readonly name = 'EgressDeniedError';
  constructor(
    readonly host: string,
    readonly address: string | undefined,
    readonly reason: string,
  ) {
    super(`egress to ${address === undefined || address === host ? host : `${host} (${address})`} refused: ${reason}`);
  }
}

/** A policy whose patterns do not parse (the API validates them first; see validateAccessControl). */
export class EgressPolicyError extends Error {
  override readonly name = 'EgressPolicyError';
}

/** One problem in user-given patterns, for a 422 detail list; `path` is relative to `access_control`. */
export interface PatternIssue {
  path: (string | number)[];
  message: string;
}

type NamePattern = { kind: 'name'; test: (host: string) => boolean };
type AddressPattern = { kind: 'address'; set: BlockList };
type Pattern = NamePattern | AddressPattern;

const MAX_PATTERN_LENGTH = 253;
const HOST_CHARS = /^[a-z0-9_.-]+$/;
const GLOB_CHARS = /^[a-z0-9_.*-]+$/;

/** Host names as the checks compare them: lowercase, no trailing dot, IPv6 without brackets. */
export function normalizeHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
}

/** A matcher for a host glob (`*.example.com`, `api.example.com`, `*`); see the module comment. */
export function hostGlob(glob: string): (host: string) => boolean {
  const normalized = normalizeHost(glob);
  if (!normalized.includes('*')) return (host) => host === normalized;
  const source = normalized
    .split('*')
    .map((part) => part.replace(/[.\\^$+?()[\]{}|-]/g, '\\$&'))
    .join('.+');
  const regex = new RegExp(`^${source}$`);
  return (host) => regex.test(host);
}

/** Parses one pattern; a string (what is wrong) when it does not parse. */
function parsePattern(text: string): Pattern | string {
  if (text.length === 0) return 'an empty pattern matches nothing';
  if (text.length > MAX_PATTERN_LENGTH + 1) return `a pattern is at most ${MAX_PATTERN_LENGTH} characters`;
  if (text.startsWith('~')) {
    try {
      const regex = new RegExp(`^(?:${text.slice(1)})$`, 'i');
      return { kind: 'name', test: (host) => regex.test(host) };
    } catch (error) {
      return `${JSON.stringify(text)} is not a valid regular expression: ${(error as Error).message}`;
    }
  }
  const host = normalizeHost(text);
  if (host.includes('/') || isIP(host)) {
    try {
      const { network, prefix, type } = parseCidr(host);
      const set = new BlockList();
      set.addSubnet(network, prefix, type);
      return { kind: 'address', set };
    } catch (error) {
      if (error instanceof InvalidCidrError) return error.message;
      throw error;
    }
  }
  if (host.includes('*')) {
    if (!GLOB_CHARS.test(host)) return `${JSON.stringify(text)} is not a host glob (like *.example.com)`;
    return { kind: 'name', test: hostGlob(host) };
  }
  if (!HOST_CHARS.test(host) || host.split('.').some((label) => label === '')) {
    return `${JSON.stringify(text)} is not a host name, glob (*.example.com), IP, CIDR (10.0.0.0/8) or ~regex`;
  }
  return { kind: 'name', test: (candidate) => candidate === host };
}

/** Every problem in an `access_control` object's lists (both set, bad CIDRs, bad regexes), for a 422. */
export function validateAccessControl(lists: { allowList?: readonly string[]; denyList?: readonly string[] }): PatternIssue[] {
  const issues: PatternIssue[] = [];
  if ((lists.allowList?.length ?? 0) > 0 && (lists.denyList?.length ?? 0) > 0) {
    issues.push({ path: [], message: 'set allow_list or deny_list, not both' });
  }
  for (const [key, list] of [
    ['allow_list', lists.allowList],
    ['deny_list', lists.denyList],
  ] as const) {
    list?.forEach((text, index) => {
      const parsed = parsePattern(text);
      if (typeof parsed === 'string') issues.push({ path: [key, index], message: parsed });
    });
  }
  return issues;
}

function compile(list: readonly string[], key: string): Pattern[] {
  return list.map((text, index) => {
    const parsed = parsePattern(text);
    if (typeof parsed === 'string') throw new EgressPolicyError(`${key}[${index}]: ${parsed}`);
    return parsed;
  });
}

/** An address a checked connection may use. */
export interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/** A compiled {@link EgressPolicy}: decides per (host, port), then per resolved address. */
export class EgressGuard {
  private readonly allow: Pattern[];
  private readonly deny: Pattern[];
  private readonly privateAllow: CidrSet;

  /** EgressPolicyError when a pattern or CIDR does not parse, or both lists are set. */
  constructor(policy: Pick<EgressPolicy, 'allowList' | 'denyList' | 'privateAllow'>) {
    if (policy.allowList.length > 0 && policy.denyList.length > 0) throw new EgressPolicyError('set allow_list or deny_list, not both');
    this.allow = compile(policy.allowList, 'allow_list');
    this.deny = compile(policy.denyList, 'deny_list');
    try {
      this.privateAllow = new CidrSet(policy.privateAllow);
    } catch (error) {
      throw new EgressPolicyError(`private egress CIDRs: ${(error as Error).message}`, { cause: error });
    }
  }

  /**
   * Checks `host` and resolves it (once): the addresses to connect to, every one of them allowed.
   * EgressDeniedError when the host or any address it resolves to is refused; a DNS error when the
   * name does not resolve.
   */
  async resolve(rawHost: string, port: number): Promise<CheckedAddress[]> {
    const host = normalizeHost(rawHost);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new EgressDeniedError(host, undefined, `port ${port} is not a valid port`);
    if (host === '') throw new EgressDeniedError(host, undefined, 'no host');
    const names = (patterns: Pattern[]) => patterns.some((p) => p.kind === 'name' && p.test(host));
    const deniedByName = names(this.deny);
    if (deniedByName) throw new EgressDeniedError(host, undefined, 'on the deny list');
    const allowedByName = this.allow.length === 0 || names(this.allow);
    // Without addresses on the allow list, a name not on it is refused without asking DNS.
    if (!allowedByName && !this.allow.some((p) => p.kind === 'address')) throw new EgressDeniedError(host, undefined, 'not on the allow list');
    const family = isIP(host);
    const addresses: CheckedAddress[] = family
      ? [{ address: host, family: family as 4 | 6 }]
      : (await lookup(host, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family as 4 | 6 }));
    for (const { address } of addresses) {
      const reason = this.refusal(address, allowedByName);
      if (reason) throw new EgressDeniedError(host, address, reason);
    }
    return addresses;
  }

  private refusal(address: string, allowedByName: boolean): string | undefined {
    const checked = canonicalAddress(address);
    const inList = (patterns: Pattern[]) => patterns.some((p) => p.kind === 'address' && p.set.check(checked.address, checked.type));
    if (inList(this.deny)) return 'on the deny list';
    if (!allowedByName && !inList(this.allow)) return 'not on the allow list';
    return refusedAddressKind(address, this.privateAllow);
  }
}
