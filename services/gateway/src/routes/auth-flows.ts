/**
 * Login flows over HTTP: `POST /v2/auth/login` starts one, `GET /v2/auth/wait/{auth_id}` waits
 * for its approval (A1 of the platform interface). Both are public: the client asking has no
 * credential yet — obtaining one is the point — so the unguessable auth_id is the credential.
 */
import { timestampDate, WaitStatus } from '@berth/proto';
import type { ControlPlaneClients } from '../control-plane.js';
import { publicOrigin } from '../public-url.js';
import type { RateLimiter } from '../rate-limit.js';
import { AuthWaitPath, AuthWaitQuery, AuthWaitResponse, LoginStartBody, LoginStartOut } from '../schemas.js';
import type { GatewayApi } from '../access.js';

export interface AuthFlowRouteDeps {
  controlPlane: ControlPlaneClients;
  /** Limits `POST /v2/auth/login` per client address. */
  loginLimiter: RateLimiter;
  /** Base URL of approval links (BERTH_PUBLIC_URL); the gateway's own address when unset, never a request header. */
  publicUrl?: string;
}

const waitStatus: Record<WaitStatus, 'completed' | 'pending' | 'timeout' | 'not_found'> = {
  [WaitStatus.COMPLETED]: 'completed',
  [WaitStatus.PENDING]: 'pending',
  [WaitStatus.TIMEOUT]: 'timeout',
  [WaitStatus.NOT_FOUND]: 'not_found',
  // Never sent by the control plane; an older or broken one is treated as "still waiting".
  [WaitStatus.UNSPECIFIED]: 'pending',
};

// routes/deployments.ts builds deployment URLs with it too.
export { publicOrigin };

export function authFlowRoutes(api: GatewayApi, deps: AuthFlowRouteDeps): void {
  api
    .route({
      method: 'post',
      path: '/v2/auth/login',
      access: 'public',
      summary: 'Start a login flow (berth login)',
      description:
        'Public and rate-limited per client address. Returns `auth_id`, the secret to wait on with ' +
        '`GET /v2/auth/wait/{auth_id}` (keep it to yourself), and `url`, the approval page to open in a browser, where ' +
        'a person pastes an API key of their tenant to approve. The two are different secrets, so a leaked approval ' +
        'link cannot be used to collect the token. The flow expires at `expires_at` (10 minutes by default).',
      tags: ['auth'],
      body: LoginStartBody,
      status: 201,
      response: LoginStartOut,
      errors: [429, 503],
      handler: async ({ body, req }) => {
        deps.loginLimiter.take(req.ip ?? 'unknown');
        const started = await deps.controlPlane.authFlows.startFlow({ clientName: body.client_name ?? '' });
        return {
          auth_id: started.authId,
          url: `${publicOrigin(req, deps.publicUrl)}/login/${started.approvalId}`,
          expires_at: timestampDate(started.flow!.expiresAt!).toISOString(),
        };
      },
    })
    .route({
      method: 'get',
      path: '/v2/auth/wait/{auth_id}',
      access: 'public',
      summary: 'Wait for a login flow to complete',
      description:
        'Long-polls for up to `timeout` seconds (0 to 300, default 30) and answers as soon as the flow is approved. ' +
        '`completed` carries the bearer token — once: only the first answer after approval has it, later ones have ' +
        '`token: null`. `timeout`: still pending after the whole timeout. `pending`: still pending, the wait ended ' +
        'early (`timeout=0` just checks, or the service is restarting). `not_found`: unknown or expired auth_id.\n\n' +
        'Auth: none. The caller is a client logging in, which has no credential yet; the auth_id returned by ' +
        '`POST /v2/auth/login` (256 random bits, stored only as a digest) is the capability for this flow, so API key, ' +
        'tenant id and bearer headers are neither needed nor checked here.',
      tags: ['auth'],
      params: AuthWaitPath,
      query: AuthWaitQuery,
      response: AuthWaitResponse,
      errors: [503],
      handler: async ({ params, query, res }) => {
        res.setHeader('Cache-Control', 'no-store');
        // A client that hangs up ends the wait on the control plane too.
        const controller = new AbortController();
        const onClose = () => {
          if (!res.writableEnded) controller.abort();
        };
        res.once('close', onClose);
        try {
          const timeoutMs = query.timeout * 1000;
          const answer = await deps.controlPlane.authFlows.wait(
            { authId: params.auth_id, timeoutMs },
            { timeoutMs: timeoutMs + 10_000, signal: controller.signal },
          );
          return { status: waitStatus[answer.status], token: answer.token ?? null };
        } catch (error) {
          // Nobody is left to answer; do not log a failure for it.
          if (controller.signal.aborted) return { status: 'pending' as const, token: null };
          throw error;
        } finally {
          res.off('close', onClose);
        }
      },
    });
}
