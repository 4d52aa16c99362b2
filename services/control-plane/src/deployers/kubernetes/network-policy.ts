/**
 * The NetworkPolicy of a deployment's pods: other people's code, contained like the local
 * deployer's containers (whose egress proxy refuses the same addresses, `@berth/egress`).
 *
 * Egress: the cluster DNS; the public internet (loopback, private, carrier-grade NAT, link-local,
 * cloud metadata and other non-public ranges excepted); the platform's gateway pods (traces) and
 * control-plane pods (the artifact endpoint the init container fetches a source revision from),
 * each on its own port only; the deployment's database and Redis on their ports only, by the
 * addresses their hosts resolve to at this deploy, and by namespace when the host names an
 * in-cluster Service (policies see the Service's pods, not its cluster IP); and the operator's
 * private ranges (`BERTH_DEPLOYMENT_PRIVATE_EGRESS`, `BERTH_WEBHOOK_PRIVATE_EGRESS`), never a
 * metadata address inside a wider one. So not: other agent pods, the platform's gRPC services,
 * sandboxes, the metadata endpoint, or any other private address.
 *
 * Ingress: the gateway's pods on the agent server's port; the operator's metrics scraper
 * (`BERTH_AGENT_METRICS_SCRAPER_*`), when named, on the metrics port only; nothing else (the
 * kubelet's probes come from the node, which NetworkPolicies do not filter).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { V1NetworkPolicy, V1NetworkPolicyEgressRule, V1NetworkPolicyPeer, V1NetworkPolicyPort } from '@kubernetes/client-node';
import { allowedBlock, canonicalAddress, publicAddressBlocks } from '@berth/egress';
import type { RevisionSpec } from '../deployer.js';
import { AGENT_METRICS_PORT, AGENT_PORT, objectMeta, podSelector } from './manifests.js';

/** Pods selected by labels in their namespace. */
export interface PeerPods {
  namespace: string;
  labels: Record<string, string>;
}

/** Pods of the platform, and the port agent pods use of theirs. */
export interface PlatformPods extends PeerPods {
  /** The pods' own port (a Service's targetPort, not its port: policies see the pod). */
  port: number;
}

/** What the policy of every deployment's pods allows beyond DNS, the public internet and their database and Redis. */
export interface AgentNetworkPolicy {
  /** The gateway's pods: the only ones that may connect to the agent server's API; agent pods send them their traces. */
  gateway: PlatformPods;
  /**
   * The pods that scrape agent servers' metrics (a Prometheus), admitted to the metrics port only.
   * Unset: nothing reaches that port.
   */
  metricsScraper?: PeerPods;
  /** The control plane's pods, on the artifact endpoint's port: init containers fetch source revisions there. */
  controlPlane?: PlatformPods;
  /** Non-public CIDRs agent pods may reach (`BERTH_DEPLOYMENT_PRIVATE_EGRESS`, `BERTH_WEBHOOK_PRIVATE_EGRESS`). */
  privateEgress?: string[];
}

/** A platform service that agent pods reach by a URL in their env, as found at this deploy. */
export interface PlatformEndpoint {
  /** The env var holding the URL (`DATABASE_URL`, `REDIS_URL`). */
  setting: string;
  host: string;
  port: number;
  /** What `host` resolved to (or is); empty when it did not resolve. */
  addresses: string[];
  /** The namespace of the in-cluster Service `host` names (`<service>.<namespace>.svc…`, or a bare name: the agent pods'). */
  serviceNamespace?: string;
}

/** Resolves a host name to every address it has (IPv4 and IPv6). */
export type Lookup = (host: string) => Promise<string[]>;

/** The system resolver (getaddrinfo), as the agent server's own connections resolve. */
export const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** The platform URLs in an agent server's env that its pods must reach, with the port each scheme defaults to. */
const ENDPOINT_SETTINGS: Record<string, number> = { DATABASE_URL: 5432, REDIS_URL: 6379 };

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
/** `<service>.<namespace>.svc`, optionally with the cluster domain: group 2 is the namespace. */
const SERVICE_HOST = new RegExp(`^${LABEL}\\.(${LABEL})\\.svc(\\.[a-z0-9.-]*)?$`, 'i');

/** The namespace of the Service `host` names for a pod of `podNamespace`, when it names one. */
function serviceNamespace(host: string, podNamespace: string): string | undefined {
  const match = SERVICE_HOST.exec(host.replace(/\.$/, ''));
  if (match) return match[2]!.toLowerCase();
  // A bare name resolves in the pod's own namespace (its DNS search path); localhost is the pod itself.
  if (new RegExp(`^${LABEL}$`, 'i').test(host) && host.toLowerCase() !== 'localhost') return podNamespace;
  return undefined;
}

/**
 * The platform services `env` points the agent server at (its database, its Redis), their hosts
 * resolved now: an address that moves later (a managed database's failover) is found again at the
 * next deploy (and every deploy when the control plane starts), or allowed as a range by the operator.
 */
