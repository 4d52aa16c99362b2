/**
 * Schemas of the read API the `langsmith` SDK's generated resource clients call (0.12:
 * `client.runs.query()`, `client.runs.retrieve()`, `client.traces.*`, `client.threads.*`): the
 * `/api/v2/...` shapes — `{items, next_cursor}` pages, upper-case enums, `selects` naming the fields
 * to answer (only `id` when absent).
 */
import { z } from 'zod';
import { Uuid } from '@berth/ids';

const time = z.union([z.iso.datetime({ offset: true, local: true }), z.iso.date()]);

/** The fields a v2 read may select; those this server does not keep are accepted and left out. */
export const RUN_SELECT_FIELDS = [
  'ID',
  'NAME',
  'RUN_TYPE',
  'STATUS',
  'START_TIME',
  'END_TIME',
  'LATENCY_SECONDS',
  'FIRST_TOKEN_TIME',
  'ERROR',
  'ERROR_PREVIEW',
  'EXTRA',
  'METADATA',
  'EVENTS',
  'INPUTS',
  'INPUTS_PREVIEW',
  'OUTPUTS',
  'OUTPUTS_PREVIEW',
  'MANIFEST',
  'PARENT_RUN_IDS',
  'PROJECT_ID',
  'TRACE_ID',
  'THREAD_ID',
  'DOTTED_ORDER',
  'IS_ROOT',
  'REFERENCE_EXAMPLE_ID',
  'REFERENCE_DATASET_ID',
  'TOTAL_TOKENS',
  'PROMPT_TOKENS',
  'COMPLETION_TOKENS',
  'TOTAL_COST',
  'PROMPT_COST',
  'COMPLETION_COST',
  'PROMPT_TOKEN_DETAILS',
  'COMPLETION_TOKEN_DETAILS',
  'PROMPT_COST_DETAILS',
  'COMPLETION_COST_DETAILS',
  'PRICE_MODEL_ID',
  'TAGS',
  'APP_PATH',
  'ATTACHMENTS',
  'THREAD_EVALUATION_TIME',
  'IS_IN_DATASET',
  'LAST_QUEUED_AT',
  'SHARE_URL',
  'FEEDBACK_STATS',
  'LS_USER_ID',
] as const;
export const RunSelectField = z.enum(RUN_SELECT_FIELDS);
export type RunSelectField = z.infer<typeof RunSelectField>;

const RunType = z.enum(['TOOL', 'CHAIN', 'LLM', 'RETRIEVER', 'EMBEDDING', 'PROMPT', 'PARSER']);

/** A query parameter the SDK repeats for an array (`selects=ID&selects=NAME`): one value arrives as a string. */
const repeated = <T extends z.ZodType>(item: T) => z.union([item.transform((value) => [value]), z.array(item)]);

const Page = {
  cursor: z.string().max(1000).optional().describe("A page's `next_cursor`, passed back for the next page"),
  page_size: z.number().int().min(1).max(100).optional().describe('Items per page (at most 100); 20 by default'),
};

const StartRange = {
  min_start_time: time.optional().describe('Runs that started at or after; a day before now by default'),
  max_start_time: time.optional().describe('Runs that started before; now by default'),
};

/** A run in the v2 shape: only the fields selected. */
export const RunV2 = z.object({
  id: Uuid.optional(),
  name: z.string().optional(),
  run_type: RunType.optional(),
  status: z.enum(['SUCCESS', 'ERROR', 'PENDING']).optional(),
  start_time: z.string().optional(),
  end_time: z.string().optional(),
  latency_seconds: z.number().optional(),
  first_token_time: z.string().optional(),
  error: z.string().optional(),
  error_preview: z.string().optional(),
  extra: z.record(z.string(), z.unknown()).optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  events: z.array(z.unknown()).optional(),
  inputs: z.unknown().optional(),
  inputs_preview: z.string().optional(),
  outputs: z.unknown().optional(),
  outputs_preview: z.string().optional(),
  parent_run_id: Uuid.optional(),
  parent_run_ids: z.array(z.string()).optional(),
  project_id: Uuid.optional(),
  trace_id: Uuid.optional(),
  thread_id: z.string().optional(),
  dotted_order: z.string().optional(),
  is_root: z.boolean().optional(),
  reference_example_id: Uuid.optional(),
  total_tokens: z.number().optional(),
  prompt_tokens: z.number().optional(),
  completion_tokens: z.number().optional(),
  total_cost: z.number().optional(),
  prompt_cost: z.number().optional(),
  completion_cost: z.number().optional(),
  tags: z.array(z.string()).optional(),
  feedback_stats: z.record(z.string(), z.unknown()).optional(),
});

