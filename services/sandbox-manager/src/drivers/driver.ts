/**
 * The sandbox driver port: where sandboxes actually run. Two adapters implement it — `container`
 * (the Docker Engine API: Docker, or Podman's Docker-compatible service) and `kubernetes` (a Pod
 * per sandbox) — and both pass the one contract suite in `contract.ts`. The driver knows nothing
 * of tenants' API objects (templates, snapshots, boxes, TTLs, command ids): the sandbox service
 * above it keeps those in Postgres and calls the driver with plain instance specs.
 *
 * An *instance* is one running-or-stopped sandbox at the driver level (a container, a pod), named
 * by the service (`InstanceSpec.instance`, a DNS-1123 label). Warm-pool members are instances
 * created before any sandbox owns them.
 */

/** Credentials for a private registry, decrypted only for the call that pulls. */
export interface RegistryCredentials {
  /** The registry host they are for, e.g. `registry.example.com` or `127.0.0.1:5000`. */
  server: string;
  username: string;
  password: string;
}

/** An image and how to pull it. */
export interface ImageSource {
  /** Any registry reference: `127.0.0.1:5000/team/tool:1`, `registry.example.com/x@sha256:…`. */
  reference: string;
  credentials?: RegistryCredentials;
  /**
   * Registries reached over plain HTTP (a local test registry); a reference on any other host is
   * pulled over TLS.
   * @default []
   */
  insecureRegistries?: string[];
  /**
   * The image's USER as its pull reported it (ImageInfo.user), once pulled: for drivers that cannot
   * ask the engine when they create an instance (Kubernetes), also after a manager restart.
   */
  user?: string;
}

/** What the image declares, read once it is pulled. */
export interface ImageInfo {
  /** Content digest (`sha256:…`) when the engine reports one. */
  digest?: string;
  /** The image's USER ('' = root); commands run as this user. */
  user: string;
  /** The image's WORKDIR ('' = /). */
  workingDir: string;
  sizeBytes?: number;
}

/** Limits of one instance; an absent field is unlimited (or the engine's default). */
export interface Resources {
  /** CPU in millicores (`500m` = 500, `2` = 2000). */
  cpuMillis?: number;
  memoryBytes?: number;
  /** Writable storage of the instance (its root filesystem changes), when the engine can enforce it. */
  storageBytes?: number;
}

/** A named persistent volume mounted into the instance; it outlives the instance. */
export interface VolumeMount {
  /** Driver-level volume name (a DNS-1123 label, unique per tenant and volume). */
  volume: string;
  mountPath: string;
  /** Size of the volume when the driver creates it. */
  sizeBytes?: number;
}

/** A header the auth proxy adds to matching outbound requests; `value` is plaintext here. */
export interface InjectedHeader {
  name: string;
  value: string;
}

/** One auth proxy rule: requests to a host matching any of `matchHosts` get `headers`. */
export interface ProxyRule {
  name: string;
  /** Host globs: `api.example.com`, `*.example.com`. */
  matchHosts: string[];
  headers: InjectedHeader[];
}

/** Where an instance may connect, and what its auth proxy injects. */
export interface EgressPolicy {
  /** First matching rule wins. */
  rules: ProxyRule[];
  /** At most one of the lists is non-empty: exact domains, globs (`*.x.com`), IPs, CIDRs, `~regex`. */
  allowList: string[];
  denyList: string[];
  /** Private CIDRs the operator allows (`BERTH_SANDBOX_PRIVATE_EGRESS`); all else private is refused. */
  privateAllow: string[];
}

export interface InstanceSpec {
  /** Container or pod name (DNS-1123 label, ≤ 63 characters). */
  instance: string;
  tenantId: string;
  image: ImageSource;
  resources: Resources;
  volumes: VolumeMount[];
  egress: EgressPolicy;
  /** Extra environment of every command (after the image's own). */
  env: Record<string, string>;
  /** Labels the driver puts on the instance (pool membership, template version), for listing. */
  labels: Record<string, string>;
}

export type InstanceState =
  | { state: 'running' }
  | { state: 'stopped' }
  | { state: 'missing' }
  /** It died by itself: `reason` is for people ("out of memory (limit 32 MiB)", "exited with code 1"). */
  | { state: 'failed'; reason: string };

/** One command to run in an instance. */
export interface ExecSpec {
  /** Run as `[shell, '-c', command]`; when `shell` does not exist in the image, `/bin/sh` is used. */
  command: string;
  shell: string;
  /** Added to (and overriding) the instance's environment. */
  env: Record<string, string>;
  /** Working directory; the image's WORKDIR when absent. */
  cwd?: string;
}

