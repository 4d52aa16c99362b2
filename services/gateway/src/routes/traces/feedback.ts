/**
 * LangSmith's feedback API (`/feedback…`): scores, values, comments and corrections on runs,
 * translated to `FeedbackService` calls on the export-worker, and the `feedback.<id>` parts of
 * multipart ingest. Another tenant's run or feedback is a 404, as is one outside the project of a
 * caller bound to one (a deployment's tracing credential). Each run's `feedback_stats` follows.
 */
import type { Principal } from '@berth/auth';
import { Uuid } from '@berth/ids';
import { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import type { GatewayApi } from '../../access.js';
import type { MultipartPart } from './multipart.js';
import { scopedSessionIds } from './scope.js';

const nullable = <T extends z.ZodType>(schema: T) => schema.nullable().optional();
const Score = z.union([z.number(), z.boolean()]).describe('A number (the client rounds to 4 decimals) or a boolean (stored as 1 or 0)');

/** What `client.createFeedback` sends (fields this store does not keep are accepted and described as such). */
export const CreateFeedbackIn = z.strictObject({
  id: nullable(Uuid).describe('Chosen by the client (a retry of the same feedback answers the stored one); made up when absent'),
  run_id: Uuid.describe('The run the feedback is on (feedback on a whole project is not supported)'),
  key: z.string().min(1).max(200),
  score: nullable(Score),
  value: z.unknown().optional().describe('Any JSON: a label, a number, an object'),
  comment: nullable(z.string()),
  correction: z.unknown().optional().describe('Any JSON: what the run should have answered'),
  feedback_source: nullable(z.object({ type: nullable(z.string().max(100)), metadata: nullable(z.record(z.string(), z.unknown())) }).loose()).describe(
    '`type` (api, model, app, ...) and `metadata`; other fields are not kept',
  ),
  session_id: nullable(Uuid).describe("The run's project: when given, a run of another project is a 404"),
  trace_id: nullable(Uuid).describe("Ignored: the run's own trace is recorded"),
  comparative_experiment_id: nullable(Uuid),
  feedback_group_id: nullable(Uuid),
  start_time: nullable(z.union([z.string(), z.number()])).describe('Accepted, not kept'),
  created_at: nullable(z.string()).describe('Accepted, not kept: feedback is timed when stored'),
  modified_at: nullable(z.string()).describe('Accepted, not kept'),
  extend_trace_retention: nullable(z.boolean()).describe('Accepted, not used'),
  feedbackConfig: z.unknown().optional().describe('Accepted, not kept'),
  feedback_config: z.unknown().optional().describe('Accepted, not kept'),
  address: z.unknown().optional().describe('Accepted, not used'),
});

/** What `client.updateFeedback` sends: the fields given are set, null clears one. */
export const UpdateFeedbackIn = z.strictObject({
  score: nullable(Score),
  value: z.unknown().optional(),
  comment: nullable(z.string()),
  correction: z.unknown().optional(),
  feedback_config: z.unknown().optional().describe('Accepted, not kept'),
});

export const FeedbackOut = z.object({
  id: Uuid,
  created_at: z.string(),
  modified_at: z.string(),
  run_id: Uuid,
  trace_id: Uuid.nullable().describe('Null while the feedback waits for its run'),
  session_id: Uuid.nullable().describe('Null while the feedback waits for its run'),
  key: z.string(),
  score: z.number().nullable(),
  value: z.unknown(),
  comment: z.string().nullable(),
  correction: z.unknown(),
  feedback_source: z.object({ type: z.string(), metadata: z.record(z.string(), z.unknown()), user_id: z.string().nullable() }),
  comparative_experiment_id: Uuid.nullable(),
  feedback_group_id: Uuid.nullable(),
  extra: z.unknown(),
});

const Repeated = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .transform((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]));

/** What `client.listFeedback` sends, and LangSmith's other list filters this store answers. */
export const ListFeedbackQuery = z.strictObject({
  run: Repeated.describe('Run ids (repeat the parameter)'),
  key: Repeated.describe('Feedback keys'),
  source: Repeated.describe('feedback_source.type values'),
  session: Repeated.describe('Project ids'),
  has_comment: z.stringbool().optional(),
  has_score: z.stringbool().optional(),
  limit: z.coerce.number().int().min(1).max(100).default(100),
  offset: z.coerce.number().int().min(0).default(0),
});

export const FeedbackPath = z.object({ feedback_id: z.string() });

type FeedbackJson = z.input<typeof FeedbackOut>;

const documentOf = (text: string) => JSON.parse(text) as FeedbackJson;
/** The project a caller bound to one may touch, else '' (any of the tenant's). */
const scopeOf = (auth: Principal) => auth.tracingProject?.id ?? '';

/** Whether a multipart part is a feedback (`feedback.<id>`). */
export const isFeedbackPart = (part: MultipartPart) => part.name.startsWith('feedback.');

