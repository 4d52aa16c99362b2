/**
 * The `pods/{name}/exec` subresource, with a fake container runtime behind it.
 *
 * NOT ISOLATION: the command runs as an ordinary process of the host (the user running the tests),
 * with its working directory in a scratch folder per pod and the container's literal env. Absolute
 * paths reach the host's filesystem. It exists so that clients can be tested against the real exec
 * protocol (WebSocket, `v5.channel.k8s.io`/`v4.channel.k8s.io` framing: one leading byte per
 * message naming the channel — 0 stdin, 1 stdout, 2 stderr, 3 the final `Status`, 4 resize, and
 * in v5 `255 <channel>` closing one), with real processes, exit codes, signals and binary data.
 *
 * As the kubelet does, the final Status is `Success`, or `Failure` with reason `NonZeroExitCode`
 * and the exit code in `details.causes[{reason: 'ExitCode'}]` (128 + signal for a killed process),
 * or `InternalError` when the command could not start. Deleting the pod kills its processes and
 * removes its scratch folder (files outside volumes do not survive a pod).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { ObjectStore } from './store.js';
import type { KubeObject } from './types.js';
import { rejectUpgrade, ServerWebSocket } from './websocket.js';

/** The subprotocols served, best first (client-node offers v5 first). */
export const EXEC_PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io'];

const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, status: 3, resize: 4, close: 255 } as const;

export interface PodExecOptions {
  /**
   * Folder under which each pod gets its scratch folder.
   * @default a new folder in the OS temp dir, removed on close
   */
  root?: string;
}

type Obj = Record<string, unknown>;

/** What `exec` needs of a pod: the container to run in, or why it cannot. */
function execTarget(pod: KubeObject, container: string | null): { container: Obj } | { code: number; message: string } {
  const name = pod.metadata.name!;
  const containers = ((pod['spec'] as Obj | undefined)?.['containers'] ?? []) as Obj[];
  const chosen = container ?? (containers.length === 1 ? String(containers[0]!['name']) : undefined);
  if (chosen === undefined) {
    return { code: 400, message: `a container name must be specified for pod ${name}, choose one of: [${containers.map((c) => String(c['name'])).join(' ')}]` };
  }
  const spec = containers.find((c) => c['name'] === chosen);
  if (!spec) return { code: 400, message: `container ${chosen} is not valid for pod ${name}` };
  const statuses = ((pod['status'] as Obj | undefined)?.['containerStatuses'] ?? []) as Obj[];
  const running = statuses.find((s) => s['name'] === chosen && (s['state'] as Obj | undefined)?.['running'] !== undefined);
  if (!running) return { code: 400, message: `unable to upgrade connection: container not found ("${chosen}")` };
  return { container: spec };
}

export class PodExec {
  readonly #store: ObjectStore;
  readonly #root: string;
  readonly #ownRoot: boolean;
  /** Live processes per `namespace/pod`. */
  readonly #processes = new Map<string, Set<ChildProcess>>();
  readonly #unsubscribe: () => void;

