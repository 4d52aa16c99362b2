/**
 * The Kubernetes objects of one deployment, as pure functions of its revision spec: a Secret (the
 * deployment's secrets and every platform setting of its agent server), a Deployment (agent server
 * replicas: API + queue workers in one container) and a ClusterIP Service. Golden tests pin their
 * exact shape (`__golden__/`).
 *
 * The pods run other people's code, so they get nothing beyond their own deployment: no
 * service-account token, no other Services' addresses, no value of their Secret in the Deployment
 * (which more roles may read than Secrets), and a non-root, capability-less, read-only container.
 */
import { posix } from 'node:path';
import type { V1Container, V1Deployment, V1EnvVar, V1PodSecurityContext, V1SecurityContext, V1Secret, V1Service } from '@kubernetes/client-node';
import type { RevisionArchive, RevisionSpec } from '../deployer.js';
import { labelValue, shortHash } from '@berth/kube';
import { cpuQuantity, memoryQuantity } from '@berth/quantity';

/** Where the agent server listens in its container, and on its Service. */
export const AGENT_PORT = 8000;
/**
 * Where the agent server serves `/metrics` in its container (`BERTH_METRICS_PORT`), the pod's port
 * named `metrics`: on no Service, so the gateway's proxy (which goes to the Service's port) never
 * reaches it; the NetworkPolicy admits only the operator's scraper to it.
 */
export const AGENT_METRICS_PORT = 9464;
export const CONTAINER_NAME = 'agent-server';
/** The agent server's readiness endpoint. */
export const READINESS_PATH = '/ok';

export const LABELS = {
  name: 'app.kubernetes.io/name',
  instance: 'app.kubernetes.io/instance',
  managedBy: 'app.kubernetes.io/managed-by',
  deploymentId: 'berth.dev/deployment-id',
  tenantId: 'berth.dev/tenant-id',
  revisionId: 'berth.dev/revision-id',
} as const;

export const ANNOTATIONS = {
  revisionId: 'berth.dev/revision-id',
  deploymentName: 'berth.dev/deployment-name',
} as const;

/**
 * The user and group agent servers run as, whatever the image declares: a fixed non-root id keeps
 * `runAsNonRoot` satisfiable for images whose USER is a name or root (as LangGraph images' is).
 */
export const AGENT_UID = 10001;
/** HOME of the agent server: a writable emptyDir, since the root filesystem is read-only. */
export const AGENT_HOME = '/home/berth';
/** Size limit of each writable emptyDir (/tmp and HOME), so one pod cannot fill the node's disk. */
export const SCRATCH_SIZE_LIMIT = '1Gi';

export const APP_NAME = 'berth-agent-server';
/** How long a pod being replaced or removed may take to end (then the kubelet kills it). */
export const TERMINATION_GRACE_SECONDS = 60;
export const MANAGED_BY = 'berth';

/**
 * Requests when the spec sets none (from the hosted product's tiers: development 1 CPU / 1 GiB,
 * production 2 CPU / 2 GiB per replica). Limits are twice the requests.
 */
export const DEFAULT_REQUESTS = {
  dev: { cpu: 1, memoryMb: 1024 },
  prod: { cpu: 2, memoryMb: 2048 },
} as const;

/**
 * Runs per replica when the spec sets none.
 * @default 10
 */
export const DEFAULT_WORKERS = 10;

/** A revision whose artifact is a container image. */
export type ImageRevisionSpec = RevisionSpec & { artifact: { kind: 'image'; imageUri: string } };
/** A revision built from source whose archive the control plane keeps: the agent-server image runs it. */
export type SourceRevisionSpec = RevisionSpec & { artifact: { kind: 'directory'; configPath: string; archive: RevisionArchive } };
/** What this deployer can run. */
export type KubeRevisionSpec = ImageRevisionSpec | SourceRevisionSpec;

/** Where a source revision's project is unpacked and served (the agent-server image's working folder). */
export const PROJECT_DIR = '/srv/project';
/** Size limit of the project's emptyDir: the project with its installed dependencies (and the archive while it unpacks). */
export const PROJECT_SIZE_LIMIT = '4Gi';
/** The init container that fetches a source revision's archive. */
export const FETCH_CONTAINER_NAME = 'fetch-artifact';
/** The fetcher in the agent-server image (`images/Containerfile`: the workspace is at /app). */
export const FETCH_SCRIPT_IN_IMAGE = '/app/services/agent-runtime/dist/fetch-artifact.js';
/** The Secret's key holding a source revision's artifact credential (the init container's only secret). */
export const ARTIFACT_CREDENTIAL_KEY = 'BERTH_ARTIFACT_CREDENTIAL';

