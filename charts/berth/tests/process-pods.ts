/**
 * The chart's pods as processes, for libs/fake-kube's Kubelet: each pod's container runs as
 * `berth <args>` (the platform image's entrypoint is `berth`) with exactly the environment the
 * kubelet resolves from the pod spec, and only addresses changed to what they are outside a cluster:
 * listening on every interface of the pod (`0.0.0.0`) is listening on its pod IP (a loopback
 * address of its own), each container port is a free port of this machine (other tests may listen
 * on every address at the chart's port numbers; probes and kube-proxies are told), a Service's cluster DNS name and port is a kube-proxy of that Service
 * (libs/fake-kube ServiceProxy), an emptyDir mount is a scratch folder of the pod, and a pod that
 * gets a service account token reaches the API by KUBECONFIG.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import {
  containerEnv,
  ServiceProxy,
  storeEnvSource,
  type EnvContainer,
  type KubeObject,
  type ObjectStore,
  type PodRuntime,
  type RunningPod,
  type ServiceEndpoint,
} from '@berth/fake-kube';
import { freePort } from '@berth/local-stack';
import { spawnTestChild, type TestChild } from '@berth/testing';

interface PodContainer extends EnvContainer {
  args?: string[];
  ports?: Array<{ containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}

export interface ProcessPodsOptions {
  store: ObjectStore;
  namespace: string;
  /** The CLI (`cli/dist/bin.js`) the containers run. */
  bin: string;
  /** Where pods get their scratch folders. */
  dir: string;
  /** The kubeconfig of pods with a service account token. */
  kubeconfig: string;
  /** How often the kube-proxies read the endpoints: how late they learn of changes. */
  proxySyncMs: number;
}

/** How a pod's process ended. */
export interface PodExit {
  pod: string;
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class ProcessPods implements PodRuntime {
  /** The kube-proxy of each Service port, by `<service>:<port>`. */
  readonly proxies = new Map<string, ServiceProxy>();
  /** The pods' processes, by pod name. */
  readonly processes = new Map<string, TestChild>();
  /** Pods whose process ended, in order. */
  readonly exits: PodExit[] = [];
  readonly #options: ProcessPodsOptions;
  readonly #starting = new Map<string, Promise<ServiceProxy>>();
  /** Each pod IP's container ports → the ports they listen on here. */
  readonly #ports = new Map<string, Map<number, number>>();

  constructor(options: ProcessPodsOptions) {
    this.#options = options;
  }

  async start(pod: KubeObject, podIp: string): Promise<RunningPod> {
    const { store, namespace, bin, dir, kubeconfig } = this.#options;
    const spec = pod['spec'] as { containers: PodContainer[]; volumes?: Array<{ name: string; emptyDir?: unknown }>; automountServiceAccountToken?: boolean };
    const [container] = spec.containers;
    if (!container || spec.containers.length > 1) throw new Error(`pod ${pod.metadata.name}: one container expected`);
    const env = containerEnv(container, storeEnvSource(store, namespace));
    const podDir = join(dir, 'pods', pod.metadata.name!);
    const mounts: Array<[string, string]> = [];
    for (const mount of container.volumeMounts ?? []) {
      if (!spec.volumes?.find((v) => v.name === mount.name)?.emptyDir) continue;
      const local = join(podDir, mount.name);
      await mkdir(local, { recursive: true });
      mounts.push([mount.mountPath, local]);
    }
    const services = await this.#serviceAddresses();
    const ports = new Map<number, number>();
    for (const { containerPort } of container.ports ?? []) ports.set(containerPort, await freePort());
    this.#ports.set(podIp, ports);
    const mapped = Object.fromEntries(
      Object.entries(env).map(([name, value]) => {
        const port = ports.get(Number(value));
        if (port !== undefined && /^\d+$/.test(value)) return [name, String(port)];
        let v = value.replaceAll('0.0.0.0', podIp);
        for (const [pattern, address] of services) v = v.replace(pattern, address);
        for (const [path, local] of mounts) if (v === path || v.startsWith(`${path}/`)) v = local + v.slice(path.length);
        return [name, v];
      }),
    );
    const child = spawnTestChild(process.execPath, [bin, ...(container.args ?? [])], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...mapped,
        ...(spec.automountServiceAccountToken === false ? {} : { KUBECONFIG: kubeconfig }),
      },
    });
    this.processes.set(pod.metadata.name!, child);
    const exited = new Promise<void>((resolve) =>
      child.child.once('exit', (code, signal) => {
        this.exits.push({ pod: pod.metadata.name!, code, signal });
        resolve();
      }),
    );
    return { exited, ports, terminate: () => child.child.kill('SIGTERM'), kill: () => child.child.kill('SIGKILL') };
  }

  async close(): Promise<void> {
    await Promise.all([...this.processes.values()].map((p) => p.stop()));
    await Promise.all([...this.proxies.values()].map((p) => p.close()));
  }

  /** Each Service port's cluster names (`svc`, `svc.ns`, `svc.ns.svc[.cluster.local]`, with the port) → its kube-proxy. */
  async #serviceAddresses(): Promise<Array<[RegExp, string]>> {
    const { store, namespace, proxySyncMs } = this.#options;
    const addresses: Array<[RegExp, string]> = [];
    for (const service of store.list('services', namespace)) {
      const name = service.metadata.name!;
      for (const { port } of (service['spec'] as { ports: Array<{ port: number }> }).ports) {
        const key = `${name}:${port}`;
        // Pods start at once: the first makes the proxy, the others wait for it.
        let starting = this.#starting.get(key);
        if (!starting) {
          const reach = (e: ServiceEndpoint) => ({ host: e.ip, port: this.#ports.get(e.ip)?.get(e.port) ?? e.port });
          starting = ServiceProxy.start(store, { namespace, service: name, port, syncMs: proxySyncMs, reach }).then((proxy) => {
            this.proxies.set(key, proxy);
            return proxy;
          });
          this.#starting.set(key, starting);
        }
        const proxy = await starting;
        const host = `${name}(?:\\.${namespace}(?:\\.svc(?:\\.cluster\\.local)?)?)?`;
        addresses.push([new RegExp(`(?<![\\w.-])${host}:${port}(?!\\d)`, 'g'), proxy.address]);
      }
    }
    return addresses;
  }
}
