/**
 * The Kubernetes objects of one sandbox instance, as pure functions of its spec (golden tests pin
 * their shape: `__golden__/`):
 *
 * - a Pod: the sandbox container (the image, idling under `/bin/sh` until commands arrive by
 *   exec) and the auth proxy as a sidecar container listening on 127.0.0.1:3128 in the pod's
 *   network namespace, which the sandbox reaches through `HTTP(S)_PROXY`;
 * - a Secret with the proxy's config (egress policy with its header values, and the Berth CA's
 *   key), mounted into the sidecar only: nothing of it is visible to the sandbox container;
 * - a `kubernetes.io/dockerconfigjson` Secret when the image needs registry credentials;
 * - a NetworkPolicy: no ingress; egress to the cluster DNS, the public internet (private,
 *   link-local and metadata ranges excepted) and the CIDRs the operator allows;
 * - a ConfigMap that records the instance while it is stopped (no pod then) and carries the CA
 *   certificate the sandbox trusts;
 * - a PersistentVolumeClaim per named volume (outliving the instance).
 *
 * - an init container that locks the pod's egress to the proxy (see ManifestOptions.egressLock).
 *
 * The pod runs other people's code: no service-account token, no Service env, no privilege
 * escalation, no capabilities, the runtime's seccomp profile, optionally a sandboxing runtime class
 * (gVisor's `runsc`), and non-root when the image's user is a non-root uid.
 */
import type {
  V1ConfigMap,
  V1Container,
  V1EnvVar,
  V1NetworkPolicy,
  V1PersistentVolumeClaim,
  V1Pod,
  V1PodSecurityContext,
  V1Secret,
  V1SecurityContext,
} from '@kubernetes/client-node';
import { allowedBlock, publicAddressBlocks } from '@berth/egress';
import { labelValue } from '@berth/kube';
import { bytesQuantity } from '@berth/quantity';
import { proxyEnvironment, type PemPair } from '../../proxy/proxy-ca.js';
import type { SidecarConfigFile } from '../../proxy/sidecar.js';
import { InstanceError, type EgressPolicy, type ImageInfo, type InstanceSpec, type Resources } from '../driver.js';

export const SANDBOX_CONTAINER = 'sandbox';
export const PROXY_CONTAINER = 'proxy';
/** Where the sidecar listens, inside the pod's network namespace. */
export const PROXY_PORT = 3128;
export const PROXY_LISTEN = `127.0.0.1:${PROXY_PORT}`;
export const PROXY_CONFIG_DIR = '/etc/berth-proxy';
/** Where the sandbox finds the CA certificate of the proxy's intercepted HTTPS. */
export const CA_CERT_DIR = '/etc/berth/ca';
export const CA_CERT_PATH = `${CA_CERT_DIR}/ca.crt`;

export const LABELS = {
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'app.kubernetes.io/component',
  instance: 'berth.dev/sandbox-instance',
  tenantId: 'berth.dev/tenant-id',
  claimedBy: 'berth.dev/claimed-by',
} as const;
export const MANAGED_BY = 'berth';
export const COMPONENT = 'sandbox';
/** The component label of the short-lived pods that pull images. */
export const COMPONENT_IMAGE_PULL = 'sandbox-image-pull';