const pageOf = <T extends z.ZodType>(item: T) =>
  z.object({ items: z.array(item), next_cursor: z.string().nullable().describe('Pass back as `cursor` for the next page; null on the last') });

export const QueryRunsV2In = z
  .strictObject({
    project_ids: z.array(Uuid).min(1).max(100).optional().describe('Projects to read (this or reference_dataset_id)'),
    reference_dataset_id: Uuid.optional().describe('Read the projects of this dataset (experiments)'),
    ids: z.array(Uuid).max(100).optional(),
    trace_id: Uuid.optional(),
    run_type: RunType.optional(),
    has_error: z.boolean().optional(),
    is_root: z.boolean().optional(),
    reference_examples: z.array(Uuid).max(1).optional().describe('At most one example'),
    ...StartRange,
    filter: z.string().max(10_000).optional(),
    trace_filter: z.string().max(10_000).optional(),
    tree_filter: z.string().max(10_000).optional(),
    selects: z.array(RunSelectField).max(RUN_SELECT_FIELDS.length).optional().describe('Fields to answer; only `id` when absent'),
    ...Page,
  })
  .refine((b) => (b.project_ids === undefined) !== (b.reference_dataset_id === undefined), {
    message: 'set exactly one of project_ids and reference_dataset_id',
  });
export const RunsV2Page = pageOf(RunV2);

export const RunV2Path = z.object({ run_id: z.string() });
export const GetRunV2Query = z.strictObject({
  project_id: z.string().max(100).describe("The run's project (a run of another is a 404)"),
  selects: repeated(RunSelectField).optional(),
  start_time: time.optional().describe('Accepted; the run is found by its id'),
});

export const TraceV2 = z.object({
  root_run: RunV2,
  trace_aggregates: z.object({
    total_tokens: z.number(),
    total_cost: z.number(),
    first_token_time: z.string().optional(),
  }),
});
export const QueryTracesIn = z.strictObject({
  project_id: Uuid,
  trace_ids: z.array(Uuid).max(100).optional(),
  ...StartRange,
  trace_filter: z.string().max(10_000).optional().describe("Filter on each trace's root run"),
  tree_filter: z.string().max(10_000).optional().describe('Filter on any run of each trace'),
  selects: z.array(RunSelectField).max(RUN_SELECT_FIELDS.length).optional().describe('Fields of each root run to answer; only `id` when absent'),
  ...Page,
});
export const TracesPage = pageOf(TraceV2);

export const TracePath = z.object({ trace_id: z.string() });
export const TraceRunsQuery = z.strictObject({
  project_id: z.string().max(100),
  selects: repeated(RunSelectField).optional(),
  filter: z.string().max(10_000).optional(),
  min_start_time: time.optional(),
  max_start_time: time.optional(),
});
export const TraceRunsOut = z.object({ items: z.array(RunV2) });

export const ThreadV2 = z.object({
  thread_id: z.string(),
  count: z.number().int().describe('Traces (turns) in the thread'),
  min_start_time: z.string(),
  max_start_time: z.string(),
  start_time: z.string().describe('When its first trace started'),
  first_trace_id: Uuid,
  last_trace_id: Uuid,
  trace_id: Uuid.describe('Its latest trace'),
  num_errored_turns: z.number().int(),
  latency_p50: z.number().optional(),
  latency_p99: z.number().optional(),
  total_tokens: z.number(),
  total_cost: z.number(),
});
export const QueryThreadsIn = z.strictObject({
  project_id: Uuid,
  ...StartRange,
  filter: z.string().max(10_000).optional().describe("Filter on each trace's root run: the thread is made of the traces matching"),
  trace_filter: z.string().max(10_000).optional().describe('The same as `filter` here (a thread has a trace matching)'),
  ...Page,
});
export const ThreadsPage = pageOf(ThreadV2);

const AGGREGATE_SELECTS = [
  'THREAD_COUNT',
  'TRACE_COUNT',
  'TOTAL_TOKENS',
  'TOTAL_COST',
  'ERROR_RATE',
  'LATENCY_P50',
  'LATENCY_P99',
  'PROMPT_TOKENS',
  'COMPLETION_TOKENS',
  'PROMPT_COST',
  'COMPLETION_COST',
] as const;
export const ThreadAggregateStatsIn = z.strictObject({
  project_id: Uuid,
  select: z.array(z.enum(AGGREGATE_SELECTS)).min(1).describe('The stats to answer'),
  ...StartRange,
  filter: z.string().max(10_000).optional(),
  trace_filter: z.string().max(10_000).optional(),
});
export const ThreadAggregateStatsOut = z.object({
  thread_count: z.number().int().optional(),
  trace_count: z.number().int().optional(),
  total_tokens: z.number().optional(),
  total_cost: z.number().optional(),
  error_rate: z.number().optional().describe('Share of the traces with an error'),
  latency_p50_seconds: z.number().optional(),
  latency_p99_seconds: z.number().optional(),
  prompt_tokens: z.number().optional(),
  completion_tokens: z.number().optional(),
  prompt_cost: z.number().optional(),
  completion_cost: z.number().optional(),
});

