/**
 * Runs the containers of a Kubernetes pod spec with Podman, so that the image tests exercise the
 * manifests the kubernetes deployer writes rather than a hand-made copy of them. What a kubelet
 * would do, as far as one machine can:
 *
 * - the container's `command` replaces the image's entrypoint, `args` its command;
 * - the environment as the kubelet resolves it (libs/fake-kube `containerEnv`) from the deployment's Secret;
 * - the pod's user and group, a read-only root with nothing writable but the mounts, no
 *   capabilities, no privilege escalation;
 * - each emptyDir is a Podman volume of the pod, shared by its containers (as an emptyDir is):
 *   the init container's output is what the main container mounts. Podman hands a fresh volume to
 *   the first container's user, as `fsGroup` makes an emptyDir writable for the pod's group;
 * - container ports are published on 127.0.0.1 (the Service's role).
 *
 * Resource limits and probes are not applied here: the test polls the readiness path itself.
 */
import type { V1Container, V1PodSpec, V1Secret } from '@kubernetes/client-node';
import { containerEnv, type EnvContainer, type EnvSource } from '@berth/fake-kube';
import type { PodmanService } from '@berth/local-stack';

export class PodSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PodSpecError';
  }
}

export interface PodOptions {
  /** Prefix of the pod's volume names (unique per test). */
  name: string;
  pod: V1PodSpec;
  /** The Secret the pod's `secretKeyRef`s and `envFrom` name. */
  secret: V1Secret;
  /** `podman run --network` (how the pod reaches services on this machine). */
  network: string;
  /** Container port → port on 127.0.0.1. */
  publish?: Record<number, number>;
}

/** The pod's one Secret as the kubelet reads it (`secretKeyRef`s and `envFrom` name it). */
function secretSource(secret: V1Secret): EnvSource {
  return (kind, name) => {
    if (kind !== 'Secret' || secret.metadata?.name !== name) return undefined;
    return Object.fromEntries(Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]));
  };
}

/** The pod's emptyDirs as Podman volume names. */
export function podVolumes(options: PodOptions): Record<string, string> {
  return Object.fromEntries(
    (options.pod.volumes ?? []).map((volume) => {
      if (!volume.emptyDir) throw new PodSpecError(`volume ${volume.name}: only emptyDirs are supported`);
      return [volume.name, `${options.name}-${volume.name}`];
    }),
  );
}

/** The `podman run` arguments (after `run`) of one of the pod's containers. */
export function podmanRunArgs(container: V1Container, options: PodOptions): string[] {
  const { pod } = options;
  const user = pod.securityContext?.runAsUser ?? container.securityContext?.runAsUser;
  const group = pod.securityContext?.runAsGroup ?? container.securityContext?.runAsGroup;
  const security = container.securityContext ?? {};
  if (security.privileged) throw new PodSpecError(`container ${container.name} is privileged`);
  const volumes = podVolumes(options);
  const args: string[] = ['--network', options.network];
  if (user !== undefined) args.push('--user', `${user}:${group ?? user}`);
  // Only the mounts are writable: no tmpfs of Podman's own on /tmp, /run or /var/tmp.
  if (security.readOnlyRootFilesystem) args.push('--read-only', '--read-only-tmpfs=false');
  for (const capability of security.capabilities?.drop ?? []) args.push('--cap-drop', capability.toLowerCase());
  if (security.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges');
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes[mount.name];
    if (!volume) throw new PodSpecError(`container ${container.name} mounts ${mount.name}, which the pod does not declare`);
    args.push('--volume', `${volume}:${mount.mountPath}${mount.readOnly ? ':ro' : ''}`);
  }
  for (const [name, value] of Object.entries(containerEnv(container as EnvContainer, secretSource(options.secret)))) args.push('--env', `${name}=${value}`);
  for (const port of container.ports ?? []) {
    const published = options.publish?.[port.containerPort];
    if (published) args.push('--publish', `127.0.0.1:${published}:${port.containerPort}`);
  }
  if (container.command) args.push('--entrypoint', JSON.stringify(container.command));
  if (!container.image) throw new PodSpecError(`container ${container.name} has no image`);
  args.push(container.image, ...(container.args ?? []));
  return args;
}

/** Creates the pod's volumes (emptyDirs start empty). */
export async function createPodVolumes(podman: PodmanService, options: PodOptions): Promise<string[]> {
  const names = Object.values(podVolumes(options));
  for (const name of names) await podman.podman(['volume', 'create', name]);
  return names;
}
