/**
 * The deployer port: runs the agent server of one revision of a deployment somewhere and tells the
 * gateway where it answers. Two adapters: `local` (child processes on this machine) and
 * `kubernetes` (a Deployment, Service and Secret per deployment). Both pass one contract suite.
 */

/** What a revision runs: a built project folder on this machine, or a container image. */
export type RevisionArtifact =
  | {
      kind: 'directory';
      /** The built project (dependencies installed). */
      path: string;
      /** `langgraph.json`, relative to `path`. */
      configPath: string;
      /**
       * The same build kept in object storage, for deployers whose agent servers run elsewhere
       * (`kubernetes`: an init container fetches it). Set only when the control plane keeps archives.
       */
      archive?: RevisionArchive;
    }
  | { kind: 'image'; imageUri: string };

/** Where a revision's built project can be fetched from, and how it is checked. */
export interface RevisionArchive {
  /** The control plane's artifact endpoint for this revision, as agent servers reach it. */
  url: string;
  /** Hex SHA-256 of the archive (a gzipped tarball), recorded when it was stored. */
  sha256: string;
  /** This revision's artifact credential: fetches its archive, nothing else. */
  credential: string;
}

/** Resource settings of a deployment (from `source_config.resource_spec`). */
export interface RevisionResources {
  /**
   * Agent server replicas (API + queue workers each).
   * @default 1 for `dev`, 2 for `prod`
   */
  replicas: number;
  /** CPU request in cores, e.g. 0.5. */
  cpu?: number;
  /** Memory request in MiB. */
  memoryMb?: number;
  /**
   * Runs each replica executes at the same time.
   * @default 10
   */
  workers?: number;
}

/** Everything a deployer needs to run one revision. */
export interface RevisionSpec {
  deploymentId: string;
  revisionId: string;
  tenantId: string;
  /** The deployment's name: `[a-z0-9-]`, at most 63 characters, unique per tenant. */
  name: string;
  deploymentType: 'dev' | 'prod';
  artifact: RevisionArtifact;
  /** The deployment's secrets (`secrets: [{name, value}]`), given to the agent server as env. */
  secrets: Record<string, string>;
  /**
   * Platform settings for the agent server, also env: where its Postgres is
   * (`DATABASE_URL`, schema `BERTH_AGENT_SCHEMA`), `REDIS_URL` when present, `LOG_LEVEL`.
   */
  env: Record<string, string>;
  resources: RevisionResources;
}

/** A revision that answers. */
export interface DeployedRevision {
  revisionId: string;
  /** Base URL (no trailing slash) the gateway proxies the deployment's traffic to. */
  url: string;
}

/** Where deploy progress goes: one line per call, shown as the revision's deploy log. */
export type DeployLog = (line: string, level?: 'info' | 'warn' | 'error') => void;

/**
 * A change in the health of a revision after `deploy` resolved: its agent server went down (why,
 * and when it is tried again) or answers again (at `url`, which may differ from the one `deploy`
 * returned when its port had to change).
 */
export type RevisionHealthEvent = { deploymentId: string; revisionId: string } & ({ healthy: false; reason: string } | { healthy: true; url: string });

export type RevisionHealthListener = (event: RevisionHealthEvent) => void;

/** A revision that could not be brought up; the reason is also in its deploy log. */
export class DeployFailedError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DeployFailedError';
  }
}

/**
 * The port. What differs between adapters is told by their capabilities below, never by which
 * adapter it is: callers do not branch on the adapter.
 */
export interface Deployer {
  /** Where revisions run, for logs and messages only (`local`, `kubernetes`). */
  readonly name: string;
  /**
   * Whether deployed revisions keep serving after `close()` — across a restart of the control
   * plane. `false` (`local`: agent servers are its child processes): they stop, so the control
   * plane counts every serving revision down when it starts, until `deploy` brought it back, and
   * keeps trying one that does not come back. `true` (`kubernetes`): they serve on, so a revision
   * that cannot be deployed again at start is left serving as it was.
   */
  readonly revisionsSurviveClose: boolean;
  /**
   * Brings the revision up beside whatever serves the deployment now and resolves once it is
   * healthy (for kubernetes: once the rollout has finished). Rejects with `DeployFailedError`;
   * the previous revision is then untouched and keeps serving. Aborting `signal` (a newer
   * revision replaced this one) stops it and rejects.
   */
  deploy(spec: RevisionSpec, log: DeployLog, signal?: AbortSignal): Promise<DeployedRevision>;
  /**
   * Stops a revision that no longer serves, after letting its in-flight requests finish. Unknown
   * revisions are a no-op. (On kubernetes the rolling update already replaced its pods.)
   */
  retire(deploymentId: string, revisionId: string, log: DeployLog): Promise<void>;
  /** Removes everything the deployment has on this target. Unknown deployments are a no-op. */
  remove(deploymentId: string, log: DeployLog): Promise<void>;
  /**
   * Registers a listener for health changes of deployed revisions (until they are retired or
   * removed); returns a function that unregisters it. The `local` adapter reports its agent
   * servers' crashes and their restarts. Adapters whose platform keeps workloads up by itself do
   * not implement it and never report: `kubernetes` (the kubelet restarts a crashed container and
   * the Service routes only to ready pods).
   */
  onHealth?(listener: RevisionHealthListener): () => void;
  /**
   * Releases clients and watches. Kubernetes workloads keep running; local processes stop (the
   * control plane brings deployed revisions back with `deploy` when it starts again).
   */
  close(): Promise<void>;
}