const THREAD_SELECTS = [
  'TURNS',
  'FIRST_START_TIME',
  'LAST_START_TIME',
  'LAST_END_TIME',
  'LATENCY_P50',
  'LATENCY_P99',
  'PROMPT_TOKENS',
  'PROMPT_COST',
  'COMPLETION_TOKENS',
  'COMPLETION_COST',
  'TOTAL_TOKENS',
  'TOTAL_COST',
] as const;
export const ThreadPath = z.object({ thread_id: z.string().max(1000) });
export const ThreadStatsQuery = z.strictObject({
  session_id: z.string().max(100).describe("The thread's project"),
  selects: repeated(z.enum(THREAD_SELECTS)).describe('The stats to answer'),
  filter: z.string().max(10_000).optional().describe('Count only the traces whose root run matches'),
});
export const ThreadStatsOut = z.object({
  turns: z.number().int().optional(),
  first_start_time: z.string().optional(),
  last_start_time: z.string().optional(),
  last_end_time: z.string().optional(),
  latency_p50_seconds: z.number().optional(),
  latency_p99_seconds: z.number().optional(),
  prompt_tokens: z.number().optional(),
  prompt_cost: z.number().optional(),
  completion_tokens: z.number().optional(),
  completion_cost: z.number().optional(),
  total_tokens: z.number().optional(),
  total_cost: z.number().optional(),
});

export const ResolveSessionQuery = z.strictObject({
  kind: z.enum(['AGENT', 'EXPERIMENT', 'EVALUATOR']),
  id: z.string().max(500).optional().describe("AGENT: the deployment's name; EXPERIMENT: the experiment's project id"),
  environment: z.enum(['LOCAL', 'DEVELOPMENT', 'STAGING', 'PRODUCTION']).optional().describe("AGENT: LOCAL is `berth dev`'s project"),
});
export const ResolveSessionOut = z.object({ session_id: Uuid });

/** Fields a share link's reader may not select: full payloads and what is the owner's business, as LangSmith. */
const PRIVATE_SELECT_FIELDS = [
  'EVENTS',
  'INPUTS',
  'OUTPUTS',
  'MANIFEST',
  'REFERENCE_EXAMPLE_ID',
  'APP_PATH',
  'ATTACHMENTS',
  'IS_IN_DATASET',
  'LAST_QUEUED_AT',
  'SHARE_URL',
  'LS_USER_ID',
] as const satisfies readonly RunSelectField[];
type SharedField = Exclude<RunSelectField, (typeof PRIVATE_SELECT_FIELDS)[number]>;
type PublicField = SharedField | 'PARENT_RUN_ID';

/** What a share link's reader may select: previews rather than full inputs and outputs, and the parent's id. */
export const PUBLIC_RUN_SELECT_FIELDS: [PublicField, ...PublicField[]] = [
  'PARENT_RUN_ID',
  ...RUN_SELECT_FIELDS.filter((field): field is SharedField => !(PRIVATE_SELECT_FIELDS as readonly string[]).includes(field)),
];
export const PublicRunSelectField = z.enum(PUBLIC_RUN_SELECT_FIELDS);
export type PublicRunSelectField = z.infer<typeof PublicRunSelectField>;

export const ShareOut = z.object({ share_token: z.string().describe('Anyone with it may read what is shared, read-only, until unshared') });
export const RunSharePath = z.object({ run_id: z.string().max(100) });
export const ShareRunIn = z.strictObject({
  session_id: z.string().max(100).describe("The trace's project"),
  trace_id: z.string().max(100).describe("The run's trace: the trace is what is shared"),
});
export const UnshareRunIn = z.strictObject({ session_id: z.string().max(100) });
export const ShareThreadIn = z.strictObject({ project_id: z.string().max(100) });
export const ThreadShareQuery = z.strictObject({ project_id: z.string().max(100) });
export const PublicRunPath = z.object({ share_token: z.string().max(200), run_id: z.string().max(100) });
export const PublicRunQuery = z.strictObject({
  selects: repeated(PublicRunSelectField),
  start_time: time.optional().describe('Accepted; the run is found by its id'),
});
export const PublicPath = z.object({ share_token: z.string().max(200) });
export const PublicRunsQueryIn = z.strictObject({
  selects: z.array(PublicRunSelectField).max(PUBLIC_RUN_SELECT_FIELDS.length).optional().describe('Fields to answer; only `id` when absent'),
});
export const PublicRunsOut = z.object({ items: z.array(RunV2) });
