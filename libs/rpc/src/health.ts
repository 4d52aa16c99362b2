/**
 * The standard gRPC health checking protocol (`grpc.health.v1.Health`): a server-side
 * implementation to register with `server.add(Health, health.implementation)` — what Kubernetes
 * gRPC probes call — and a client helper, {@link checkHealth}.
 */
import { isBerthError, NotFoundError, UnavailableError } from '@berth/errors';
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from '@berth/proto';
import { createRpcClient } from './client.js';
import type { CallContext, ServiceImplementation } from './types.js';

/** A status a service can be set to. */
export type SettableHealthStatus = 'SERVING' | 'NOT_SERVING';

/** Every status a health check can answer. */
export type HealthStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

const STATUS_VALUES: Record<HealthStatus, ServingStatus> = {
  UNKNOWN: ServingStatus.UNKNOWN,
  SERVING: ServingStatus.SERVING,
  NOT_SERVING: ServingStatus.NOT_SERVING,
  SERVICE_UNKNOWN: ServingStatus.SERVICE_UNKNOWN,
};

function statusName(value: ServingStatus): HealthStatus {
  const name = ServingStatus[value] as string | undefined;
  return name !== undefined && name in STATUS_VALUES ? (name as HealthStatus) : 'UNKNOWN';
}

/**
 * The health statuses of one server, by service name; `''` is the server as a whole and starts
 * as `SERVING`. Other names are unknown (Check answers NOT_FOUND) until `setStatus` names them.
 */
export class HealthService {
  private readonly statuses = new Map<string, SettableHealthStatus>();
  private readonly listeners = new Set<() => void>();

  /** The handlers to register: `server.add(Health, health.implementation)`. */
  readonly implementation: ServiceImplementation<typeof Health>;

  constructor(initial: Readonly<Record<string, SettableHealthStatus>> = { '': 'SERVING' }) {
    for (const [name, status] of Object.entries(initial)) this.statuses.set(name, status);
    this.implementation = {
      check: async (request) => {
        const status = this.statuses.get(request.service);
        if (status === undefined) throw new NotFoundError(`unknown service: ${JSON.stringify(request.service)}`);
        return { status: STATUS_VALUES[status] };
      },
      watch: (request, context) => this.watch(request.service, context),
    };
  }

  /** Sets the status of `serviceName` (`''` for the whole server); watchers see the change. */
  setStatus(serviceName: string, status: SettableHealthStatus): void {
    if (this.statuses.get(serviceName) === status) return;
    this.statuses.set(serviceName, status);
    for (const listener of [...this.listeners]) listener();
  }

  /** The current status of `serviceName`, `SERVICE_UNKNOWN` when it was never set. */
  getStatus(serviceName: string): HealthStatus {
    return this.statuses.get(serviceName) ?? 'SERVICE_UNKNOWN';
  }

  /** Streams the current status at once, then every change, until the call is cancelled. */
  private async *watch(serviceName: string, context: CallContext): AsyncGenerator<{ status: ServingStatus }> {
    let last: HealthStatus | undefined;
    while (!context.signal.aborted) {
      const current = this.getStatus(serviceName);
      if (current !== last) {
        last = current;
        yield { status: STATUS_VALUES[current] };
        continue;
      }
      await this.nextChange(context.signal);
    }
  }

  private nextChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.listeners.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.listeners.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** Options of {@link checkHealth}. */
export interface CheckHealthOptions {
  /**
   * The service to ask about.
   * @default '' (the server as a whole)
   */
  service?: string;
  /**
   * How long to wait for an answer, in milliseconds.
   * @default 5000
   */
  timeoutMs?: number;
  /**
   * The internal token to send. Health answers without one; with one, a server expecting a
   * different token refuses (`RpcCredentialsRefusedError`), so a readiness check catches a mismatch.
   * @default none
   */
  internalToken?: string;
}

/**
 * Asks the server at `address` (`host:port`) for the health of a service, the way a gRPC probe
 * does. A NOT_FOUND answer is `'SERVICE_UNKNOWN'`. Throws `UnavailableError` when the server
 * cannot be reached, does not answer in time or refuses `internalToken`; other failures are
 * thrown as mapped BerthErrors.
 */
export async function checkHealth(address: string, options: CheckHealthOptions = {}): Promise<HealthStatus> {
  const client = createRpcClient(Health, address, { internalToken: options.internalToken });
  try {
    const response = await client.check({ service: options.service ?? '' }, { timeoutMs: options.timeoutMs ?? 5000 });
    return statusName(response.status);
  } catch (error) {
    if (isBerthError(error) && error.code === 'not_found') return 'SERVICE_UNKNOWN';
    if (isBerthError(error) && (error.code === 'unavailable' || error.code === 'deadline_exceeded')) {
      throw new UnavailableError(`health check of ${address} failed: ${error.message}`, { cause: error });
    }
    throw error;
  } finally {
    client.close();
  }
}