export interface ExitInfo {
  /** The exit code, or 128 + signal number when a signal ended it (137 for SIGKILL). */
  exitCode: number;
  /** The signal that ended it (`SIGKILL`), if one did. */
  signal?: string;
  /** The memory limit's OOM killer ended it. */
  oomKilled: boolean;
}

/** A command running in an instance. Output is raw bytes (split anywhere, even inside a UTF-8 character). */
export interface SandboxProcess {
  readonly pid: number;
  /** Every chunk of output, in order per stream; none arrive after `exited` resolves. */
  onOutput(listener: (stream: 'stdout' | 'stderr', chunk: Buffer) => void): void;
  /** Writes to the command's stdin (ignored once it has exited or stdin is closed). */
  write(data: Buffer): void;
  closeStdin(): void;
  /** SIGKILL to the command's whole process group (its children too). Safe to call more than once. */
  kill(): void;
  readonly exited: Promise<ExitInfo>;
}

/** Pull failed (no such image, bad credentials, registry unreachable): `message` says which. */
export class ImagePullError extends Error {
  override readonly name = 'ImagePullError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** An instance could not be created or started (or stopped being reachable); `message` is for people. */
export class InstanceError extends Error {
  override readonly name = 'InstanceError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The instance does not exist (deleted, never created). */
export class InstanceNotFoundError extends Error {
  override readonly name = 'InstanceNotFoundError';
  constructor(
    readonly instance: string,
    options?: { cause?: unknown },
  ) {
    super(`sandbox instance ${instance} does not exist`, options);
  }
}

/** Largest file one write takes or one read returns (a read holds the whole file in memory). */
export const MAX_FILE_BYTES = 512 * 1024 * 1024;

/** A command could not be started (no such working directory, no such program): the caller's to fix. */
export class CommandStartError extends Error {
  override readonly name = 'CommandStartError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A file operation failed inside the instance (`too_large`: a read passed its `maxBytes`). */
export class SandboxFileError extends Error {
  override readonly name = 'SandboxFileError';
  constructor(
    readonly kind: 'not_found' | 'is_directory' | 'permission_denied' | 'no_space' | 'too_large' | 'other',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A read that passed its `maxBytes` (the caller holds what it reads, so it stops there). */
export function fileTooLarge(path: string, maxBytes: number): SandboxFileError {
  const limit = maxBytes % (1024 * 1024) === 0 ? `${maxBytes / 1024 / 1024} MiB` : `${maxBytes} bytes`;
  return new SandboxFileError('too_large', `${path}: larger than ${limit}, the most one read returns`);
}

export interface SandboxDriver {
  readonly kind: 'container' | 'kubernetes';
  /**
   * Why sandboxes cannot run here (no engine reachable, no cluster access), worded with how to
   * enable them; undefined when they can.
   */
  unavailableReason(): Promise<string | undefined>;
  /** Makes the image available (pulls it unless present) and reads its config. */
  pullImage(image: ImageSource): Promise<ImageInfo>;
  /** Creates and starts an instance; resolves once commands can run in it. InstanceError otherwise. */
  create(spec: InstanceSpec): Promise<void>;
  /** Stops it; its files (and volumes) are kept for `start`. */
  stop(instance: string): Promise<void>;
  /**
   * Starts a stopped instance again, with its files; resolves once commands can run. On a running
   * instance it only restores what the driver keeps outside it (a restarted manager's auth proxy).
   */
  start(instance: string, spec: InstanceSpec): Promise<void>;
  /** Removes it and its files (not its named volumes); removing a missing instance is not an error. */
  remove(instance: string): Promise<void>;
  /** Removes a named volume (no instance may use it). */
  removeVolume(volume: string): Promise<void>;
  inspect(instance: string): Promise<InstanceState>;
  /**
   * Names of the instances this driver made that carry all of `labels` (of InstanceSpec.labels), to
   * find orphans.
   */
  list(labels?: Record<string, string>): Promise<string[]>;
  /**
   * Takes a warm-pool member for a sandbox: true when this caller got it and it is running and
   * answering; false when another claim won or it is not healthy (the caller tries another).
   */
  claim(instance: string, sandboxId: string): Promise<boolean>;
  exec(instance: string, spec: ExecSpec): Promise<SandboxProcess>;
  /** Writes a file (parents created), replacing any file there. */
  writeFile(instance: string, path: string, data: Buffer): Promise<void>;
  /** Reads a whole file: SandboxFileError `too_large` once it passes `maxBytes` (@default MAX_FILE_BYTES). */
  readFile(instance: string, path: string, options?: { maxBytes?: number }): Promise<Buffer>;
  close(): Promise<void>;
}
