/**
 * The approval page of a login flow: `GET /login/{approval_id}` shows a form, `POST` with an API
 * key of the approver's tenant mints a bearer token for that key (the key itself never leaves
 * the gateway) and completes the flow, which wakes the waiting `berth login`.
 *
 * CSRF: the form carries a random token that must equal a cookie set with it (SameSite=Strict,
 * HttpOnly, scoped to this page's path), and a cross-origin `Origin` is refused. The form needs
 * the approver's own API key anyway, so a forged post could at worst approve with a key the
 * forger already has; the checks keep even that from working through someone else's browser.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { AuthStore } from '@berth/auth';
import { isBerthError } from '@berth/errors';
import { AuthFlowStatus, timestampDate, type AuthFlow } from '@berth/proto';
import type { Request, Response } from 'express';
import type { ControlPlaneClients } from '../control-plane.js';
import { cookieValue } from '../cookies.js';
import { approvalForm, message, sendPage } from '../login-html.js';
import type { RateLimiter } from '../rate-limit.js';
import { LoginApproveBody, LoginPagePath } from '../schemas.js';
import { publicOrigin } from '../public-url.js';
import type { GatewayApi } from '../access.js';

export interface LoginPageDeps {
  store: AuthStore;
  controlPlane: ControlPlaneClients;
  /** Limits approval attempts per client address. */
  approveLimiter: RateLimiter;
  /** Lifetime of the bearer tokens minted for logins, in seconds. */
  tokenTtlSeconds: number;
  publicUrl?: string;
}

const CSRF_COOKIE = 'berth_login_csrf';
const RUN_AGAIN = 'Run `berth login` again to get a new link.';

function sameSecret(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b) return false;
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * False when the browser says the form came from another site. Hosts are compared, not schemes:
 * behind a TLS-terminating proxy the page is https to the browser and http to the gateway.
 */
function sameSite(origin: string | undefined, ours: string): boolean {
  if (origin === undefined) return true; // not sent by every browser for same-origin posts; the CSRF token still applies
  try {
    return new URL(origin).host === new URL(ours).host;
  } catch {
    return false; // includes the opaque "null" origin
  }
}

/** The flow behind an approval id, or undefined when there is none. */
async function findFlow(deps: LoginPageDeps, approvalId: string): Promise<AuthFlow | undefined> {
  try {
    return (await deps.controlPlane.authFlows.getFlow({ id: { case: 'approvalId', value: approvalId } })).flow;
  } catch (error) {
    if (isBerthError(error) && error.code === 'not_found') return undefined;
    throw error;
  }
}

/** Answers for flows that cannot be approved (any more); true when it answered. */
function sendClosedFlow(res: Response, flow: AuthFlow | undefined): boolean {
  if (!flow) {
    sendPage(res, 404, 'Unknown login link', message('error', 'This login link is not known here.', RUN_AGAIN));
    return true;
  }
  if (flow.status === AuthFlowStatus.COMPLETED) {
    sendPage(res, 409, 'Already approved', message('ok', 'This login was already approved. You can close this page.'));
    return true;
  }
  if (flow.status !== AuthFlowStatus.PENDING) {
    sendPage(res, 410, 'Login link expired', message('error', 'This login link has expired.', RUN_AGAIN));
    return true;
  }
  return false;
}

