/**
 * Recognises a dependency that is down or unreachable — Postgres, Redis, object storage, another
 * Berth service over gRPC — from the errors its driver throws, so that every such failure is
 * answered as "unavailable" (HTTP 503 + Retry-After, gRPC UNAVAILABLE) with a plain message, in
 * one place. Recognition is by shape: this package depends on no driver.
 */
import { UnavailableError, isBerthError } from './errors.js';

export type Dependency = 'database' | 'redis' | 'object-storage' | 'service';

const LABELS: Record<Dependency, string> = {
  database: 'the database',
  redis: 'Redis',
  'object-storage': 'object storage',
  service: 'an internal service',
};

/** A dependency is down; the message is plain (no hosts, SQL or driver text), `cause` holds the driver's error. */
export class DependencyUnavailableError extends UnavailableError {
  /** `dependency` when the driver's error tells which; undefined for a bare network error. */
  constructor(dependency: Dependency | undefined, options?: { cause?: unknown }) {
    super(`${dependency ? LABELS[dependency] : 'a service this request needs'} is unavailable, retry shortly`, options);
  }
}

/** Socket-level failures: the peer is not there, went away, or cannot be resolved. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/**
 * SQLSTATEs of a server that is gone or refusing: class 08 (connection exception), admin/crash
 * shutdown and "cannot connect now" (57P01–57P03), too many connections (53300).
 */
const PG_STATE = /^(08[0-9A-Z]{3}|57P0[123]|53300)$/;
/** Messages of pg and pg-pool when the connection died or could not be had in time. */
const PG_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable)/;
/** Messages of ioredis while it has no connection (offline queue off, retries exhausted, closed). */
const REDIS_MESSAGE = /^(Connection is closed\.?|Stream isn't writeable|Reached the max retries per request limit)/;
/** gRPC UNAVAILABLE. */
const GRPC_UNAVAILABLE = 14;
/** The trailer in which a Berth server sends its own error (see @berth/rpc): then the status is an answer, not an outage. */
const BERTH_DETAIL_TRAILER = 'berth-error-bin';

interface ErrorShape {
  code?: unknown;
  name?: unknown;
  message?: unknown;
  severity?: unknown;
  details?: unknown;
  metadata?: { get?: (key: string) => unknown[] };
  $metadata?: { httpStatusCode?: number };
  cause?: unknown;
}

/** The dependency an error says is down: a Dependency, `null` for a bare network error, undefined for none. */
function outageOf(e: ErrorShape): Dependency | null | undefined {
  const message = typeof e.message === 'string' ? e.message : '';
  if (typeof e.code === 'string' && typeof e.severity === 'string' && PG_STATE.test(e.code)) return 'database';
  if (PG_MESSAGE.test(message)) return 'database';
  if (e.name === 'MaxRetriesPerRequestError' || REDIS_MESSAGE.test(message)) return 'redis';
  if (e.code === GRPC_UNAVAILABLE && typeof e.details === 'string' && typeof e.metadata?.get === 'function') {
    return e.metadata.get(BERTH_DETAIL_TRAILER).length === 0 ? 'service' : undefined;
  }
  const network = typeof e.code === 'string' && NETWORK_CODES.has(e.code);
  // The AWS SDK's errors carry `$metadata`.
  if (e.$metadata && (network || e.name === 'TimeoutError' || e.$metadata.httpStatusCode === 503)) return 'object-storage';
  if (network) return null;
  return undefined;
}

/**
 * The DependencyUnavailableError for `error` when it, or an error in its `cause` chain, says a
 * dependency is down; undefined otherwise. Other Berth errors in the chain end the search: their
 * status was chosen deliberately.
 */
export function dependencyFailureOf(error: unknown): DependencyUnavailableError | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    if (current instanceof DependencyUnavailableError) return current;
    if (isBerthError(current) && current.code !== 'unavailable' && current.code !== 'internal') return undefined;
    const outage = outageOf(current as ErrorShape);
    if (outage !== undefined) return new DependencyUnavailableError(outage ?? undefined, { cause: error });
    current = (current as ErrorShape).cause;
  }
  return undefined;
}
