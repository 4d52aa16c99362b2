/**
 * A proxy_config in its three forms: as the API sends it (`ProxyConfig` on the wire, opaque header
 * values in plaintext once), as stored (opaque values sealed with the platform key), and as the
 * driver's `EgressPolicy` (every value plaintext, only in memory, only for the instance's proxy).
 * Returned configs never carry an opaque value: only `is_set`.
 */
import { RequestValidationError, type ValidationIssue } from '@berth/errors';
import type { ProxyConfig, ProxyRule as WireRule } from '@berth/proto';
import type { SecretBox } from '@berth/secret-box';
import type { EgressPolicy } from '../drivers/driver.js';
import { validateAccessControl } from '../proxy/egress-policy.js';
import type { StoredHeader, StoredProxyConfig } from '../tables.js';

export const EMPTY_PROXY_CONFIG: StoredProxyConfig = { rules: [] };

/** Checks and seals a config from a request; `loc` is where it sits in the REST body. */
export function storeProxyConfig(config: ProxyConfig, box: SecretBox, loc: (string | number)[]): StoredProxyConfig {
  const issues: ValidationIssue[] = [];
  const names = new Set<string>();
  const rules = config.rules.map((rule: WireRule, i) => {
    const at = [...loc, 'rules', i];
    if (names.has(rule.name)) issues.push({ loc: [...at, 'name'], msg: `two rules are named "${rule.name}"`, type: 'value_error' });
    names.add(rule.name);
    if (rule.matchHosts.length === 0) issues.push({ loc: [...at, 'match_hosts'], msg: 'a rule needs at least one host pattern', type: 'value_error' });
    const headers = rule.headers.map((header, j): StoredHeader => {
      if (header.value === undefined) {
        issues.push({ loc: [...at, 'headers', j, 'value'], msg: 'a header needs a value', type: 'missing' });
        return { name: header.name, type: 'plaintext', value: '' };
      }
      return header.type === 'opaque'
        ? { name: header.name, type: 'opaque', sealed: box.seal(header.value).toString('base64') }
        : { name: header.name, type: 'plaintext', value: header.value };
    });
    return { name: rule.name, match_hosts: rule.matchHosts, headers, enabled: rule.enabled };
  });
  const allow = config.accessControl?.allowList ?? [];
  const deny = config.accessControl?.denyList ?? [];
  for (const issue of validateAccessControl({ allowList: allow, denyList: deny })) {
    issues.push({ loc: [...loc, 'access_control', ...issue.path], msg: issue.message, type: 'value_error' });
  }
  if (issues.length > 0) throw new RequestValidationError(issues);
  return {
    rules,
    ...(allow.length || deny.length ? { access_control: { ...(allow.length ? { allow_list: allow } : {}), ...(deny.length ? { deny_list: deny } : {}) } } : {}),
  };
}

/** The config as returned to users: opaque values replaced by `is_set`. */
export function wireProxyConfig(stored: StoredProxyConfig): Omit<ProxyConfig, '$typeName'> & { rules: unknown[] } {
  return {
    rules: stored.rules.map((rule) => ({
      name: rule.name,
      matchHosts: rule.match_hosts,
      enabled: rule.enabled,
      headers: rule.headers.map((h) =>
        h.type === 'opaque' ? { name: h.name, type: 'opaque', isSet: true } : { name: h.name, type: 'plaintext', value: h.value ?? '', isSet: true },
      ),
    })),
    ...(stored.access_control ? { accessControl: { allowList: stored.access_control.allow_list ?? [], denyList: stored.access_control.deny_list ?? [] } } : {}),
  } as Omit<ProxyConfig, '$typeName'> & { rules: unknown[] };
}

/** The egress policy of an instance: enabled rules with plaintext values, plus the operator's private CIDRs. */
export function egressPolicy(stored: StoredProxyConfig, box: SecretBox, privateAllow: readonly string[]): EgressPolicy {
  return {
    rules: stored.rules
      .filter((rule) => rule.enabled)
      .map((rule) => ({
        name: rule.name,
        matchHosts: rule.match_hosts,
        headers: rule.headers.map((h) => ({ name: h.name, value: h.type === 'opaque' ? box.open(Buffer.from(h.sealed ?? '', 'base64')) : (h.value ?? '') })),
      })),
    allowList: stored.access_control?.allow_list ?? [],
    denyList: stored.access_control?.deny_list ?? [],
    privateAllow: [...privateAllow],
  };
}