/** Every object of every instance (for listing); add `,berth.dev/sandbox-instance=<name>` for one. */
export const INSTANCE_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.component}=${COMPONENT}`;

/**
 * PID 1 of the sandbox container: idles until stopped (commands come by exec), ends at once on
 * SIGTERM, and, as a shell waiting on its children, reaps the orphans that exec'd commands leave.
 */
export const IDLE_COMMAND = ['/bin/sh', '-c', "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"];

/** Size of a volume whose spec gives none. */
export const DEFAULT_VOLUME_BYTES = 1024 ** 3;

export interface ManifestOptions {
  namespace: string;
  /** The Berth platform image, which has the proxy sidecar (`services/sandbox-manager/dist/proxy/sidecar.js`). */
  platformImage: string;
  /** The CA the proxy signs intercepted HTTPS with (PEM). */
  proxyCa: PemPair;
  /** A RuntimeClass for sandboxes, e.g. gVisor's `runsc` or `kata-qemu`. */
  runtimeClassName?: string;
  /** StorageClass of the volumes' claims (unset: the cluster default). */
  storageClassName?: string;
  /** Run sandboxes as this uid (and gid) whatever the image says, and so as non-root. */
  runAsUser?: number;
  /**
   * An init container (the platform image, with iptables) lets only the proxy's uid send anything
   * but loopback traffic, so that a process ignoring HTTP_PROXY cannot leave by the pod network.
   * It needs NET_ADMIN, which the namespace's admission must allow for it (Pod Security `privileged`).
   * Without it the NetworkPolicy still keeps sandboxes to public addresses, but such a process
   * skips the allow/deny lists and header rules.
   * @default true
   */
  egressLock?: boolean;
}

export interface InstanceManifests {
  pod: V1Pod;
  proxySecret: V1Secret;
  pullSecret: V1Secret | undefined;
  networkPolicy: V1NetworkPolicy;
  record: V1ConfigMap;
  volumeClaims: V1PersistentVolumeClaim[];
}

export function proxySecretName(instance: string): string {
  return `${instance}-proxy`;
}

export function pullSecretName(instance: string): string {
  return `${instance}-pull`;
}

/** Labels on every object of the instance (the spec's own first; the platform's win). */
export function instanceLabels(spec: Pick<InstanceSpec, 'instance' | 'tenantId' | 'labels'>): Record<string, string> {
  const own = Object.fromEntries(Object.entries(spec.labels).map(([key, value]) => [key, labelValue(value)]));
  return {
    ...own,
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.component]: COMPONENT,
    [LABELS.instance]: spec.instance,
    [LABELS.tenantId]: labelValue(spec.tenantId),
  };
}

function meta(spec: InstanceSpec, options: ManifestOptions, name: string) {
  return { name, namespace: options.namespace, labels: instanceLabels(spec) };
}

function resourceList(resources: Resources): Record<string, string> {
  return {
    ...(resources.cpuMillis !== undefined ? { cpu: `${Math.max(1, Math.round(resources.cpuMillis))}m` } : {}),
    ...(resources.memoryBytes !== undefined ? { memory: bytesQuantity(resources.memoryBytes) } : {}),
    // The writable layer and logs of the container; the kubelet evicts a pod that writes more.
    ...(resources.storageBytes !== undefined ? { 'ephemeral-storage': bytesQuantity(resources.storageBytes) } : {}),
  };
}

/** The uid to pin when the image's USER is a non-root uid (`1000`, `1000:1000`); a name cannot be checked by the kubelet. */
export function nonRootUid(user: string | undefined): number | undefined {
  const uid = /^(\d+)(?::\d+)?$/.exec(user ?? '')?.[1];
  return uid !== undefined && Number(uid) !== 0 ? Number(uid) : undefined;
}

/** What only a container can say; shared by the sandbox and the sidecar. */
const CONTAINER_SECURITY: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  privileged: false,
  capabilities: { drop: ['ALL'] },
};

/** The sidecar runs as this uid (the platform image's files are world-readable). */
export const PROXY_UID = 10001;

export const EGRESS_LOCK_CONTAINER = 'egress-lock';

/** Only loopback and the proxy's uid may send: everything else of the pod is rejected at once. */
export const EGRESS_LOCK_SCRIPT = [
  'set -e',
  'for t in iptables ip6tables; do',
  '  if [ "$t" = ip6tables ] && [ ! -e /proc/net/if_inet6 ]; then continue; fi',
  '  $t -w -A OUTPUT -o lo -j ACCEPT',
  `  $t -w -A OUTPUT -m owner --uid-owner ${PROXY_UID} -j ACCEPT`,
  // A TCP reset fails a connect at once ("connection refused"); an ICMP error alone may leave it hanging.
  '  $t -w -A OUTPUT -p tcp -j REJECT --reject-with tcp-reset',
  '  $t -w -A OUTPUT -j REJECT',
  'done',
].join('\n');

function egressLockContainer(options: ManifestOptions): V1Container {
  return {
    name: EGRESS_LOCK_CONTAINER,
    image: options.platformImage,
    imagePullPolicy: 'IfNotPresent',
    command: ['/bin/sh', '-c', EGRESS_LOCK_SCRIPT],
    // Root with NET_ADMIN (and NET_RAW for iptables' sockets) for the seconds it takes; nothing else.
    securityContext: {
      ...CONTAINER_SECURITY,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] },
      readOnlyRootFilesystem: true,
      runAsNonRoot: false,
      runAsUser: 0,
      runAsGroup: 0,
    },
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
  };
}

function sandboxEnv(spec: InstanceSpec): V1EnvVar[] {
  // The platform's variables win: the spec cannot route around the proxy.
  const env = { ...spec.env, ...proxyEnvironment({ port: PROXY_PORT, caPath: CA_CERT_PATH }) };
  return Object.keys(env)
    .sort()
    .map((name) => ({ name, value: env[name]! }));
}

export function buildPod(spec: InstanceSpec, options: ManifestOptions, image: ImageInfo | undefined): V1Pod {
  const uid = options.runAsUser ?? nonRootUid(image?.user);
  const egressLock = options.egressLock ?? true;
  if (egressLock && uid === PROXY_UID) {
    throw new InstanceError(`sandbox ${spec.instance} would run as uid ${PROXY_UID}, the auth proxy's, which may reach the network: run it as another user`);
  }
  const podSecurity: V1PodSecurityContext = {
    seccompProfile: { type: 'RuntimeDefault' },
    ...(uid !== undefined ? { runAsNonRoot: true, runAsUser: uid } : {}),
    ...(options.runAsUser !== undefined ? { runAsGroup: options.runAsUser, fsGroup: options.runAsUser } : {}),
  };
  const limits = resourceList(spec.resources);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: meta(spec, options, spec.instance),
    spec: {
      ...(egressLock ? { initContainers: [egressLockContainer(options)] } : {}),
      containers: [
        {
          name: SANDBOX_CONTAINER,
          image: spec.image.reference,
          // The registry decides at every start, not the node's cache: an image a node pulled with
          // one tenant's credentials is not run for another tenant's pod without them.
          imagePullPolicy: 'Always',
          command: IDLE_COMMAND,
          env: sandboxEnv(spec),
          securityContext: CONTAINER_SECURITY,
          // Requests equal to limits: what a sandbox was promised is reserved for it.
          ...(Object.keys(limits).length > 0 ? { resources: { requests: limits, limits } } : {}),
          volumeMounts: [
            { name: 'berth-ca', mountPath: CA_CERT_DIR, readOnly: true },
            ...spec.volumes.map((v, i) => ({ name: `vol-${i}`, mountPath: v.mountPath })),
          ],
        },
        {
          name: PROXY_CONTAINER,
          image: options.platformImage,
          imagePullPolicy: 'IfNotPresent',
          command: ['node', '/app/services/sandbox-manager/dist/proxy/sidecar.js', '--config', `${PROXY_CONFIG_DIR}/config.json`],
          securityContext: { ...CONTAINER_SECURITY, readOnlyRootFilesystem: true, runAsNonRoot: true, runAsUser: PROXY_UID, runAsGroup: PROXY_UID },
          resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
          volumeMounts: [{ name: 'proxy-config', mountPath: PROXY_CONFIG_DIR, readOnly: true }],
        },
      ],
      volumes: [
        { name: 'berth-ca', configMap: { name: spec.instance, items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        // Readable by the sidecar's uid; only the sidecar mounts it (no shared process namespace either).
        { name: 'proxy-config', secret: { secretName: proxySecretName(spec.instance), defaultMode: 0o444 } },
        ...spec.volumes.map((v, i) => ({ name: `vol-${i}`, persistentVolumeClaim: { claimName: v.volume } })),
      ],
      // A sandbox whose PID 1 died is failed, not restarted with its files gone.
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      shareProcessNamespace: false,
      // PID 1 ends on SIGTERM at once; stop is quick.
      terminationGracePeriodSeconds: 5,
      securityContext: podSecurity,
      ...(options.runtimeClassName ? { runtimeClassName: options.runtimeClassName } : {}),
      ...(spec.image.credentials ? { imagePullSecrets: [{ name: pullSecretName(spec.instance) }] } : {}),
    },
  };
}

