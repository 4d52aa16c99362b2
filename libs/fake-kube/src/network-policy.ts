/**
 * What NetworkPolicies let through, decided as a policy-enforcing network plugin decides it
 * (networking.k8s.io/v1 semantics), so that tests can ask "may this pod reach that address or pod
 * on that port?" of the policies a component wrote, from an attacker's side, without a cluster:
 *
 * - a pod is isolated for egress (ingress) once a policy of its namespace selects it with `Egress`
 *   (`Ingress`) in its policyTypes; an isolated pod's connections are allowed when any rule of any
 *   such policy allows them (policies add up), a non-isolated pod's always;
 * - a rule with no peers matches every peer, with no ports every port; a peer is an `ipBlock`
 *   (`cidr` minus `except`), a `podSelector` (pods of the policy's namespace), a `namespaceSelector`
 *   (every pod of the matching namespaces), or both selectors (matching pods in matching namespaces);
 * - a connection between two pods needs the source's egress and the destination's ingress.
 *
 * Not modelled (each is a plugin's business, or always allowed): traffic to and from the pod's own
 * node, named ports (they never match here), Service cluster IPs rewritten before the check.
 */
import { BlockList, isIP } from 'node:net';
import { matches, type Requirement } from './selectors.js';
import type { KubeObject } from './types.js';

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

interface PolicyPeer {
  ipBlock?: { cidr: string; except?: string[] };
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
}

interface PolicyPort {
  protocol?: string;
  port?: number | string;
  endPort?: number;
}

/** A NetworkPolicy as stored (a `V1NetworkPolicy` fits). */
export interface NetworkPolicyObject {
  metadata?: { name?: string; namespace?: string };
  spec?: {
    podSelector?: LabelSelector;
    policyTypes?: string[];
    ingress?: Array<{ from?: PolicyPeer[]; ports?: PolicyPort[] }>;
    egress?: Array<{ to?: PolicyPeer[]; ports?: PolicyPort[] }>;
  };
}

/** A pod: where it is and what labels it and its namespace carry. */
export interface PodEndpoint {
  namespace: string;
  labels: Record<string, string>;
  /**
   * Its namespace's labels.
   * @default { 'kubernetes.io/metadata.name': namespace } (what the API server sets on every namespace)
   */
  namespaceLabels?: Record<string, string>;
  /** Its IP, which `ipBlock` peers are checked against too. */
  ip?: string;
}

/** One end of a connection: a pod, or an address outside any pod (a node, a database, the internet). */
export type Endpoint = { pod: PodEndpoint } | { ip: string };

export interface Connection {
  port: number;
  /** @default 'TCP' */
  protocol?: 'TCP' | 'UDP' | 'SCTP';
}

/** A label selector's requirements; an empty selector selects everything. */
function requirements(selector: LabelSelector): Requirement[] {
  const own: Requirement[] = Object.entries(selector.matchLabels ?? {}).map(([key, value]) => ({ key, op: 'eq', value }));
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    if (operator === 'In') own.push({ key, op: 'in', values });
    else if (operator === 'NotIn') own.push({ key, op: 'notin', values });
    else if (operator === 'Exists') own.push({ key, op: 'exists' });
    else if (operator === 'DoesNotExist') own.push({ key, op: 'notexists' });
    else throw new TypeError(`unknown label selector operator ${operator}`);
  }
  return own;
}

function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  return matches(requirements(selector ?? {}), labels);
}

function namespaceLabels(pod: PodEndpoint): Record<string, string> {
  return pod.namespaceLabels ?? { 'kubernetes.io/metadata.name': pod.namespace };
}

