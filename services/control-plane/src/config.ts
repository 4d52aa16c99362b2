import type { RevisionPipelineOptions } from './deployments/pipeline.js';
import type { GrpcServerConfig } from '@berth/config';
import type { Clock } from '@berth/clock';
import type { ArtifactStorageConfig } from './artifacts/artifact-store.js';
import type { AgentNetworkPolicy } from './deployers/kubernetes/network-policy.js';
import type { ContainerLimits } from './deployers/local/agent-containers.js';
import type { PodmanCommand } from './deployers/local/podman.js';

export type { ContainerLimits } from './deployers/local/agent-containers.js';
export type { PodmanCommand } from './deployers/local/podman.js';

export interface ControlPlaneConfig extends GrpcServerConfig {
  /** Postgres holding the control plane's schema (`control_plane`). */
  databaseUrl: string;
  /**
   * Apply the control plane's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
  /**
   * Lifetime of a login flow, in seconds.
   * @default 600
   */
  authFlowTtlSeconds?: number;
  /**
   * How often expired login flows are marked and old ones deleted, in milliseconds.
   * @default 60000
   */
  sweepIntervalMs?: number;
  /**
   * The time of login flows (their expiry, waits and sweeps) and of the revision pipeline (unless
   * `deployments.pipeline.clock` says otherwise); tests move it by hand.
   * @default systemClock
   */
  clock?: Clock;
  /** Deployments and revisions; without it the control plane serves login flows only. */
  deployments?: DeploymentsConfig;
}