export interface ManifestOptions {
  namespace: string;
  /** Secrets (of type `kubernetes.io/dockerconfigjson`) for pulling private images. */
  imagePullSecrets?: string[];
  /**
   * The pods' service account; unset, the namespace default. Either way no token is mounted
   * (`automountServiceAccountToken: false` on the pod wins over the account's setting).
   */
  serviceAccountName?: string;
  /** The agent-server image (`BERTH_AGENT_SERVER_IMAGE`) that runs source revisions; required for them. */
  agentServerImage?: string;
}

export interface DeploymentManifests {
  secret: V1Secret;
  deployment: V1Deployment;
  service: V1Service;
}

/**
 * The name of a deployment's three objects: its name made DNS-safe (a DNS-1035 label, so also a
 * valid Service name: lower case, starts with a letter, at most 63 characters) plus a short hash
 * of its id, since names are unique per tenant only and tenants share the namespace.
 */
export function objectName(name: string, deploymentId: string): string {
  const suffix = shortHash(deploymentId, 6);
  let base = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (!/^[a-z]/.test(base)) base = base ? `d-${base}` : 'd';
  base = base.slice(0, 63 - suffix.length - 1).replace(/-+$/, '');
  return `${base}-${suffix}`;
}

/** The labels selecting a deployment's pods (stable across revisions: a selector is immutable). */
export function podSelector(deploymentId: string): Record<string, string> {
  return { [LABELS.name]: APP_NAME, [LABELS.deploymentId]: labelValue(deploymentId) };
}

/** A label selector string matching every object Berth made for a deployment. */
export function deploymentLabelSelector(deploymentId: string): string {
  return `${LABELS.managedBy}=${MANAGED_BY},${LABELS.deploymentId}=${labelValue(deploymentId)}`;
}

/** A label selector string matching the pods of one revision. */
export function revisionPodSelector(deploymentId: string, revisionId: string): string {
  return `${LABELS.name}=${APP_NAME},${LABELS.deploymentId}=${labelValue(deploymentId)},${LABELS.revisionId}=${labelValue(revisionId)}`;
}

/** The in-cluster base URL the gateway proxies to. */
export function serviceUrl(serviceName: string, namespace: string): string {
  return `http://${serviceName}.${namespace}.svc.cluster.local:${AGENT_PORT}`;
}

function commonLabels(spec: RevisionSpec): Record<string, string> {
  return {
    [LABELS.name]: APP_NAME,
    [LABELS.instance]: objectName(spec.name, spec.deploymentId),
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.deploymentId]: labelValue(spec.deploymentId),
    [LABELS.tenantId]: labelValue(spec.tenantId),
  };
}

/** Name, namespace, labels and annotations of each of a deployment's objects. */
export function objectMeta(spec: RevisionSpec, options: Pick<ManifestOptions, 'namespace'>) {
  return {
    name: objectName(spec.name, spec.deploymentId),
    namespace: options.namespace,
    labels: commonLabels(spec),
    annotations: { [ANNOTATIONS.deploymentName]: spec.name },
  };
}

/**
 * The env the manifest itself sets, as literals in the Deployment: values that are not secret and
 * that the pod's layout depends on. They win over the spec's env and the deployment's secrets.
 */
function literalEnv(spec: RevisionSpec): Record<string, string> {
  return {
    ...(spec.artifact.kind === 'directory' ? { BERTH_AGENT_CONFIG: posix.join(PROJECT_DIR, spec.artifact.configPath) } : {}),
    // Every interface of the pod: the scraper reaches it by the pod's IP.
    BERTH_METRICS_HOST: '0.0.0.0',
    BERTH_METRICS_PORT: String(AGENT_METRICS_PORT),
    HOME: AGENT_HOME,
    // Every interface of the pod: the Service and the kubelet's probes reach it by the pod's IP.
    HOST: '0.0.0.0',
    // LangGraph's name for runs per replica, which the agent server reads.
    N_JOBS_PER_WORKER: String(spec.resources.workers ?? DEFAULT_WORKERS),
    PORT: String(AGENT_PORT),
  };
}