/** The sidecar's config file (see `src/proxy/sidecar.ts`). */
export function proxyConfig(policy: EgressPolicy): SidecarConfigFile {
  return { listen: PROXY_LISTEN, policy, caCertPath: `${PROXY_CONFIG_DIR}/ca.crt`, caKeyPath: `${PROXY_CONFIG_DIR}/ca.key` };
}

export function buildProxySecret(spec: InstanceSpec, options: ManifestOptions): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(spec, options, proxySecretName(spec.instance)),
    type: 'Opaque',
    // stringData: the API server stores it base64 in `data`; here it stays readable.
    stringData: {
      'ca.crt': options.proxyCa.certPem,
      'ca.key': options.proxyCa.keyPem,
      'config.json': JSON.stringify(proxyConfig(spec.egress), null, 2),
    },
  };
}

export function buildPullSecret(spec: InstanceSpec, options: ManifestOptions): V1Secret | undefined {
  const credentials = spec.image.credentials;
  if (!credentials) return undefined;
  const { server, username, password } = credentials;
  const auth = Buffer.from(`${username}:${password}`, 'utf8').toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: meta(spec, options, pullSecretName(spec.instance)),
    type: 'kubernetes.io/dockerconfigjson',
    stringData: { '.dockerconfigjson': JSON.stringify({ auths: { [server]: { username, password, auth } } }) },
  };
}