export interface DeploymentsConfig {
  /** 32 bytes, base64: the key deployment secrets are encrypted with at rest. */
  secretKey: string;
  /** Where revisions are built (`<dir>/<deployment>/<revision>/`). */
  artifactsDir: string;
  /**
   * Where revisions run.
   * @default { kind: 'local' }
   */
  deployer?: { kind: 'local' } | KubernetesDeployerSettings;
  /**
   * Keep each built revision as an archive in object storage and serve it to the revision's pods
   * (the kubernetes deployer's source revisions). Unset: build folders stay on this machine only.
   */
  archives?: {
    storage: ArtifactStorageConfig;
    /** Where the artifact endpoint listens. */
    host: string;
    port: number;
    /** The endpoint as agent pods reach it (its Service); default: the address it listens on. */
    url?: string;
  };
  /** Revision jobs (and the agent servers' queues, see `agentRedis`) on Redis instead of Postgres. */
  redisUrl?: string;
  /**
   * How agent servers use `redisUrl` (`BERTH_AGENT_REDIS`). `acl`: for their queues and run events,
   * each deployment's as a Redis user of its own limited to its keys (the user of `redisUrl` must be
   * allowed the `acl` command). `off`: not at all; they keep queues and run events in Postgres.
   * @default 'acl'
   */
  agentRedis?: 'acl' | 'off';
  /**
   * How often the deployments' Redis users that Redis lost (a restart without an ACL file) are
   * created again, in milliseconds.
   * @default 60000
   */
  agentRedisResyncMs?: number;
  /**
   * Where agent servers reach Postgres: only its host and port are used (each deployment gets a
   * database and login roles of its own there, created by the control plane with `databaseUrl`).
   * @default the control plane's databaseUrl
   */
  agentDatabaseUrl?: string;
  /**
   * Connections each of a deployment's two login roles may hold.
   * @default 60
   */
  agentConnectionLimit?: number;
  /** Environment of builds and local agent servers (PATH, HOME, npm settings); nothing else is inherited. */
  processEnv?: Record<string, string>;
  /**
   * The agent server program the local deployer runs (`node <it>`): `AGENT_SERVE_SCRIPT` of
   * `@berth/agent-runtime`, which the CLI starting the control plane passes. Required with the local
   * deployer; the kubernetes deployer runs the agent-server image instead.
   */
  agentServeScript?: string;
  /**
   * Log level of the agent servers.
   * @default 'info'
   */
  agentLogLevel?: string;
  /**
   * Where agent servers send the traces of their runs: the gateway's URL as they reach it (berth up:
   * its loopback address; Kubernetes: its Service, `BERTH_TRACING_ENDPOINT`). A function when it is
   * known only once the control plane runs (berth up starts the gateway after it): called whenever a
   * revision deploys. Unset: agent servers do not trace.
   */
  tracingEndpoint?: TracingEndpoint;
  /**
   * Private ranges (CIDRs) that run webhooks of deployed agent servers may reach
   * (`BERTH_WEBHOOK_PRIVATE_EGRESS`, passed on to them as it is).
   * @default none: only public addresses receive webhooks
   */
  webhookPrivateEgress?: string[];
  /**
   * The container engine local agent servers run in, each in a container of its own, when the
   * control plane is root (berth up: the platform's private Podman engine, the one sandboxes use).
   * Unset, or when containers cannot run here: child processes, as OS users of their own when root.
   */
  agentEngine?: PodmanCommand;
  /**
   * Limits of the agent servers' containers, with defaults for deployments whose `resource_spec`
   * sets none; `maxCpu`/`maxMemoryMb` also bound what any deployment may ask (422 above).
   */
  agentLimits?: ContainerLimits;
  /**
   * Private ranges (CIDRs) that agent servers may reach (`BERTH_DEPLOYMENT_PRIVATE_EGRESS`;
   * `webhookPrivateEgress` too): through their egress proxy in containers, by their NetworkPolicy on
   * Kubernetes. Loopback, private, link-local and metadata addresses are refused otherwise.
   * @default none
   */
  deploymentPrivateEgress?: string[];
  /**
   * The registry of OS user ids that every Berth installation on this machine shares.
   * @default /var/lib/berth/uids
   */
  uidRegistryDir?: string;
  /**
   * How often containers that no running revision owns are removed, in milliseconds.
   * @default 60000
   */
  agentReconcileIntervalMs?: number;
  /** Tuning of the revision jobs (concurrency, lock and stall intervals, retire delay). */
  pipeline?: RevisionPipelineOptions;
  /**
   * How long a finished upload that no revision uses is kept, in seconds from its start; then it
   * and its chunks are deleted (`UNUSED_UPLOAD_TTL_SECONDS`). Unfinished uploads go after an hour.
   * @default 3600
   */
  unusedUploadTtlSeconds?: number;
  /** Most deployments one tenant may have (`BERTH_MAX_DEPLOYMENTS_PER_TENANT`). @default 50 */
  maxDeploymentsPerTenant?: number;
  /** Most secrets one deployment may have (`BERTH_MAX_SECRETS_PER_DEPLOYMENT`). @default 200 */
  maxSecretsPerDeployment?: number;
  /**
   * Streams one tenant may hold open at once through one control plane: logs it follows and
   * deployments it watches (`BERTH_MAX_STREAMS_PER_TENANT`).
   * @default 20
   */
  maxStreamsPerTenant?: number;
}

/** A URL, or a function that resolves it when it is needed. */
export type TracingEndpoint = string | (() => Promise<string>);

/** The kubernetes deployer's settings (env.ts: KUBERNETES_NAMESPACE, KUBECONFIG, BERTH_AGENT_*). */
export interface KubernetesDeployerSettings {
  kind: 'kubernetes';
  /** @default 'berth' */
  namespace?: string;
  /** The API server by address (tests); else `kubeconfig`, else the pod's service account. */
  server?: string;
  token?: string;
  /** A kubeconfig file, for a control plane run outside the cluster. */
  kubeconfig?: string;
  agentServerImage?: string;
  /** The agent pods' service account; unset: the namespace's default (no token is mounted either way). */
  serviceAccountName?: string;
  /** Secrets for pulling the agent-server image and image revisions. */
  imagePullSecrets?: string[];
  /**
   * A NetworkPolicy per deployment, naming the platform's pods that agent pods may talk to (its
   * private ranges are `deploymentPrivateEgress` and `webhookPrivateEgress`). env.ts sets it unless
   * `BERTH_DEPLOYMENT_NETWORK_POLICY=off`. Unset: none is made (and one made earlier is removed at
   * the deployment's next deploy).
   */
  networkPolicy?: Omit<AgentNetworkPolicy, 'privateEgress'>;
}
