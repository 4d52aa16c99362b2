/**
 * Authentication between Berth services: one shared internal token (`BERTH_INTERNAL_TOKEN`) that
 * every client sends as `authorization: Bearer <token>` and every server checks. Deployed graphs
 * are other people's code running beside the platform (same machine or cluster) and can reach its
 * gRPC ports; without the token their calls are refused.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { RpcConfigurationError } from './errors.js';

/** The metadata key the token travels in. */
export const AUTHORIZATION_METADATA = 'authorization';

/**
 * Services that answer without the token: the standard health service, which Kubernetes probes
 * and load balancers call without credentials. A caller that does send a token must send the
 * right one, so the gateway's readiness check notices a token mismatch.
 */
export const OPEN_SERVICES: ReadonlySet<string> = new Set(['grpc.health.v1.Health']);

/** Shorter tokens are refused at start: the token is the only thing between a graph and every tenant's data. */
export const MIN_INTERNAL_TOKEN_LENGTH = 32;

/** Throws `RpcConfigurationError` for a token that is too short or cannot travel in a header. */
export function assertValidInternalToken(token: string): void {
  if (token.length < MIN_INTERNAL_TOKEN_LENGTH) {
    throw new RpcConfigurationError(`the internal token must be at least ${MIN_INTERNAL_TOKEN_LENGTH} characters long`);
  }
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new RpcConfigurationError('the internal token must consist of printable ASCII characters without spaces');
  }
}

/** The metadata value a client sends. */
export function bearer(token: string): string {
  return `Bearer ${token}`;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Checks `authorization` values against the token in constant time (digests hide the length too). */
export class InternalTokenVerifier {
  readonly #expected: Buffer;

  constructor(token: string) {
    assertValidInternalToken(token);
    this.#expected = digest(bearer(token));
  }

  /** True when exactly one `authorization` value was sent and it carries the token. */
  verify(values: readonly unknown[]): boolean {
    if (values.length !== 1 || typeof values[0] !== 'string') return false;
    // The scheme is case-insensitive (RFC 9110); the token is compared as sent.
    const value = values[0].replace(/^bearer /i, 'Bearer ');
    return timingSafeEqual(digest(value), this.#expected);
  }
}
