/**
 * The container a sandbox instance is: its Docker Engine API create body. Isolation first — no
 * network but loopback, no host files but the agent binary and the instance's own two folders (its
 * run folder, read-write, and the host's folder for it, read-only), almost no capabilities — with
 * the in-sandbox agent as PID 1.
 */
import { readFileSync } from 'node:fs';
import type { ContainerCreateOptions } from 'dockerode';
import { proxyEnvironment } from '../../proxy/proxy-ca.js';
import type { InstanceSpec } from '../driver.js';

/** Where the agent binary and the instance's folders appear inside every sandbox: all below PLATFORM_MOUNTS. */
export const PLATFORM_MOUNTS = '/.berth';
export const AGENT_PATH = '/.berth/bin/sandboxd';
/** The run folder: the sandbox's to change (the agent makes its socket and CA bundle here). */
export const RUN_MOUNT = '/.berth/run';
/** The host's folder for the instance, read-only inside: what the host serves or writes for it. */
export const HOST_MOUNT = '/.berth/host';
export const AGENT_SOCKET = 'agent.sock';
/** In the host's folder: the auth proxy's socket (the agent bridges PROXY_PORT to it) and CA. */
export const PROXY_SOCKET = 'proxy.sock';
export const PROXY_CA_FILE = 'proxy-ca.crt';
/** In the run folder: the image's CA bundle plus the proxy's CA (written by the agent). */
export const CA_BUNDLE_FILE = 'ca-bundle.crt';
/** The auth proxy's port on the sandbox's loopback. */
export const PROXY_PORT = 3128;

export const LABELS = {
  instance: 'berth.dev/sandbox-instance',
  tenant: 'berth.dev/tenant',
} as const;

/**
 * Capabilities root inside the sandbox keeps (all others are dropped), so that package managers
 * and ordinary root tools work on the sandbox's own files:
 * - CHOWN, FOWNER, FSETID, DAC_OVERRIDE: install and edit files of other owners (apt, npm -g, pip).
 * - SETUID, SETGID: tools that drop to another user (apt's `_apt` sandbox user, su, runuser).
 * - KILL: signal processes of other users in the sandbox.
 * - NET_BIND_SERVICE: serve on ports below 1024 on the sandbox's loopback.
 * Left out on purpose: NET_RAW (no network to probe), MKNOD, SYS_CHROOT, SETFCAP, AUDIT_WRITE and
 * everything Docker grants by default beyond these.
 */
export const CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID', 'KILL', 'NET_BIND_SERVICE'];

/** An image USER that is root (`''`, `root`, `0`, `0:0`, `root:root`…). */
export function isRootUser(user: string): boolean {
  const name = user.split(':')[0]!.trim();
  return name === '' || name === 'root' || name === '0';
}

/**
 * PID 1 (the agent) is the last thing the OOM killer picks; it resets its commands to 0. Lowering
 * a score needs CAP_SYS_RESOURCE: rootless engines and hosts that withhold it (some VMs' and CI
 * containers' root) cannot, and runc then fails every start ("can't get final child's PID").
 */
export const AGENT_OOM_SCORE_ADJ = -998;

/** This process may lower OOM scores (root with CAP_SYS_RESOURCE), as a local engine then may too. */
export function canLowerOomScore(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    const status = readFileSync('/proc/self/status', 'utf8');
    const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const CAP_SYS_RESOURCE = 24n;
    return effective !== undefined && ((BigInt(`0x${effective}`) >> CAP_SYS_RESOURCE) & 1n) === 1n;
  } catch {
    return false;
  }
}

export interface ContainerLayout {
  /** Host path of the agent binary (mounted read-only). */
  agentBinary: string;
  /** This instance's run folder (mounted read-write): the engine volume's name, or a host path. */
  runFolder: string;
  /** Host path of the host's folder for this instance (mounted read-only). */
  readOnlyFolder: string;
  /** Most processes (threads included) one sandbox may run. */
  pidsLimit: number;
  /** The driver put the proxy's CA in the host's folder (PROXY_CA_FILE): sandboxes are told to trust it. */
  proxyCa: boolean;
  /** oom_score_adj of the agent; 0 = the engine's default. */
  oomScoreAdj: number;
  /**
   * The image's USER is root: only then are CAPABILITIES added. Podman makes added capabilities
   * ambient for a non-root user (Docker does not), which would hand them to every command.
   */
  rootUser: boolean;
}

export function containerCreateOptions(spec: InstanceSpec, layout: ContainerLayout): ContainerCreateOptions {
  const caPath = `${HOST_MOUNT}/${PROXY_CA_FILE}`;
  const bundlePath = `${RUN_MOUNT}/${CA_BUNDLE_FILE}`;
  const env: Record<string, string> = {
    ...spec.env,
    ...proxyEnvironment({ port: PROXY_PORT, ...(layout.proxyCa ? { caPath, bundlePath } : {}) }),
  };
  const { memoryBytes, cpuMillis, storageBytes } = spec.resources;
  return {
    name: spec.instance,
    Image: spec.image.reference,
    // Its own name: no secret and no authority (the host knows its agent by its socket, not a name).
    Hostname: spec.instance,
    Entrypoint: [
      AGENT_PATH,
      '--socket',
      `${RUN_MOUNT}/${AGENT_SOCKET}`,
      '--proxy-listen',
      `127.0.0.1:${PROXY_PORT}`,
      '--proxy-socket',
      `${HOST_MOUNT}/${PROXY_SOCKET}`,
      ...(layout.proxyCa ? ['--ca-bundle', bundlePath, '--ca-extra', caPath] : []),
    ],
    // The image's CMD would become arguments of the agent.
    Cmd: [],
    Env: Object.entries(env).map(([key, value]) => `${key}=${value}`),
    Labels: { ...spec.labels, [LABELS.instance]: spec.instance, [LABELS.tenant]: spec.tenantId },
    // No User: the image's USER runs the agent and so every command.
    HostConfig: {
      NetworkMode: 'none',
      IpcMode: 'private',
      Binds: [
        `${layout.agentBinary}:${AGENT_PATH}:ro`,
        `${layout.runFolder}:${RUN_MOUNT}`,
        // Connecting to a socket on a read-only mount works; replacing or adding a file does not.
        `${layout.readOnlyFolder}:${HOST_MOUNT}:ro`,
        ...spec.volumes.map((volume) => `${volume.volume}:${volume.mountPath}`),
      ],
      CapDrop: ['ALL'],
      CapAdd: layout.rootUser ? CAPABILITIES : [],
      SecurityOpt: ['no-new-privileges'],
      ReadonlyRootfs: false,
      PidsLimit: layout.pidsLimit,
      ...(layout.oomScoreAdj ? { OomScoreAdj: layout.oomScoreAdj } : {}),
      ...(memoryBytes ? { Memory: memoryBytes, MemorySwap: memoryBytes } : {}),
      ...(cpuMillis ? { NanoCpus: cpuMillis * 1_000_000 } : {}),
      ...(storageBytes ? { StorageOpt: { size: String(storageBytes) } } : {}),
      RestartPolicy: { Name: 'no' },
    },
  };
}
