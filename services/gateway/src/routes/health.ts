import { RETRY_AFTER_SECONDS } from '@berth/http';
import { RpcCredentialsRefusedError } from '@berth/rpc';
import { z } from 'zod';
import type { GatewayApi } from '../access.js';

/**
 * A readiness check: resolves when the dependency works (optionally with a detail worth showing,
 * such as which backend answered), rejects with the reason otherwise.
 */
export type ReadinessCheck = () => Promise<string | void>;

/** How many deployments (of every tenant) have their serving revision down now. */
export type UnhealthyDeploymentsCount = () => Promise<number>;

const CheckOut = z.object({ status: z.enum(['ok', 'failing']), detail: z.string().optional() });

export interface HealthRouteOptions {
  /** What the gateway needs to serve: one failing makes /readyz a 503. */
  checks: Record<string, ReadinessCheck>;
  /**
   * Parts of the platform the gateway serves on without (sandboxes: their engine): one failing is
   * shown, and makes `status` "degraded", but /readyz stays 200 — a load balancer must not take
   * every gateway out of rotation for an outage no gateway can fix.
   */
  degradable?: Record<string, ReadinessCheck>;
  unhealthyDeployments?: UnhealthyDeploymentsCount;
  instanceId?: string;
  /** @default 2000 */
  timeoutMs?: number;
}

/**
 * `/healthz` and `/readyz`. Deployments that are down are shown in `/readyz` as a count but do not
 * make the gateway unready: one tenant's crashing code must not take the gateway out of its load
 * balancer. The count is left out when it cannot be had (the control plane's check says why).
 */
export function healthRoutes(api: GatewayApi, options: HealthRouteOptions): void {
  const { checks, degradable = {}, unhealthyDeployments, instanceId, timeoutMs = 2000 } = options;
  const run = (entries: Record<string, ReadinessCheck>) =>
    Promise.all(
      Object.entries(entries).map(async ([name, check]) => {
        try {
          const detail = await withTimeout(check(), timeoutMs);
          return [name, { status: 'ok' as const, ...(detail ? { detail } : {}) }] as const;
        } catch (error) {
          return [name, { status: 'failing' as const, detail: publicReason(error) }] as const;
        }
      }),
    );
  api
    .route({
      method: 'get',
      path: '/healthz',
      access: 'public',
      summary: 'Liveness: the gateway process answers',
      tags: ['health'],
      response: z.object({ status: z.literal('ok') }),
      handler: () => ({ status: 'ok' as const }),
    })
    .route({
      method: 'get',
      path: '/readyz',
      access: 'public',
      summary:
        'Readiness: Postgres and every internal service answer (503 otherwise); the sandbox engine (degraded, still 200, while it does not); how many deployments are down',
      tags: ['health'],
      response: z.object({
        status: z.enum(['ok', 'degraded', 'failing']).describe('failing (503): something the gateway needs is down; degraded (200): only sandboxes are'),
        checks: z.record(z.string(), CheckOut),
        unhealthy_deployments: z.number().int().optional().describe('Deployments whose agent server is down now (they do not make the gateway unready)'),
        instance_id: z
          .string()
          .optional()
          .describe('Differs at every start of the gateway: lets whoever started it tell its own process from another on the port'),
      }),
      errors: [503],
      handler: async ({ res }) => {
        const counting = unhealthyDeployments ? withTimeout(unhealthyDeployments(), timeoutMs).catch(() => undefined) : undefined;
        const [required, optional] = await Promise.all([run(checks), run(degradable)]);
        const ok = required.every(([, r]) => r.status === 'ok');
        const whole = ok && optional.every(([, r]) => r.status === 'ok');
        const unhealthy = await counting;
        res.status(ok ? 200 : 503);
        if (!ok) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
        return {
          status: whole ? ('ok' as const) : ok ? ('degraded' as const) : ('failing' as const),
          checks: Object.fromEntries([...required, ...optional]),
          ...(unhealthy !== undefined ? { unhealthy_deployments: unhealthy } : {}),
          ...(instanceId ? { instance_id: instanceId } : {}),
        };
      },
    });
}

/**
 * Why a check failed, as the public may see it: not the reason itself (hosts, driver text), only
 * the fixed texts of a timeout and of an internal service refusing the platform's credentials
 * (a misconfiguration worth naming).
 */
function publicReason(error: unknown): string {
  if (error instanceof CheckTimeout) return error.message;
  if (error instanceof RpcCredentialsRefusedError || (error as Error | undefined)?.cause instanceof RpcCredentialsRefusedError)
    return RpcCredentialsRefusedError.MESSAGE;
  return 'does not answer';
}

class CheckTimeout extends Error {
  override name = 'CheckTimeout';
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new CheckTimeout(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