/**
 * The Secret holds the deployment's secrets and the platform's env for its agent server
 * (`DATABASE_URL` with its role's password, the deployment credential, …): everything of the
 * spec, since which platform value is sensitive is not the manifest's to guess. The platform's
 * values win over a secret of the same name, as they did when they were container env.
 */
export function buildSecret(spec: RevisionSpec, options: ManifestOptions): V1Secret {
  const values: Record<string, string> = { ...spec.secrets, ...spec.env };
  for (const name of Object.keys(literalEnv(spec))) delete values[name];
  if (spec.artifact.kind === 'directory' && spec.artifact.archive) values[ARTIFACT_CREDENTIAL_KEY] = spec.artifact.archive.credential;
  const data = Object.fromEntries(
    Object.keys(values)
      .sort()
      .map((key) => [key, Buffer.from(values[key]!, 'utf8').toString('base64')]),
  );
  return { apiVersion: 'v1', kind: 'Secret', metadata: objectMeta(spec, options), type: 'Opaque', data };
}

function containerEnv(spec: RevisionSpec): V1EnvVar[] {
  const literals = literalEnv(spec);
  return Object.keys(literals)
    .sort()
    .map((name) => ({ name, value: literals[name]! }));
}

const POD_SECURITY_CONTEXT: V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: AGENT_UID,
  runAsGroup: AGENT_UID,
  // The emptyDirs belong to the agent's group, so it can write them.
  fsGroup: AGENT_UID,
  seccompProfile: { type: 'RuntimeDefault' },
};

/** What only a container can say; user, group and seccomp profile come from the pod's. */
const CONTAINER_SECURITY_CONTEXT: V1SecurityContext = {
  allowPrivilegeEscalation: false,
  privileged: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

/** Writable scratch space on a read-only root filesystem: LangGraph projects write to /tmp and HOME. */
const SCRATCH_VOLUMES = [
  { name: 'tmp', mountPath: '/tmp' },
  { name: 'home', mountPath: AGENT_HOME },
] as const;

/** Thrown for a revision these manifests cannot run (a source revision without an archive or an agent-server image). */
export class UnrunnableRevisionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnrunnableRevisionError';
  }
}

/** The image of the agent server's container, and for a source revision the init container fetching its project. */
function runnable(spec: KubeRevisionSpec, options: ManifestOptions, meta: { name: string }, resources: V1Container['resources']) {
  if (spec.artifact.kind === 'image') return { image: spec.artifact.imageUri, volumes: [], mounts: [], initContainers: [] };
  if (!options.agentServerImage)
    throw new UnrunnableRevisionError('source revisions need the agent-server image: set BERTH_AGENT_SERVER_IMAGE on the control plane');
  const { archive } = spec.artifact;
  const env: Record<string, string> = { BERTH_ARTIFACT_DIR: PROJECT_DIR, BERTH_ARTIFACT_SHA256: archive.sha256, BERTH_ARTIFACT_URL: archive.url };
  const fetcher: V1Container = {
    name: FETCH_CONTAINER_NAME,
    image: options.agentServerImage,
    imagePullPolicy: 'IfNotPresent',
    command: ['node', FETCH_SCRIPT_IN_IMAGE],
    // Only its own credential from the Secret: not the database login or the deployment's secrets.
    env: [
      ...Object.keys(env).map((name) => ({ name, value: env[name]! })),
      { name: ARTIFACT_CREDENTIAL_KEY, valueFrom: { secretKeyRef: { name: meta.name, key: ARTIFACT_CREDENTIAL_KEY } } },
    ],
    securityContext: CONTAINER_SECURITY_CONTEXT,
    volumeMounts: [
      { name: 'project', mountPath: PROJECT_DIR },
      { name: 'tmp', mountPath: '/tmp' },
    ],
    // An init container's requests count apart from the app's (the larger wins), so the same ones cost nothing.
    resources,
  };
  return {
    image: options.agentServerImage,
    volumes: [{ name: 'project', emptyDir: { sizeLimit: PROJECT_SIZE_LIMIT } }],
    // The agent server reads its project, it does not change it (as the local deployer's root-owned build).
    mounts: [{ name: 'project', mountPath: PROJECT_DIR, readOnly: true }],
    initContainers: [fetcher],
  };
}