function inCidr(cidr: string, address: string): boolean {
  const [network = '', prefix = ''] = cidr.split('/');
  const family = isIP(network);
  if (family === 0 || family !== isIP(address)) return false;
  const list = new BlockList();
  list.addSubnet(network, Number(prefix), family === 6 ? 'ipv6' : 'ipv4');
  return list.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

function peerMatches(peer: PolicyPeer, policyNamespace: string, endpoint: Endpoint): boolean {
  if (peer.ipBlock) {
    const ip = 'ip' in endpoint ? endpoint.ip : endpoint.pod.ip;
    return ip !== undefined && inCidr(peer.ipBlock.cidr, ip) && !(peer.ipBlock.except ?? []).some((cidr) => inCidr(cidr, ip));
  }
  if (!('pod' in endpoint)) return false;
  const { pod } = endpoint;
  const namespaceOk = peer.namespaceSelector ? selects(peer.namespaceSelector, namespaceLabels(pod)) : pod.namespace === policyNamespace;
  const podOk = peer.podSelector ? selects(peer.podSelector, pod.labels) : true;
  return namespaceOk && podOk;
}

function portMatches(ports: PolicyPort[] | undefined, connection: Connection): boolean {
  if (!ports || ports.length === 0) return true;
  return ports.some((p) => {
    if ((p.protocol ?? 'TCP') !== (connection.protocol ?? 'TCP')) return false;
    if (p.port === undefined) return true;
    if (typeof p.port !== 'number') return false;
    return p.endPort !== undefined ? connection.port >= p.port && connection.port <= p.endPort : connection.port === p.port;
  });
}

/** Whether `policies` let `pod` make (`egress`) or take (`ingress`) a connection with `peer`. */
function allowedAt(policies: NetworkPolicyObject[], direction: 'ingress' | 'egress', pod: PodEndpoint, peer: Endpoint, connection: Connection): boolean {
  const type = direction === 'ingress' ? 'Ingress' : 'Egress';
  const applying = policies.filter((policy) => {
    const spec = policy.spec ?? {};
    // The API server's default: Ingress always, Egress when the policy has egress rules.
    const types = spec.policyTypes ?? ['Ingress', ...(spec.egress ? ['Egress'] : [])];
    return (policy.metadata?.namespace ?? 'default') === pod.namespace && types.includes(type) && selects(spec.podSelector, pod.labels);
  });
  if (applying.length === 0) return true;
  return applying.some((policy) => {
    const namespace = policy.metadata?.namespace ?? 'default';
    const rules =
      direction === 'ingress'
        ? (policy.spec?.ingress ?? []).map((r) => ({ peers: r.from, ports: r.ports }))
        : (policy.spec?.egress ?? []).map((r) => ({ peers: r.to, ports: r.ports }));
    return rules.some(
      (rule) =>
        portMatches(rule.ports, connection) && (!rule.peers || rule.peers.length === 0 || rule.peers.some((peer_) => peerMatches(peer_, namespace, peer))),
    );
  });
}

/**
 * Whether a connection from `from` to `to` on `connection`'s port gets through `policies` (every
 * policy of the cluster; each applies in its own namespace): the source pod's egress, then the
 * destination pod's ingress. An address outside any pod has no policy of its own.
 */
export function connectionAllowed(policies: NetworkPolicyObject[], from: Endpoint, to: Endpoint, connection: Connection): boolean {
  if ('pod' in from && !allowedAt(policies, 'egress', from.pod, to, connection)) return false;
  if ('pod' in to && !allowedAt(policies, 'ingress', to.pod, from, connection)) return false;
  return true;
}

/** A stored pod as a {@link PodEndpoint} (its namespace, labels and `status.podIP`). */
export function podEndpoint(pod: KubeObject, namespaceLabels?: Record<string, string>): { pod: PodEndpoint } {
  const ip = (pod['status'] as { podIP?: string } | undefined)?.podIP;
  return {
    pod: {
      namespace: pod.metadata.namespace ?? 'default',
      labels: pod.metadata.labels ?? {},
      ...(namespaceLabels ? { namespaceLabels } : {}),
      ...(ip ? { ip } : {}),
    },
  };
}
