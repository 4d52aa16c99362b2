/**
 * /runs/crons — runs started on a schedule: stateless crons (a new thread per tick) and thread
 * crons (each tick runs on the thread). Ticks are fired by the worker role (runs/cron-scheduler.ts).
 *
 * Authorization events (custom auth): create → `crons:create` (its filter also applies to the
 * thread of a thread cron; its edits of `value.metadata` become the cron's metadata); get →
 * `crons:read`; patch → `crons:update`; delete → `crons:delete`; search and count →
 * `crons:search`. A cron outside the handler's filter (on the cron's metadata) is a 404. A tick's
 * run is not authorized again: the cron was.
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError } from '@berth/errors';
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import { metadataOf, type RequestAuth } from '../auth/index.js';
import { scheduleProblem, timezoneProblem } from '../runs/cron-schedule.js';
import type { CronPayload } from '../runs/cron-scheduler.js';
import type { Cron as CronRow, CronChanges } from '../storage/crons.js';
import type { JsonObject } from '../storage/sql.js';
import { checkContext } from './assistants.js';
import type { ServerContext } from './context.js';
import { AssistantRef, JsonObject as JsonObjectSchema, Page, RunCreate, Selected, SortOrder, ThreadPath, Timestamp, iso } from './schemas.js';
import type { AgentApi } from './access.js';

const problem = (check: (value: string) => string | undefined) => (value: string, ctx: z.core.$RefinementCtx<string>) => {
  const message = check(value);
  if (message) ctx.addIssue({ code: 'custom', message });
};
/** A 5-field cron schedule (minute hour day-of-month month day-of-week) or a macro such as @daily. */
const Schedule = z.string().superRefine(problem(scheduleProblem));
/** An IANA time zone; the schedule is read in UTC without one. */
const Timezone = z.string().superRefine(problem(timezoneProblem));
const OnRunCompleted = z.enum(['delete', 'keep']);

/** The run fields a cron keeps in its payload, as RunCreate declares them. */
const RunFields = {
  ...RunCreate.pick({
    input: true,
    config: true,
    context: true,
    stream_mode: true,
    stream_subgraphs: true,
    stream_resumable: true,
    interrupt_before: true,
    interrupt_after: true,
    multitask_strategy: true,
    durability: true,
  }).shape,
  /** Called with the run when each tick's run ends. */
  webhook: z.string().min(1).optional(),
};

const CronCreate = z.strictObject({
  assistant_id: AssistantRef,
  schedule: Schedule,
  timezone: Timezone.optional(),
  end_time: Timestamp.optional(),
  enabled: z.boolean().default(true),
  /** Stateless crons: keep or delete (default) each tick's thread once its run has ended. */
  on_run_completed: OnRunCompleted.optional(),
  metadata: JsonObjectSchema.optional(),
  ...RunFields,
  /** Accepted for compatibility (the SDK sends it); `durability` supersedes it. */
  checkpoint_during: z.boolean().optional(),
});

const CronPatch = z.strictObject({
  schedule: Schedule.optional(),
  timezone: Timezone.nullable().optional(),
  /** null clears it. */
  end_time: Timestamp.nullable().optional(),
  enabled: z.boolean().optional(),
  on_run_completed: OnRunCompleted.optional(),
  /** Merged into the cron's metadata. */
  metadata: JsonObjectSchema.optional(),
  ...RunFields,
});

const CRON_FIELDS = [
  'cron_id',
  'assistant_id',
  'thread_id',
  'on_run_completed',
  'end_time',
  'schedule',
  'timezone',
  'created_at',
  'updated_at',
  'payload',
  'user_id',
  'next_run_date',
  'metadata',
  'enabled',
] as const;
const CronSearch = z.strictObject({
  assistant_id: AssistantRef.optional(),
  thread_id: Uuid.optional(),
  enabled: z.boolean().optional(),
  metadata: JsonObjectSchema.optional(),
  ...Page,
  sort_by: z.enum(['cron_id', 'assistant_id', 'thread_id', 'next_run_date', 'end_time', 'created_at', 'updated_at']).optional(),
  sort_order: SortOrder,
  /** `now` (the server's clock) is a field the SDK offers beside the cron's own. */
  select: z.array(z.enum([...CRON_FIELDS, 'now'])).optional(),
});
const CronCount = CronSearch.pick({ assistant_id: true, thread_id: true, enabled: true, metadata: true });
const CronPath = z.strictObject({ cron_id: Uuid });