export function loginPageRoutes(api: GatewayApi, deps: LoginPageDeps): void {
  const renderForm = (req: Request, res: Response, flow: AuthFlow, status: number, csrfToken: string, error?: string) => {
    const origin = publicOrigin(req, deps.publicUrl);
    // Path-scoped, so approval pages of two flows open at once do not overwrite each other's cookie.
    res.cookie(CSRF_COOKIE, csrfToken, {
      httpOnly: true,
      sameSite: 'strict',
      secure: origin.startsWith('https:'),
      path: req.path,
      maxAge: 3600_000,
    });
    sendPage(
      res,
      status,
      'Approve login',
      approvalForm({
        clientName: flow.clientName,
        expiresAt: timestampDate(flow.expiresAt!),
        host: new URL(origin).host,
        csrfToken,
        ...(error ? { error } : {}),
      }),
    );
  };

  api
    .route({
      method: 'get',
      path: '/login/{approval_id}',
      access: 'public',
      summary: 'Login approval page (HTML)',
      description:
        'The page `POST /v2/auth/login` links to: shows the client asking to log in and a form for an API key of your tenant. ' +
        'Answers text/html: 200 with the form, 404 for an unknown link, 410 once expired, 409 once approved.',
      tags: ['auth'],
      params: LoginPagePath,
      status: 200,
      errors: [404, 409, 410],
      handler: async ({ params, req, res }) => {
        const flow = await findFlow(deps, params.approval_id);
        if (sendClosedFlow(res, flow)) return;
        renderForm(req, res, flow!, 200, randomBytes(32).toString('base64url'));
      },
    })
    .route({
      method: 'post',
      path: '/login/{approval_id}',
      access: 'public',
      summary: 'Approve a login (form post from the approval page)',
      description:
        'Form-encoded (or JSON) `api_key` and `csrf_token`. With a live API key, mints a bearer token acting with that ' +
        "key's tenant and role and hands it to the waiting client; answers an HTML page either way " +
        '(401 for a bad key, 403 for a missing or wrong CSRF token or a foreign Origin).',
      tags: ['auth'],
      params: LoginPagePath,
      body: LoginApproveBody,
      status: 200,
      errors: [401, 403, 404, 409, 410, 429],
      handler: async ({ params, body, req, res }) => {
        deps.approveLimiter.take(req.ip ?? 'unknown');
        const cookie = cookieValue(req.headers, CSRF_COOKIE);
        if (!sameSite(req.get('origin'), publicOrigin(req, deps.publicUrl)) || !sameSecret(cookie, body.csrf_token)) {
          sendPage(
            res,
            403,
            'Approval refused',
            message('error', 'This form was not sent from its own page, or the page is too old.', 'Open the login link again and approve from there.'),
          );
          return;
        }
        const flow = await findFlow(deps, params.approval_id);
        if (sendClosedFlow(res, flow)) return;
        const apiKey = (body.api_key ?? '').trim();
        // A key that looks wrong, is revoked or expired gets the same answer; the input is not echoed.
        const principal = apiKey ? await deps.store.verifyApiKey(apiKey) : undefined;
        if (!principal || principal.credential.type !== 'api_key') {
          renderForm(req, res, flow!, 401, cookie!, apiKey ? 'That API key is not valid (unknown, revoked or expired).' : 'Paste an API key first.');
          return;
        }
        const { token } = await deps.store.issueAccessToken({
          apiKeyId: principal.credential.id,
          tenantId: principal.tenantId,
          ttlSeconds: deps.tokenTtlSeconds,
        });
        try {
          await deps.controlPlane.authFlows.completeFlow({ approvalId: params.approval_id, token, tenantId: principal.tenantId });
        } catch (error) {
          // The flow expired or was approved in another tab meanwhile; the minted token is never shown.
          if (isBerthError(error) && (error.code === 'conflict' || error.code === 'not_found')) {
            const now = await findFlow(deps, params.approval_id);
            if (!sendClosedFlow(res, now)) sendPage(res, 410, 'Login link expired', message('error', 'This login link has expired.', RUN_AGAIN));
            return;
          }
          throw error;
        }
        res.clearCookie(CSRF_COOKIE, { path: req.path });
        const tenant = await deps.store.getTenant(principal.tenantId);
        sendPage(
          res,
          200,
          'Login approved',
          message(
            'ok',
            `Approved: berth login now acts for tenant "${tenant.name}" (${principal.role}).`,
            'You can close this page and return to your terminal.',
          ),
        );
      },
    });
}