export function buildDeployment(spec: KubeRevisionSpec, options: ManifestOptions): V1Deployment {
  const meta = objectMeta(spec, options);
  const defaults = DEFAULT_REQUESTS[spec.deploymentType];
  // Rounded before doubling, so that limits are exactly twice the requests.
  const cpu = Math.max(1, Math.round((spec.resources.cpu ?? defaults.cpu) * 1000)) / 1000;
  const memoryMb = Math.max(1, Math.round(spec.resources.memoryMb ?? defaults.memoryMb));
  const resources = {
    requests: { cpu: cpuQuantity(cpu), memory: memoryQuantity(memoryMb) },
    limits: { cpu: cpuQuantity(cpu * 2), memory: memoryQuantity(memoryMb * 2) },
  };
  const run = runnable(spec, options, meta, resources);
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { ...meta, annotations: { ...meta.annotations, [ANNOTATIONS.revisionId]: spec.revisionId } },
    spec: {
      replicas: Math.max(0, Math.floor(spec.resources.replicas)),
      revisionHistoryLimit: 3,
      progressDeadlineSeconds: 600,
      selector: { matchLabels: podSelector(spec.deploymentId) },
      // Old pods keep serving until new ones are ready: a bad revision never takes the deployment down.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: { ...commonLabels(spec), [LABELS.revisionId]: labelValue(spec.revisionId) },
          // A new revision always changes the template, so it always rolls out (same image or not).
          annotations: { [ANNOTATIONS.revisionId]: spec.revisionId },
        },
        spec: {
          ...(run.initContainers.length ? { initContainers: run.initContainers } : {}),
          containers: [
            {
              name: CONTAINER_NAME,
              image: run.image,
              imagePullPolicy: 'IfNotPresent',
              ports: [
                { name: 'http', containerPort: AGENT_PORT, protocol: 'TCP' },
                { name: 'metrics', containerPort: AGENT_METRICS_PORT, protocol: 'TCP' },
              ],
              // Literal env wins over envFrom, so the Secret cannot move the ports or HOME.
              env: containerEnv(spec),
              envFrom: [{ secretRef: { name: meta.name } }],
              securityContext: CONTAINER_SECURITY_CONTEXT,
              volumeMounts: [...SCRATCH_VOLUMES.map(({ name, mountPath }) => ({ name, mountPath })), ...run.mounts],
              resources,
              readinessProbe: {
                httpGet: { path: READINESS_PATH, port: AGENT_PORT },
                periodSeconds: 5,
                timeoutSeconds: 2,
                failureThreshold: 3,
              },
            },
          ],
          // Agent code gets no cluster credentials. The pod-level switch wins over any service account's
          // own setting, so the namespace default (or the operator's `serviceAccountName`, e.g. for
          // cloud workload identity) is enough: a ServiceAccount per deployment would add nothing while
          // no token is mounted, and would need the control plane to be allowed to create accounts.
          automountServiceAccountToken: false,
          // No env vars with the address of every Service in the namespace (the platform's included).
          enableServiceLinks: false,
          securityContext: POD_SECURITY_CONTEXT,
          volumes: [...SCRATCH_VOLUMES.map(({ name }) => ({ name, emptyDir: { sizeLimit: SCRATCH_SIZE_LIMIT } })), ...run.volumes],
          // Room for in-flight requests and runs to finish when a rollout replaces a pod.
          terminationGracePeriodSeconds: TERMINATION_GRACE_SECONDS,
          ...(options.serviceAccountName ? { serviceAccountName: options.serviceAccountName } : {}),
          ...(options.imagePullSecrets?.length ? { imagePullSecrets: options.imagePullSecrets.map((name) => ({ name })) } : {}),
        },
      },
    },
  };
}

export function buildService(spec: RevisionSpec, options: ManifestOptions): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: objectMeta(spec, options),
    spec: {
      type: 'ClusterIP',
      selector: podSelector(spec.deploymentId),
      // The API port only: the metrics port is the scraper's, which reaches pods by their IP.
      ports: [{ name: 'http', port: AGENT_PORT, targetPort: AGENT_PORT, protocol: 'TCP' }],
    },
  };
}

export function buildManifests(spec: KubeRevisionSpec, options: ManifestOptions): DeploymentManifests {
  return { secret: buildSecret(spec, options), deployment: buildDeployment(spec, options), service: buildService(spec, options) };
}