  constructor(store: ObjectStore, options: PodExecOptions = {}) {
    this.#store = store;
    this.#ownRoot = options.root === undefined;
    this.#root = options.root ?? mkdtempSync(join(tmpdir(), 'fake-kube-exec-'));
    this.#unsubscribe = store.subscribe((event) => {
      if (event.type === 'DELETED' && event.resource.group === '' && event.resource.resource === 'pods') {
        this.#forget(event.object.metadata.namespace!, event.object.metadata.name!);
      }
    });
  }

  /** The pod's scratch folder on the host (the working directory of its commands), created on first use. */
  scratchDir(namespace: string, pod: string): string {
    const dir = join(this.#root, namespace, pod);
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** Serves one `exec` upgrade request; returns the HTTP status it answered (101 when it runs the command). */
  handle(req: IncomingMessage, socket: Duplex, namespace: string, podName: string, params: URLSearchParams): number {
    const refuse = (code: number, message: string, reason = 'BadRequest') => {
      rejectUpgrade(socket, code, status('Failure', message, reason, code));
      return code;
    };
    const pod = this.#store.find('pods', namespace, podName);
    if (!pod) return refuse(404, `pods "${podName}" not found`, 'NotFound');
    const command = params.getAll('command');
    if (command.length === 0) return refuse(400, 'you must specify at least 1 command');
    const target = execTarget(pod, params.get('container'));
    if ('code' in target) return refuse(target.code, target.message);
    const ws = ServerWebSocket.accept(req, socket, EXEC_PROTOCOLS);
    if (!ws) return 400;
    const env: Record<string, string> = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: this.scratchDir(namespace, podName) };
    for (const e of (target.container['env'] ?? []) as Obj[]) if (typeof e['value'] === 'string') env[String(e['name'])] = e['value'];
    const child = spawn(command[0]!, command.slice(1), {
      cwd: this.scratchDir(namespace, podName),
      env,
      // Its own process group, as a container's processes are apart from the runtime's.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const key = `${namespace}/${podName}`;
    const live = this.#processes.get(key) ?? new Set();
    this.#processes.set(key, live);
    live.add(child);
    const wantStdin = params.get('stdin') === 'true';
    if (!wantStdin) child.stdin.end();
    child.stdin.on('error', () => undefined); // writes after the command exited
    const channel = (n: number) => (chunk: Buffer) => ws.sendBinary(Buffer.concat([Buffer.from([n]), chunk]));
    if (params.get('stdout') === 'true') child.stdout.on('data', channel(CHANNEL.stdout));
    else child.stdout.resume();
    if (params.get('stderr') === 'true') child.stderr.on('data', channel(CHANNEL.stderr));
    else child.stderr.resume();
    ws.listen({
      onMessage: (data) => {
        if (data.length === 0) return;
        if (data[0] === CHANNEL.stdin && wantStdin && data.length > 1) child.stdin.write(data.subarray(1));
        else if (data[0] === CHANNEL.close && data[1] === CHANNEL.stdin) child.stdin.end();
      },
      // The client went away: the command loses its stdin, as with the kubelet, but runs on.
      onClose: () => child.stdin.end(),
    });
    let failedToStart: Error | undefined;
    child.on('error', (error) => (failedToStart = error));
    // 'close' comes after the exit and the end of all output, so the Status is the last message.
    child.on('close', (code, signal) => {
      live.delete(child);
      let final: string;
      if (failedToStart) {
        final = status(
          'Failure',
          `OCI runtime exec failed: exec failed: unable to start container process: exec: "${command[0]}": ${failedToStart.message}: unknown`,
          'InternalError',
          500,
        );
      } else {
        const exitCode = code ?? 128 + (signal ? constants.signals[signal] : 0);
        final =
          exitCode === 0
            ? JSON.stringify({ metadata: {}, status: 'Success' })
            : JSON.stringify({
                metadata: {},
                status: 'Failure',
                message: `command terminated with non-zero exit code: exit status ${exitCode}`,
                reason: 'NonZeroExitCode',
                details: { causes: [{ reason: 'ExitCode', message: String(exitCode) }] },
              });
      }
      ws.sendBinary(Buffer.concat([Buffer.from([CHANNEL.status]), Buffer.from(final, 'utf8')]));
      ws.close();
    });
    return 101;
  }

  /** Kills every live process and removes the scratch folders this instance made. */
  close(): void {
    this.#unsubscribe();
    for (const key of [...this.#processes.keys()]) {
      const [namespace, pod] = key.split('/');
      this.#forget(namespace!, pod!);
    }
    if (this.#ownRoot) rmSync(this.#root, { recursive: true, force: true });
  }

  #forget(namespace: string, pod: string): void {
    const key = `${namespace}/${pod}`;
    for (const child of this.#processes.get(key) ?? []) killGroup(child);
    this.#processes.delete(key);
    rmSync(join(this.#root, namespace, pod), { recursive: true, force: true });
  }
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

function status(outcome: 'Success' | 'Failure', message: string, reason: string, code: number): string {
  return JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: outcome, message, reason, code });
}
