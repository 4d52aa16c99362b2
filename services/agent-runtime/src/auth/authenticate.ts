/**
 * Authentication of agent-server requests with the project's `authenticate` handler, which gets
 * a Fetch API `Request` and returns an identity string or a user object (or throws an
 * `HTTPException` to refuse). LangGraph Studio requests may skip it (see `createAuthenticator`).
 */
import type { Request as ExpressRequest } from 'express';
import { AuthHandlerError, AuthHttpError } from './errors.js';
import type { CustomAuth } from './load.js';
import { STUDIO_USER, type AuthContext, type AuthUser } from './types.js';

/** A Fetch API `Request` with the method, full URL and headers of an express request (no body). */
export function toFetchRequest(req: ExpressRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(':')) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const path = req.originalUrl || req.url;
  let url: URL;
  try {
    url = new URL(path, `${req.protocol}://${req.get('host') ?? 'localhost'}`);
  } catch {
    // A Host header that is not a host name: the handler still gets the path and the headers.
    url = new URL(path, 'http://localhost');
  }
  return new Request(url, { method: req.method, headers });
}

/**
 * The user from what `authenticate` returned: a string is the identity; an object needs a string
 * `identity` and may set `permissions` ([]), `display_name` (identity), `is_authenticated` (true)
 * and any other field.
 * @throws AuthHandlerError for anything else.
 */
export function normalizeUser(result: unknown): AuthContext {
  if (typeof result === 'string' && result !== '') {
    return { user: { identity: result, display_name: result, is_authenticated: true, permissions: [] }, permissions: [] };
  }
  if (typeof result === 'object' && result !== null && typeof (result as { identity?: unknown }).identity === 'string') {
    const raw = result as Record<string, unknown> & { identity: string };
    const permissions = Array.isArray(raw.permissions) ? raw.permissions.filter((p): p is string => typeof p === 'string') : [];
    const user: AuthUser = {
      ...raw,
      identity: raw.identity,
      permissions,
      display_name: typeof raw.display_name === 'string' ? raw.display_name : raw.identity,
      is_authenticated: typeof raw.is_authenticated === 'boolean' ? raw.is_authenticated : true,
    };
    return { user, permissions: [...permissions] };
  }
  const got =
    result === null
      ? 'null'
      : typeof result === 'object'
        ? `an object without a string "identity" (keys: ${Object.keys(result).join(', ') || 'none'})`
        : typeof result;
  throw new AuthHandlerError('authenticate', `returned ${got}; it must return an identity string or an object with a string "identity"`);
}

/** True for an `HTTPException` of `@langchain/langgraph-sdk/auth` (whichever copy of the SDK made it). */
export function isHttpException(error: unknown): error is Error & { status: number; headers?: unknown } {
  return error instanceof Error && typeof (error as { status?: unknown }).status === 'number' && 'headers' in error;
}

/**
 * Turns what a handler threw into the error the server answers with: an `HTTPException` keeps
 * its status (300–599, else 500), message and headers; anything else becomes a logged 500.
 */
export function fromHandlerError(handler: string, error: unknown): Error {
  if (error instanceof AuthHttpError || error instanceof AuthHandlerError) return error;
  if (isHttpException(error) && Number.isInteger(error.status) && error.status >= 300 && error.status <= 599) {
    const headers: Record<string, string> = {};
    try {
      new Headers((error.headers ?? {}) as ConstructorParameters<typeof Headers>[0]).forEach((value, name) => {
        headers[name] = value;
      });
    } catch {
      // Unusable headers are dropped; the status and message still apply.
    }
    return new AuthHttpError(error.status, error.message || 'Unauthorized', headers, { cause: error });
  }
  // The client only learns that the handler failed; the log shows the cause.
  return new AuthHandlerError(handler, 'failed (the server log has the error it threw)', { cause: error });
}

/**
 * The `authenticate` function of the agent server's `Api`: runs the project's handler on every
 * non-public route. With `trustStudioHeader` and unless `disable_studio_auth` is set, a request
 * with `x-auth-scheme: langsmith` is taken as LangGraph Studio's and gets the Studio user without
 * the handler. Anyone can send that header, so it is trusted only where something in front (the
 * gateway's API-key check) has already authenticated the caller.
 */
export function createAuthenticator(auth: CustomAuth, options: { trustStudioHeader?: boolean } = {}): (req: ExpressRequest) => Promise<AuthContext> {
  return async (req) => {
    if (options.trustStudioHeader && !auth.disableStudioAuth && req.headers['x-auth-scheme'] === 'langsmith') {
      return { user: { ...STUDIO_USER, permissions: [] }, permissions: [] };
    }
    const handler = auth.handlers.authenticate;
    if (!handler) throw new AuthHandlerError('authenticate', 'is not registered on the Auth object');
    let result: unknown;
    try {
      result = await handler(toFetchRequest(req));
    } catch (error) {
      throw fromHandlerError('authenticate', error);
    }
    return normalizeUser(result);
  };
}
