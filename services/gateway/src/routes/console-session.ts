/**
 * Console sessions over HTTP: `POST /v1/auth/session` signs a browser in with an API key and sets
 * the `berth_session` cookie (HttpOnly, SameSite=Strict, Path=/, Secure behind https), so the key
 * never stays in the browser; `GET` gives a reloaded page its CSRF token back; `DELETE` signs out.
 * With the cookie, every route that takes an API key acts as that key (GatewayAuthenticator checks
 * the session, the page's origin and, on unsafe methods, the X-CSRF-Token header).
 */
import { sessionCsrfToken, type AuthStore, type ConsoleSessions, type SessionRecord } from '@berth/auth';
import { PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import type { Request, Response } from 'express';
import type { GatewayApi } from '../access.js';
import { fromGatewayPages } from '../browser-origin.js';
import { cookieValue, SESSION_COOKIE } from '../cookies.js';
import { publicOrigin } from '../public-url.js';
import type { RateLimiter } from '../rate-limit.js';
import { SessionBody, SessionOut } from '../schemas.js';

export interface ConsoleSessionRouteDeps {
  store: AuthStore;
  sessions: ConsoleSessions;
  /** Limits sign-in attempts per client address, as approvals of the login page are. */
  signInLimiter: RateLimiter;
  /** See GatewayConfig.publicUrl: https there makes the cookie Secure. */
  publicUrl?: string;
}

const SIGN_IN_REFUSED = 'That API key is not valid (unknown, revoked or expired)';

function sessionJson(session: SessionRecord, token: string) {
  return { tenant_id: session.tenantId, key_name: session.keyName, csrf_token: sessionCsrfToken(token), expires_at: session.expiresAt.toISOString() };
}

export function consoleSessionRoutes(api: GatewayApi, deps: ConsoleSessionRouteDeps): void {
  // No Max-Age: the browser forgets the cookie when it closes; the gateway ends the session anyway.
  const cookieOptions = (req: Request) =>
    ({ httpOnly: true, sameSite: 'strict', path: '/', secure: publicOrigin(req, deps.publicUrl).startsWith('https:') }) as const;
  // The answer carries the CSRF token: never kept by a cache.
  const noStore = (res: Response) => res.setHeader('Cache-Control', 'no-store');

  api
    .route({
      method: 'post',
      path: '/v1/auth/session',
      access: 'public',
      summary: 'Sign in to the console with an API key',
      description:
        'Exchanges an API key (in the body) for a console session: sets the `berth_session` cookie (HttpOnly, ' +
        'SameSite=Strict, Path=/, Secure when the gateway’s public URL is https) and answers the session’s ' +
        '`csrf_token`. With the cookie, every route that takes an API key acts as that key; POST, PUT, PATCH and ' +
        'DELETE also need the header `X-CSRF-Token: <csrf_token>`. The session ends on sign-out, after an hour ' +
        'without requests or 12 hours in all (by default), and when its key is revoked. Public (the key in the ' +
        'body is the credential), accepted only from the gateway’s own pages, and rate-limited per client ' +
        'address. 401: the key is unknown, revoked or expired.',
      tags: ['auth'],
      body: SessionBody,
      response: SessionOut,
      errors: [401, 403, 429],
      handler: async ({ body, req, res }) => {
        deps.signInLimiter.take(req.ip ?? 'unknown');
        // Else another site's page could sign a visitor's browser in to the attacker's tenant.
        if (!fromGatewayPages(req.headers, deps.publicUrl)) throw new PermissionDeniedError('Sign in from the gateway’s own pages');
        const key = await deps.store.verifyApiKey(body.api_key.trim());
        if (!key) throw new UnauthenticatedError(SIGN_IN_REFUSED);
        const { token, session } = await deps.sessions.create(key);
        noStore(res);
        res.cookie(SESSION_COOKIE, token, cookieOptions(req));
        return sessionJson(session, token);
      },
    })
    .route({
      method: 'get',
      path: '/v1/auth/session',
      access: ['session'],
      summary: 'The console session of this browser',
      description:
        'The same answer as signing in, for the session the cookie carries: a reloaded page gets its `csrf_token` ' + 'back. 401 without a live session.',
      tags: ['auth'],
      response: SessionOut,
      handler: async ({ req, res }) => {
        const token = cookieValue(req.headers, SESSION_COOKIE)!;
        const found = await deps.sessions.verify(token);
        // Ended between the authentication and now (signed out in another tab, key revoked).
        if (!found) throw new UnauthenticatedError('The console session has ended; sign in again');
        noStore(res);
        return sessionJson(found.session, token);
      },
    })
    .route({
      method: 'delete',
      path: '/v1/auth/session',
      access: ['session'],
      summary: 'Sign out of the console',
      description: 'Ends the session and clears its cookie. Needs `X-CSRF-Token` like every unsafe call with the cookie.',
      tags: ['auth'],
      handler: async ({ auth, req, res }) => {
        await deps.sessions.end(auth.credential.id);
        res.clearCookie(SESSION_COOKIE, cookieOptions(req));
      },
    });
}