/**
 * Stores the `feedback.<id>` parts of a multipart batch (after its runs, which they may be on; one
 * on a run yet to come waits for it). A malformed one, or one on a run the caller cannot see, is
 * listed with its reason; the rest are kept.
 */
export async function ingestFeedbackParts(exportWorker: ExportWorkerClients, auth: Principal, parts: MultipartPart[]) {
  if (parts.length === 0) return { stored: 0, refused: [] };
  const answer = await exportWorker.feedback.ingestFeedback({
    tenantId: auth.tenantId,
    sessionId: scopeOf(auth),
    feedbackJson: parts.map((part) => part.data.toString('utf8')),
  });
  return {
    stored: answer.storedIds.length,
    refused: answer.refused.map((r) => ({ id: r.id || parts[r.index]!.name.slice('feedback.'.length), reason: `feedback: ${r.reason}` })),
  };
}

export function feedbackRoutes(api: GatewayApi, deps: { exportWorker: ExportWorkerClients }): void {
  const tags = ['traces'];
  const rpc = () => deps.exportWorker.feedback;
  const access = ['api_key', 'access_token', 'session', 'tracing_credential'] as const;

  api
    .route({
      method: 'post',
      path: '/feedback',
      access: [...access],
      summary: 'Give feedback on a run',
      description:
        'What `client.createFeedback` sends when it does not batch (the client sends feedback with a `trace_id` as a ' +
        "`feedback.<id>` part of `POST /runs/multipart`). The run's `feedback_stats` (per key: `n`, `avg`, `stdev`, " +
        '`values`) is updated. Feedback on a run that has not arrived yet waits for it (answered with `trace_id` and ' +
        '`session_id` null; dropped after 24 h without its run). A run of another tenant (or project, for a bound ' +
        'credential) is a 404; 429 when the run has as much feedback as it may (1000); `value`, `correction` and ' +
        '`comment` hold at most 64 KiB each.',
      tags,
      body: CreateFeedbackIn,
      response: FeedbackOut,
      errors: [404, 409, 429, 503],
      handler: async ({ auth, body }) => {
        const answer = await rpc().createFeedback({ tenantId: auth.tenantId, sessionId: scopeOf(auth), feedbackJson: JSON.stringify(body) });
        return documentOf(answer.feedbackJson);
      },
    })
    .route({
      method: 'get',
      path: '/feedback',
      access: [...access],
      summary: 'List feedback',
      description: 'Newest first, `offset`/`limit` paging (a JSON array), by run, key, source type or project.',
      tags,
      query: ListFeedbackQuery,
      response: z.array(FeedbackOut),
      errors: [403, 503],
      handler: async ({ auth, query }) => {
        const answer = await rpc().listFeedback({
          tenantId: auth.tenantId,
          sessionIds: auth.tracingProject && query.session.length === 0 ? [auth.tracingProject.id] : scopedSessionIds(auth, query.session),
          runIds: query.run,
          keys: query.key,
          sourceTypes: query.source,
          ...(query.has_comment !== undefined ? { hasComment: query.has_comment } : {}),
          ...(query.has_score !== undefined ? { hasScore: query.has_score } : {}),
          limit: query.limit,
          offset: query.offset,
        });
        return answer.feedbackJson.map(documentOf);
      },
    })
    .route({
      method: 'get',
      path: '/feedback/{feedback_id}',
      access: [...access],
      summary: 'Get a feedback',
      tags,
      params: FeedbackPath,
      response: FeedbackOut,
      errors: [404, 503],
      handler: async ({ auth, params }) =>
        documentOf((await rpc().getFeedback({ tenantId: auth.tenantId, sessionId: scopeOf(auth), id: params.feedback_id })).feedbackJson),
    })
    .route({
      method: 'patch',
      path: '/feedback/{feedback_id}',
      access: [...access],
      summary: 'Update a feedback',
      description: "Sets the fields given (`score`, `value`, `comment`, `correction`; null clears one) and updates the run's `feedback_stats`.",
      tags,
      params: FeedbackPath,
      body: UpdateFeedbackIn,
      response: FeedbackOut,
      errors: [404, 503],
      handler: async ({ auth, params, body }) => {
        const answer = await rpc().updateFeedback({
          tenantId: auth.tenantId,
          sessionId: scopeOf(auth),
          id: params.feedback_id,
          updateJson: JSON.stringify(body),
        });
        return documentOf(answer.feedbackJson);
      },
    })
    .route({
      method: 'delete',
      path: '/feedback/{feedback_id}',
      access: [...access],
      summary: 'Delete a feedback',
      description: "The run's `feedback_stats` no longer counts it.",
      tags,
      params: FeedbackPath,
      errors: [404, 503],
      handler: async ({ auth, params }) => {
        await rpc().deleteFeedback({ tenantId: auth.tenantId, sessionId: scopeOf(auth), id: params.feedback_id });
      },
    });
}
