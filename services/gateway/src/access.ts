/**
 * The kinds of credential the gateway knows, as routes declare them in `access` (see
 * GatewayAuthenticator for what each one is). A route takes exactly the kinds it lists; the table of
 * every route and what it takes is checked in beside the test that keeps it current
 * (route-access.txt, route-access.test.ts).
 */
import type { Principal } from '@berth/auth';
import type { Api, RouteSpec } from '@berth/http';
import type { z } from 'zod';

/**
 * `api_key`: a tenant's API key; `access_token`: a bearer token; `session`: a console session (the
 * `berth_session` cookie of `POST /v1/auth/session`); `tracing_credential`: a deployment's tracing credential.
 */
export type GatewayCredential = Principal['credential']['type'];

/** The gateway's route registry. */
export type GatewayApi = Api<Principal, GatewayCredential>;

/**
 * A route served at more than one path (LangSmith's classic and `/api/v1` paths), declared once:
 * `api.route({ ...spec, path: '/sessions' }).route({ ...spec, path: '/api/v1/sessions' })`, each
 * path still a literal where it is served.
 */
export function routeSpec<
  P extends z.ZodType = z.ZodObject<{}>,
  Q extends z.ZodType = z.ZodObject<{}>,
  B extends z.ZodType = z.ZodUndefined,
  R extends z.ZodType = z.ZodVoid,
>(spec: Omit<RouteSpec<Principal, P, Q, B, R, GatewayCredential>, 'path'>): Omit<RouteSpec<Principal, P, Q, B, R, GatewayCredential>, 'path'> {
  return spec;
}

/**
 * What the deployment proxy (`/d/{deployment_id}/…`, not an Api route) takes, where the project has
 * no auth handler of its own. A console session too, for the console's Studio: as on every route, only
 * from the gateway's own pages and with its CSRF token on unsafe methods; the cookie itself is never
 * passed on to an agent server (see `admit`).
 */
export const PROXY_CREDENTIALS: readonly GatewayCredential[] = ['api_key', 'access_token', 'session'];

/**
 * What a WebSocket to a deployment takes: not a console session (Studio streams over SSE; a socket's
 * origin is the deployment's `http.cors` to judge, not the gateway's).
 */
export const PROXY_SOCKET_CREDENTIALS: readonly GatewayCredential[] = ['api_key', 'access_token'];

/**
 * The credentials the route at this method and URL declares, for a request handled outside the
 * route's handler (a WebSocket upgrade on the route's path). A path without a route, or a public
 * one, takes none: nobody passes.
 */
export function declaredAccess(api: GatewayApi, method: string, url: string | undefined): readonly GatewayCredential[] {
  const access = api.match(method, (url ?? '/').split('?')[0]!)?.access;
  return access === undefined || access === 'public' ? [] : access;
}

const names: Record<GatewayCredential, string> = {
  api_key: 'an API key',
  access_token: 'a bearer token',
  session: 'a console session',
  tracing_credential: 'a deployment’s tracing credential',
};

/** `an API key, a bearer token or a console session`, for refusals and the REST reference. */
export function describeCredentials(kinds: readonly GatewayCredential[]): string {
  const words = kinds.map((kind) => names[kind]);
  return words.length > 1 ? `${words.slice(0, -1).join(', ')} or ${words.at(-1)}` : (words[0] ?? 'no credential');
}
