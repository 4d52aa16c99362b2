/**
 * Request and response schemas of the LangSmith-compatible trace API, in the shapes the
 * `langsmith` client sends and parses (its `Run`, `TracerSession` and `listRuns` body).
 */
import { z } from 'zod';
import { Uuid } from '@berth/ids';

const json = z.unknown();
const time = z.union([z.iso.datetime({ offset: true, local: true }), z.iso.date()]);

/** A run as read back (GET /runs/{id}, POST /runs/query). */
export const RunOut = z.object({
  id: Uuid,
  name: z.string().optional(),
  run_type: z.string().optional(),
  start_time: z.string().optional(),
  end_time: z.string().nullable().optional(),
  status: z.string().optional().describe('success, error or pending'),
  is_root: z.boolean().optional(),
  session_id: Uuid.optional(),
  trace_id: Uuid.optional(),
  dotted_order: z.string().nullable().optional(),
  parent_run_id: Uuid.nullable().optional(),
  parent_run_ids: z.array(z.string()).optional(),
  reference_example_id: Uuid.nullable().optional(),
  inputs: json.optional(),
  outputs: json.optional(),
  error: z.string().nullable().optional(),
  extra: json.optional().describe('Run metadata is under extra.metadata'),
  events: json.optional(),
  tags: z.array(z.string()).optional(),
  feedback_stats: json.optional(),
  prompt_tokens: z.number().nullable().optional(),
  completion_tokens: z.number().nullable().optional(),
  total_tokens: z.number().nullable().optional(),
  prompt_cost: z.number().nullable().optional(),
  completion_cost: z.number().nullable().optional(),
  total_cost: z.number().nullable().optional(),
  first_token_time: z.string().nullable().optional(),
  trace_tier: z.string().nullable().optional(),
  child_run_ids: z.array(z.string()).nullable().optional(),
  serialized: json.optional(),
});

export const RunPath = z.object({ run_id: z.string() });

/**
 * A run create or patch (POST /runs, PATCH /runs/{id}, items of /runs/batch). Loose on purpose:
 * every field is checked by the trace store, a malformed run is refused with its reason, and a
 * field a newer client adds is kept under extra.unrecognized_fields instead of failing the call.
 */
export const RunIn = z
  .record(z.string(), z.unknown())
  .describe(
    "A run in LangSmith's shape: id, name, run_type, start_time, end_time, inputs, outputs, error, extra (metadata under " +
      'extra.metadata), events, tags, trace_id, dotted_order, parent_run_id, session_name or session_id, token counts.',
  );

export const BatchIn = z.strictObject({
  post: z.array(RunIn).optional(),
  patch: z.array(RunIn).optional(),
});

export const IngestOut = z.object({
  stored: z.number().int().describe('Operations applied to their run'),
  pending: z.number().int().describe("Patches waiting for their run's create"),
  refused: z.array(z.object({ id: z.string(), reason: z.string() })).describe('Malformed operations, not stored (the rest were)'),
  ignored_parts: z.number().int().optional().describe('Multipart parts this store does not keep (attachments)'),
});

const nullable = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

/** What `client.listRuns` sends. */
export const QueryRunsIn = z.strictObject({
  session: nullable(z.array(Uuid)).describe('Project ids'),
  id: nullable(z.array(Uuid)),
  trace: nullable(Uuid),
  parent_run: nullable(Uuid),
  reference_example: nullable(z.union([Uuid, z.array(Uuid).max(1)])),
  run_type: nullable(z.string()),
  error: nullable(z.boolean()),
  is_root: nullable(z.boolean()),
  start_time: nullable(time).describe('Runs that started at or after'),
  end_time: nullable(time).describe('Runs that started before'),
  filter: nullable(z.string()),
  trace_filter: nullable(z.string()).describe("Filter on the root run of each run's trace"),
  tree_filter: nullable(z.string()).describe("Filter on any run of each run's trace"),
  query: nullable(z.string()).describe('Text searched in name, error, inputs and outputs'),
  execution_order: nullable(z.number().int()).describe('Accepted for old clients; 1 means root runs'),
  select: nullable(z.array(z.string().max(100)).max(100)).describe(
    'Fields to answer (id always; only those are read, so a table of names and times stays fast); all when absent. Fields this server does not keep are left out.',
  ),
  order: nullable(z.enum(['asc', 'desc'])).describe('By start_time; desc (newest first) by default'),
  limit: nullable(z.number().int().min(1).max(100)),
  cursor: nullable(z.string()),
});

export const QueryRunsOut = z.object({
  runs: z.array(RunOut),
  cursors: z.object({ next: z.string().nullable() }),
});

/**
 * Statistics of a set of runs, under the names LangSmith's project stats use. Latency is end_time
 * minus start_time of the finished runs, in seconds (null when none finished).
 */
export const RunStatsOut = z.object({
  run_count: z.number().int(),
  error_rate: z.number().nullable().describe('Share of the runs that have an error, 0 to 1; null without runs'),
  latency_p50: z.number().nullable().describe('Seconds'),
  latency_p99: z.number().nullable().describe('Seconds'),
  prompt_tokens: z.number().int(),
  completion_tokens: z.number().int(),
  total_tokens: z.number().int(),
  prompt_cost: z.number(),
  completion_cost: z.number(),
  total_cost: z.number(),
  last_run_start_time: z.string().nullable(),
});