export const Cron = z
  .strictObject({
    cron_id: Uuid,
    assistant_id: Uuid,
    /** null for a stateless cron (a new thread per tick). */
    thread_id: Uuid.nullable(),
    on_run_completed: OnRunCompleted.nullable(),
    end_time: Timestamp.nullable(),
    schedule: z.string(),
    /** null: UTC. */
    timezone: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    /** The run fields of each tick (input, config, context, stream_mode, webhook, …). */
    payload: JsonObjectSchema,
    user_id: z.string().nullable(),
    /** The next tick; null while paused or once end_time has passed. */
    next_run_date: Timestamp.nullable(),
    metadata: JsonObjectSchema,
    enabled: z.boolean(),
  })
  .meta({ id: 'Cron' });

function cronJson(c: CronRow) {
  return {
    cron_id: c.cron_id,
    assistant_id: c.assistant_id,
    thread_id: c.thread_id,
    on_run_completed: c.on_run_completed,
    end_time: iso(c.end_time),
    schedule: c.schedule,
    timezone: c.timezone,
    created_at: c.created_at.toISOString(),
    updated_at: c.updated_at.toISOString(),
    payload: c.payload,
    user_id: c.user_id,
    next_run_date: iso(c.next_run_date),
    metadata: c.metadata,
    enabled: c.enabled,
  };
}

/** The run fields of a body, without the ones it leaves out. */
function payloadOf(body: Partial<Record<keyof typeof RunFields, unknown>>): CronPayload {
  return Object.fromEntries(
    Object.keys(RunFields).flatMap((key) => (body[key as keyof typeof RunFields] === undefined ? [] : [[key, body[key as keyof typeof RunFields]]])),
  );
}