export function buildNetworkPolicy(spec: InstanceSpec, options: ManifestOptions): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(spec, options, spec.instance),
    spec: {
      podSelector: { matchLabels: { [LABELS.instance]: spec.instance } },
      policyTypes: ['Ingress', 'Egress'],
      // Nothing may connect to a sandbox.
      ingress: [],
      egress: [
        {
          to: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } }, podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
          ],
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        // The public internet: every range the proxy refuses is excepted (one list, in @berth/egress).
        { to: publicAddressBlocks().map((ipBlock) => ({ ipBlock })) },
        // The operator's ranges, a metadata address inside a wider one excepted (as the proxy does).
        ...(spec.egress.privateAllow.length > 0 ? [{ to: spec.egress.privateAllow.map((cidr) => ({ ipBlock: allowedBlock(cidr) })) }] : []),
      ],
    },
  };
}

/** The one NetworkPolicy of the image-pull pods: nothing in, nothing out (they only run `id` and `pwd` of the image). */
export function buildPullNetworkPolicy(namespace: string): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: COMPONENT_IMAGE_PULL, namespace, labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.component]: COMPONENT_IMAGE_PULL } },
    spec: { podSelector: { matchLabels: { [LABELS.component]: COMPONENT_IMAGE_PULL } }, policyTypes: ['Ingress', 'Egress'], ingress: [], egress: [] },
  };
}

/** The record of the instance: it exists from create to remove, pod or not (stopped). */
export function buildRecord(spec: InstanceSpec, options: ManifestOptions): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(spec, options, spec.instance),
    data: { 'ca.crt': options.proxyCa.certPem, image: spec.image.reference },
  };
}

export function buildVolumeClaims(spec: InstanceSpec, options: ManifestOptions): V1PersistentVolumeClaim[] {
  return spec.volumes.map((v) => ({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    // Not the instance's labels: a volume outlives instances and is shared by the tenant's next ones.
    metadata: {
      name: v.volume,
      namespace: options.namespace,
      labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.component]: 'sandbox-volume', [LABELS.tenantId]: labelValue(spec.tenantId) },
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: bytesQuantity(v.sizeBytes ?? DEFAULT_VOLUME_BYTES) } },
      ...(options.storageClassName ? { storageClassName: options.storageClassName } : {}),
    },
  }));
}

export function buildManifests(spec: InstanceSpec, options: ManifestOptions, image?: ImageInfo): InstanceManifests {
  return {
    pod: buildPod(spec, options, image),
    proxySecret: buildProxySecret(spec, options),
    pullSecret: buildPullSecret(spec, options),
    networkPolicy: buildNetworkPolicy(spec, options),
    record: buildRecord(spec, options),
    volumeClaims: buildVolumeClaims(spec, options),
  };
}