export async function resolveEndpoints(
  env: Record<string, string>,
  podNamespace: string,
  lookup: Lookup,
): Promise<Array<PlatformEndpoint & { error?: Error }>> {
  const endpoints: Array<PlatformEndpoint & { error?: Error }> = [];
  for (const [setting, defaultPort] of Object.entries(ENDPOINT_SETTINGS)) {
    const value = env[setting];
    if (!value) continue;
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      // Not a URL: the agent server refuses it at start, with its own words.
      continue;
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!host) continue;
    const port = url.port ? Number(url.port) : defaultPort;
    const namespace = serviceNamespace(host, podNamespace);
    let addresses: string[] = [];
    let error: Error | undefined;
    try {
      addresses = isIP(host) ? [host] : await lookup(host);
    } catch (cause) {
      // Said in the deploy log (describeEndpoint); the pods may still reach it if it is public.
      error = cause as Error;
    }
    const sorted = [...new Set(addresses.map((a) => canonicalAddress(a).address))].sort();
    endpoints.push({ setting, host, port, addresses: sorted, ...(namespace ? { serviceNamespace: namespace } : {}), ...(error ? { error } : {}) });
  }
  return endpoints;
}

function hostBlock(address: string): V1NetworkPolicyPeer {
  const { address: canonical, type } = canonicalAddress(address);
  return { ipBlock: { cidr: `${canonical}/${type === 'ipv6' ? 128 : 32}` } };
}

function namespacePeer(namespace: string): V1NetworkPolicyPeer {
  // Set on every namespace by the API server (Kubernetes 1.21+).
  return { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } };
}

function podsPeer(pods: PeerPods): V1NetworkPolicyPeer {
  return { ...namespacePeer(pods.namespace), podSelector: { matchLabels: { ...pods.labels } } };
}

function tcp(port: number): V1NetworkPolicyPort[] {
  return [{ protocol: 'TCP', port }];
}

/** The cluster DNS: kube-dns / CoreDNS pods, as every mainstream distribution labels them. */
const DNS_RULE: V1NetworkPolicyEgressRule = {
  to: [{ ...namespacePeer('kube-system'), podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } }],
  ports: [
    { protocol: 'UDP', port: 53 },
    { protocol: 'TCP', port: 53 },
  ],
};

/** The policy of a deployment's pods (named like its other objects). */
export function buildNetworkPolicy(spec: RevisionSpec, namespace: string, policy: AgentNetworkPolicy, endpoints: PlatformEndpoint[]): V1NetworkPolicy {
  const services: V1NetworkPolicyEgressRule[] = endpoints
    .map((endpoint) => ({
      to: [...endpoint.addresses.map(hostBlock), ...(endpoint.serviceNamespace ? [namespacePeer(endpoint.serviceNamespace)] : [])],
      ports: tcp(endpoint.port),
    }))
    .filter((rule) => rule.to.length > 0);
  const privateEgress = policy.privateEgress ?? [];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: objectMeta(spec, { namespace }),
    spec: {
      podSelector: { matchLabels: podSelector(spec.deploymentId) },
      policyTypes: ['Ingress', 'Egress'],
      // `_from` is the client's name for `from` (a reserved word); it sends it as `from`.
      ingress: [
        { _from: [podsPeer(policy.gateway)], ports: tcp(AGENT_PORT) },
        ...(policy.metricsScraper ? [{ _from: [podsPeer(policy.metricsScraper)], ports: tcp(AGENT_METRICS_PORT) }] : []),
      ],
      egress: [
        DNS_RULE,
        { to: publicAddressBlocks().map((ipBlock) => ({ ipBlock })) },
        { to: [podsPeer(policy.gateway)], ports: tcp(policy.gateway.port) },
        ...(policy.controlPlane ? [{ to: [podsPeer(policy.controlPlane)], ports: tcp(policy.controlPlane.port) }] : []),
        ...services,
        ...(privateEgress.length > 0 ? [{ to: privateEgress.map((cidr) => ({ ipBlock: allowedBlock(cidr) })) }] : []),
      ],
    },
  };
}

/** One line for the deploy log: where the policy lets the pods reach one of their platform services. */
export function describeEndpoint(endpoint: PlatformEndpoint & { error?: Error }): string {
  const where = [
    ...(endpoint.addresses.length > 0 ? [endpoint.addresses.join(', ')] : []),
    ...(endpoint.serviceNamespace ? [`the pods of namespace ${endpoint.serviceNamespace}`] : []),
  ];
  const target = `${endpoint.setting} (${endpoint.host}:${endpoint.port})`;
  if (where.length === 0) {
    return `network policy: ${target} did not resolve${endpoint.error ? ` (${endpoint.error.message})` : ''}: agent pods may reach it only if it is public or inside BERTH_DEPLOYMENT_PRIVATE_EGRESS`;
  }
  return `network policy: agent pods may reach ${target} at ${where.join(' and ')}, on port ${endpoint.port}`;
}
