/**
 * Errors of the RPC layer itself (misuse, failures to bind, cancelled calls). Domain errors that
 * cross the wire are `@berth/errors` classes, mapped in `status.ts`.
 */

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
