/**
 * The delivery records of a run's webhook: `GET /threads/{thread_id}/runs/{run_id}/webhooks`
 * (custom auth: `threads:read`, like reading the run). The run's own wire format is unchanged.
 */
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import type { WebhookRecord, WebhookStore } from '../storage/webhooks.js';
import type { ServerContext } from './context.js';
import { RunPath, iso } from './schemas.js';
import type { AgentApi } from './access.js';

const Timestamp = z.iso.datetime({ offset: true });

export const WebhookDelivery = z
  .strictObject({
    webhook_id: Uuid,
    run_id: Uuid,
    thread_id: Uuid,
    url: z.string(),
    /** `pending` while attempts remain, then `delivered` (a 2xx answer) or `failed`. */
    state: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    /** The receiver's status code at the last attempt (null when it did not answer). */
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    delivered_at: Timestamp.nullable(),
  })
  .meta({ id: 'WebhookDelivery' });

function deliveryJson(w: WebhookRecord): z.input<typeof WebhookDelivery> {
  return {
    webhook_id: w.webhook_id,
    run_id: w.run_id,
    thread_id: w.thread_id,
    url: w.url,
    state: w.state,
    attempts: w.attempts,
    last_status_code: w.last_status_code,
    last_error: w.last_error,
    created_at: iso(w.created_at),
    updated_at: iso(w.updated_at),
    delivered_at: iso(w.delivered_at),
  };
}

export function webhookRoutes(api: AgentApi, ctx: ServerContext, webhooks: WebhookStore): void {
  api.route({
    method: 'get',
    path: '/threads/{thread_id}/runs/{run_id}/webhooks',
    access: ['custom_auth'],
    summary: "The deliveries of a run's webhook (attempts, last status code and error)",
    tags: ['runs'],
    params: RunPath,
    response: z.array(WebhookDelivery),
    errors: [404],
    handler: async ({ params, auth }) => {
      const { filter } = await ctx.authz.authorize(auth, 'threads:read', { thread_id: params.thread_id, run_id: params.run_id });
      await ctx.runs.get(params.thread_id, params.run_id, filter);
      return (await webhooks.listForRun(params.run_id)).map(deliveryJson);
    },
  });
}
