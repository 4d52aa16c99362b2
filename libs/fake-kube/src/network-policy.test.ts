// The NetworkPolicy evaluator against the rules of networking.k8s.io/v1, case by case (the
// examples of the Kubernetes documentation's "Network Policies" page where they apply).
import { describe, expect, it } from '@jest/globals';
import { connectionAllowed, podEndpoint, type Endpoint, type NetworkPolicyObject } from './network-policy.js';

const web = { pod: { namespace: 'app', labels: { role: 'web' }, ip: '10.244.0.10' } };
const db = { pod: { namespace: 'app', labels: { role: 'db' }, ip: '10.244.0.20' } };
const other = { pod: { namespace: 'other', labels: { role: 'web' }, ip: '10.244.1.10' } };
const labelled = {
  pod: { namespace: 'ops', namespaceLabels: { team: 'ops', 'kubernetes.io/metadata.name': 'ops' }, labels: { role: 'web' }, ip: '10.244.2.10' },
};
const internet = { ip: '93.184.216.34' };
const tcp = (port: number) => ({ port });

function policy(spec: NonNullable<NetworkPolicyObject['spec']>, namespace = 'app'): NetworkPolicyObject {
  return { metadata: { name: 'p', namespace }, spec };
}

describe('connectionAllowed', () => {
  it('allows everything between pods that no policy selects', () => {
    expect(connectionAllowed([], web, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([policy({ podSelector: { matchLabels: { role: 'db' } }, ingress: [] })], web, other, tcp(80))).toBe(true);
  });

  it('isolates a selected pod for ingress by default, for egress only when the policy says so', () => {
    const denyIn = policy({ podSelector: { matchLabels: { role: 'db' } } });
    expect(connectionAllowed([denyIn], web, db, tcp(5432))).toBe(false);
    expect(connectionAllowed([denyIn], db, internet, tcp(443))).toBe(true);
    const denyOut = policy({ podSelector: { matchLabels: { role: 'db' } }, policyTypes: ['Egress'] });
    expect(connectionAllowed([denyOut], db, internet, tcp(443))).toBe(false);
    expect(connectionAllowed([denyOut], web, db, tcp(5432))).toBe(true);
    // egress rules present and no policyTypes: both directions (the API server's default).
    const both = policy({ podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0' } }] }] });
    expect(connectionAllowed([both], web, internet, tcp(443))).toBe(true);
    expect(connectionAllowed([both], other, web, tcp(80))).toBe(false);
  });

  it("matches a podSelector in the policy's namespace only, a namespaceSelector across namespaces, and both together", () => {
    const fromWeb = policy({ podSelector: { matchLabels: { role: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: 'web' } } }] }] });
    expect(connectionAllowed([fromWeb], web, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([fromWeb], other, db, tcp(5432))).toBe(false);
    const fromOps = policy({ podSelector: { matchLabels: { role: 'db' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'ops' } } }] }] });
    expect(connectionAllowed([fromOps], labelled, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([fromOps], web, db, tcp(5432))).toBe(false);
    const both = policy({
      podSelector: { matchLabels: { role: 'db' } },
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'other' } }, podSelector: { matchLabels: { role: 'web' } } }] }],
    });
    expect(connectionAllowed([both], other, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([both], labelled, db, tcp(5432))).toBe(false);
    expect(connectionAllowed([both], { pod: { ...other.pod, labels: { role: 'batch' } } }, db, tcp(5432))).toBe(false);
  });

  it('reads matchExpressions', () => {
    const notBatch = policy({
      podSelector: { matchLabels: { role: 'db' } },
      ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'role', operator: 'NotIn', values: ['batch'] }] } }] }],
    });
    expect(connectionAllowed([notBatch], web, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([notBatch], { pod: { ...web.pod, labels: { role: 'batch' } } }, db, tcp(5432))).toBe(false);
    const exists = policy({ podSelector: { matchExpressions: [{ key: 'role', operator: 'Exists' }] }, policyTypes: ['Egress'] });
    expect(connectionAllowed([exists], web, internet, tcp(443))).toBe(false);
    expect(connectionAllowed([exists], { pod: { ...web.pod, labels: {} } }, internet, tcp(443))).toBe(true);
  });

  it('checks an ipBlock against addresses and pod IPs, with its holes, family by family', () => {
    const out = policy({
      podSelector: { matchLabels: { role: 'web' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8', '169.254.169.254/32'] } }] }],
    });
    expect(connectionAllowed([out], web, internet, tcp(443))).toBe(true);
    expect(connectionAllowed([out], web, { ip: '10.1.2.3' }, tcp(443))).toBe(false);
    expect(connectionAllowed([out], web, { ip: '169.254.169.254' }, tcp(80))).toBe(false);
    expect(connectionAllowed([out], web, { ip: '169.254.169.253' }, tcp(80))).toBe(true);
    expect(connectionAllowed([out], web, { ip: '2001:db8::1' }, tcp(443))).toBe(false);
    // A pod is reached at its IP: inside the hole, so refused, though no podSelector names it.
    expect(connectionAllowed([out], web, db, tcp(5432))).toBe(false);
  });

  it('matches ports by protocol, number and range; a named port never matches here', () => {
    const dns = policy({
      podSelector: {},
      policyTypes: ['Egress'],
      egress: [{ ports: [{ protocol: 'UDP', port: 53 }, { port: 8000, endPort: 8010 }, { port: 'http' }] }],
    });
    expect(connectionAllowed([dns], web, internet, { port: 53, protocol: 'UDP' })).toBe(true);
    expect(connectionAllowed([dns], web, internet, { port: 53 })).toBe(false);
    expect(connectionAllowed([dns], web, internet, tcp(8005))).toBe(true);
    expect(connectionAllowed([dns], web, internet, tcp(8011))).toBe(false);
    expect(connectionAllowed([dns], web, internet, tcp(80))).toBe(false);
  });

  it("adds policies up, and needs both the source's egress and the destination's ingress", () => {
    const webOut: NetworkPolicyObject = policy({
      podSelector: { matchLabels: { role: 'web' } },
      policyTypes: ['Egress'],
      egress: [{ to: [{ podSelector: { matchLabels: { role: 'db' } } }], ports: [{ port: 5432 }] }],
    });
    const dbIn = policy({ podSelector: { matchLabels: { role: 'db' } }, ingress: [] });
    expect(connectionAllowed([webOut], web, db, tcp(5432))).toBe(true);
    expect(connectionAllowed([webOut, dbIn], web, db, tcp(5432))).toBe(false);
    const dbFromWeb = policy({ podSelector: { matchLabels: { role: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { role: 'web' } } }] }] });
    expect(connectionAllowed([webOut, dbIn, dbFromWeb], web, db, tcp(5432))).toBe(true);
    // A policy of another namespace does not apply.
    expect(connectionAllowed([policy({ podSelector: {}, ingress: [] }, 'other')], web, db, tcp(5432))).toBe(true);
  });

  it('reads a stored pod', () => {
    const endpoint: Endpoint = podEndpoint({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'x', namespace: 'app', labels: { role: 'db' } },
      status: { podIP: '10.244.0.20' },
    });
    expect(endpoint).toEqual({ pod: { namespace: 'app', labels: { role: 'db' }, ip: '10.244.0.20' } });
  });
});
