/**
 * Errors of the RPC layer itself (misuse, failures to bind, cancelled calls). Domain errors that
 * cross the wire are `@berth/errors` classes, mapped in `status.ts`.
 */
import { UnavailableError } from '@berth/errors';

/** A service or implementation that cannot be served or called, e.g. a missing method handler. */
export class RpcConfigurationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RpcConfigurationError';
  }
}

/** The server could not bind its address, or was asked to listen twice. */
export class RpcListenError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RpcListenError';
  }
}

/**
 * The reason of a handler's `context.signal` when the call ended before the handler did: the
 * client cancelled it or gave up at its deadline, the connection dropped or the server shut down.
 */
export class RpcCancelledError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RpcCancelledError';
  }
}

/**
 * An internal service refused the platform's own credentials (a missing or different
 * `BERTH_INTERNAL_TOKEN`): a misconfiguration of the platform, not the end user's fault, so it is
 * `unavailable` (HTTP 503) rather than `unauthenticated` (which would tell the user their own
 * credentials were wrong). The message is the same for every call; `method` says which one.
 */
export class RpcCredentialsRefusedError extends UnavailableError {
  static readonly MESSAGE = "internal service refused the platform's credentials";
  readonly method: string;

  constructor(method: string, options?: { cause?: unknown }) {
    super(RpcCredentialsRefusedError.MESSAGE, options);
    this.method = method;
  }
}