/** LangSmith's trace tiers: base (14 days unless the operator says otherwise) and extended (400). */
const TRACE_TIERS = ['shortlived', 'longlived'] as const;
const TraceTier = z.enum(TRACE_TIERS);

/** A tracing project in LangSmith's TracerSession shape. */
export const SessionOut = z.object({
  id: Uuid,
  tenant_id: Uuid,
  name: z.string(),
  description: z.string().nullable(),
  start_time: z.string(),
  end_time: z.string().nullable(),
  extra: z.record(z.string(), z.unknown()).describe('Project metadata is under extra.metadata'),
  reference_dataset_id: Uuid.nullable(),
  trace_tier: TraceTier.describe("How long the project's new traces are kept: shortlived (base tier) or longlived (extended)"),
  retention_days: z.number().int().describe("Days the project's new traces are kept (its tier's, as the operator set it for the tenant)"),
  ...RunStatsOut.partial().shape,
});

export const SessionPath = z.object({ session_id: z.string() });

const SessionFields = {
  name: z.string().min(1).max(500),
  description: nullable(z.string().max(10_000)),
  extra: nullable(z.record(z.string(), z.unknown())),
  end_time: nullable(time),
};

export const CreateSessionIn = z.strictObject({
  ...SessionFields,
  id: nullable(Uuid),
  start_time: nullable(time).describe('Ignored: a project starts when it is created'),
  reference_dataset_id: nullable(Uuid),
  default_dataset_id: nullable(Uuid).describe('Accepted, not used'),
  trace_tier: nullable(TraceTier).describe("shortlived (base tier) or longlived (extended); the tenant's default when absent"),
  num_examples: nullable(z.number().int()).describe('Accepted, not used'),
  num_repetitions: nullable(z.number().int()).describe('Accepted, not used'),
  evaluator_keys: nullable(z.array(z.string())).describe('Accepted, not used'),
  tag_value_ids: nullable(z.array(z.string())).describe('Accepted, not used'),
});

export const CreateSessionQuery = z.strictObject({
  upsert: z.stringbool().optional().describe('Answer the existing project of this name instead of 409'),
});

export const UpdateSessionIn = z.strictObject({
  name: nullable(SessionFields.name),
  description: SessionFields.description,
  extra: SessionFields.extra,
  end_time: SessionFields.end_time,
  trace_tier: nullable(TraceTier).describe('Applies to the traces that arrive after'),
});

const StatsQueryFields = {
  include_stats: z.stringbool().optional().describe('Add the stats of its runs: run_count, error_rate, latency_p50/p99, tokens, costs, last_run_start_time'),
  stats_start_time: time.optional().describe('Stats count the runs that started at or after (all when absent)'),
  stats_end_time: time.optional().describe('Stats count the runs that started before (a Berth addition; all when absent)'),
};

export const GetSessionQuery = z.strictObject(StatsQueryFields);

export const ListSessionsQuery = z.strictObject({
  id: z
    .union([z.string(), z.array(z.string())])
    .optional()
    .describe('Project ids (repeat the parameter)'),
  name: z.string().optional(),
  name_contains: z.string().optional(),
  reference_dataset: z.string().optional(),
  ...StatsQueryFields,
  limit: z.coerce.number().int().min(1).max(100).default(100),
  offset: z.coerce.number().int().min(0).default(0),
});

export const SessionListOut = z.array(SessionOut);

export const ProjectStatsIn = z.strictObject({
  session: z.array(Uuid).min(1).max(100).describe('Project ids'),
  start_time: nullable(time).describe('Runs that started at or after; a day before end_time by default'),
  end_time: nullable(time).describe('Runs that started before; now by default'),
  bucket_seconds: nullable(z.number().int().min(1).max(315_360_000)).describe(
    `Bucket size; by default the smallest of 1 s, 5 s, 10 s, 30 s, 1 min, 5 min, ... 1 day, 7 days, 30 days giving at most 120 buckets. At most 1000 buckets.`,
  ),
  filter: nullable(z.string()).describe('Count only the runs matching this filter (the filter language of /runs/query)'),
  is_root: nullable(z.boolean()).describe('Count only root runs (traces), or only child runs'),
});

export const ProjectStatsOut = z.object({
  start_time: z.string(),
  end_time: z.string(),
  bucket_seconds: z.number().int(),
  projects: z.array(
    z.object({
      session_id: Uuid,
      stats: RunStatsOut.describe('Totals over the range'),
      buckets: z
        .array(z.object({ start_time: z.string(), stats: RunStatsOut }))
        .describe('Every bucket of the range in order, empty ones included; the last may end after end_time'),
    }),
  ),
});

export const ValidateFilterIn = z.strictObject({
  filter: nullable(z.string()),
  trace_filter: nullable(z.string()),
  tree_filter: nullable(z.string()),
});

export const ValidateFilterOut = z.object({ valid: z.literal(true) });

export const InfoOut = z.object({
  version: z.string().describe('The LangSmith version whose API this server matches'),
  berth_version: z.string().describe("Berth's own version"),
  license_expiration_time: z.null(),
  batch_ingest_config: z.object({
    use_multipart_endpoint: z.boolean(),
    scale_up_qsize_trigger: z.number().int(),
    scale_up_nthreads_limit: z.number().int(),
    scale_down_nempty_trigger: z.number().int(),
    size_limit: z.number().int().describe('Most run operations per ingest request'),
    size_limit_bytes: z.number().int().describe('Most uncompressed bytes per ingest request the client should send'),
  }),
  instance_flags: z.record(z.string(), z.boolean()),
});