export function cronRoutes(api: AgentApi, ctx: ServerContext): void {
  const tags = ['crons'];

  /** Queues the cron's next tick. Should the queue fail, the cron is saved and a worker's sweep queues the tick once it is due. */
  const schedule = async (cron: CronRow) => {
    await ctx.cronScheduler
      .schedule(cron)
      .catch((error: unknown) => ctx.log.warn({ err: error, cronId: cron.cron_id }, "could not queue the cron's next tick; the sweep will"));
  };

  /** A graph name stands for its system assistant; an assistant that does not exist matches no cron. */
  const assistantFilter = async (ref: string | undefined): Promise<string | null | undefined> => {
    if (ref === undefined) return undefined;
    try {
      return (await ctx.resolveAssistant(ref)).assistant_id;
    } catch (error) {
      if (error instanceof NotFoundError) return null;
      throw error;
    }
  };

  async function create(threadId: string | undefined, body: z.output<typeof CronCreate>, auth: RequestAuth) {
    const assistant = await ctx.resolveAssistant(body.assistant_id);
    if (body.context) checkContext(ctx, assistant.graph_id, body.context, ['body', 'context']);
    // Checked now, not at the first tick: a refused webhook would fail every tick's run.
    if (body.webhook !== undefined) await ctx.runService.checkWebhook(body.webhook);
    const payload = payloadOf(body);
    const request = {
      cron_id: randomUUID(),
      thread_id: threadId ?? null,
      user_id: auth?.user.identity ?? null,
      schedule: body.schedule,
      end_time: body.end_time ?? null,
      payload,
      metadata: (body.metadata ?? {}) as JsonObject,
    };
    const { filter, value } = await ctx.authz.authorize(auth, 'crons:create', request);
    const fields = {
      schedule: body.schedule,
      timezone: body.timezone ?? null,
      end_time: body.end_time ? new Date(body.end_time) : null,
      enabled: body.enabled,
    };
    const cron = await ctx.crons.create(
      {
        ...request,
        ...fields,
        assistant_id: assistant.assistant_id,
        payload: payload as JsonObject,
        metadata: metadataOf(value, 'crons:create'),
        on_run_completed: body.on_run_completed ?? (threadId ? null : 'delete'),
        next_run_date: ctx.cronScheduler.upcoming(fields),
      },
      filter,
    );
    await schedule(cron);
    return cronJson(cron);
  }

  api
    .route({
      method: 'post',
      path: '/runs/crons',
      access: ['custom_auth'],
      summary: 'Create a stateless cron: each tick runs on a new thread',
      tags,
      body: CronCreate,
      response: Cron,
      errors: [404],
      handler: async ({ body, auth }) => create(undefined, body, auth),
    })
    .route({
      method: 'post',
      path: '/threads/{thread_id}/runs/crons',
      access: ['custom_auth'],
      summary: 'Create a cron on a thread: each tick runs on it (multitask_strategy enqueue by default)',
      tags,
      params: ThreadPath,
      body: CronCreate,
      response: Cron,
      errors: [404],
      handler: async ({ params, body, auth }) => create(params.thread_id, body, auth),
    })
    .route({
      method: 'post',
      path: '/runs/crons/search',
      access: ['custom_auth'],
      summary: 'Search crons',
      tags,
      body: CronSearch,
      response: Selected(Cron.extend({ now: Timestamp })),
      handler: async ({ body, res, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'crons:search', { ...body });
        const assistantId = await assistantFilter(body.assistant_id);
        if (assistantId === null) return [];
        const query = { ...body, assistant_id: assistantId, metadata: body.metadata as JsonObject | undefined, filter };
        const [found, total] = await Promise.all([ctx.crons.search(query), ctx.crons.count(query)]);
        res.setHeader('X-Pagination-Total', String(total));
        if (body.offset + found.length < total) res.setHeader('X-Pagination-Next', String(body.offset + found.length));
        const now = new Date().toISOString();
        return found.map((c) => {
          const json = { ...cronJson(c), now };
          return body.select?.length
            ? Object.fromEntries(Object.entries(json).filter(([k]) => body.select!.includes(k as (typeof body.select)[number])))
            : cronJson(c);
        });
      },
    })
    .route({
      method: 'post',
      path: '/runs/crons/count',
      access: ['custom_auth'],
      summary: 'Count crons',
      tags,
      body: CronCount,
      response: z.number().int(),
      handler: async ({ body, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'crons:search', { ...body });
        const assistantId = await assistantFilter(body.assistant_id);
        if (assistantId === null) return 0;
        return ctx.crons.count({ ...body, assistant_id: assistantId, metadata: body.metadata as JsonObject | undefined, filter });
      },
    })
    .route({
      method: 'get',
      path: '/runs/crons/{cron_id}',
      access: ['custom_auth'],
      summary: 'Get a cron',
      tags,
      params: CronPath,
      response: Cron,
      errors: [404],
      handler: async ({ params, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'crons:read', { cron_id: params.cron_id });
        return cronJson(await ctx.crons.get(params.cron_id, filter));
      },
    })
    .route({
      method: 'patch',
      path: '/runs/crons/{cron_id}',
      access: ['custom_auth'],
      summary: 'Change a cron (enabled: false pauses it; a new schedule, time zone or end_time reschedules it)',
      tags,
      params: CronPath,
      body: CronPatch,
      response: Cron,
      errors: [404],
      handler: async ({ params, body, auth }) => {
        if (body.webhook !== undefined) await ctx.runService.checkWebhook(body.webhook);
        const payload = payloadOf(body);
        const request = { cron_id: params.cron_id, schedule: body.schedule, payload, metadata: body.metadata as JsonObject | undefined };
        const { filter, value } = await ctx.authz.authorize(auth, 'crons:update', request);
        const current = await ctx.crons.get(params.cron_id, filter);
        if (body.context) checkContext(ctx, (await ctx.resolveAssistant(current.assistant_id)).graph_id, body.context, ['body', 'context']);
        const fields = {
          schedule: body.schedule ?? current.schedule,
          timezone: body.timezone === undefined ? current.timezone : body.timezone,
          end_time: body.end_time === undefined ? current.end_time : body.end_time === null ? null : new Date(body.end_time),
          enabled: body.enabled ?? current.enabled,
        };
        const retimed = body.schedule !== undefined || body.timezone !== undefined || body.end_time !== undefined || body.enabled !== undefined;
        const changes: CronChanges = {
          ...fields,
          ...(body.on_run_completed ? { on_run_completed: body.on_run_completed } : {}),
          ...(Object.keys(payload).length ? { payload: { ...current.payload, ...(payload as JsonObject) } } : {}),
          ...(value.metadata === undefined ? {} : { metadata: metadataOf(value, 'crons:update') }),
          ...(retimed ? { next_run_date: ctx.cronScheduler.upcoming(fields) } : {}),
        };
        const cron = await ctx.crons.patch(params.cron_id, changes, filter);
        if (retimed) await schedule(cron);
        return cronJson(cron);
      },
    })
    .route({
      method: 'delete',
      path: '/runs/crons/{cron_id}',
      access: ['custom_auth'],
      summary: 'Delete a cron: it fires no more',
      tags,
      params: CronPath,
      errors: [404],
      handler: async ({ params, auth }) => {
        const { filter } = await ctx.authz.authorize(auth, 'crons:delete', { cron_id: params.cron_id });
        await ctx.crons.delete(params.cron_id, filter);
      },
    });
}
