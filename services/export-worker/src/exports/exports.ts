/**
 * Bulk exports as users see them: a one-time export of a tracing project's runs in
 * [start_time, end_time), or a schedule (interval_hours) that spawns one such export per interval.
 * Every rule a request may break is checked here and answered with a validation issue whose loc
 * names the REST field, so the gateway and any other caller get the same 422s.
 */
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '@berth/clock';
import type { Kysely } from '@berth/db';
import { NotFoundError, RequestValidationError, type ValidationIssue } from '@berth/errors';
import { FilterSyntaxError, parseFilter } from '../filter/parse.js';
import { RetentionPolicy } from '../traces/retention.js';
import type { TraceStore } from '../traces/trace-store.js';
import { EXPORT_FIELDS } from '../writer/export-partition.js';
import type { BulkExportTables } from './tables.js';
import { ExportStore, type ExportRow, type ExportRunRow } from './store.js';

export const FORMAT_VERSIONS = ['v2_beta'] as const;
export const MAX_INTERVAL_HOURS = 168;

export interface ExportCreate {
  bulk_export_destination_id: string;
  session_id: string;
  start_time: Date;
  end_time?: Date;
  format_version: string;
  filter?: string;
  export_fields?: string[];
  interval_hours?: number;
}

export interface ExportsOptions {
  /** The clock of created_at and finished_at (tests move it). @default systemClock */
  clock?: Clock;
  /** Tells an export over days whose runs have expired that it holds none of them. @default the default retention */
  retention?: RetentionPolicy;
}

export class Exports {
  private readonly clock: Clock;
  private readonly retention: RetentionPolicy;

  constructor(
    private readonly db: Kysely<BulkExportTables>,
    private readonly store: ExportStore,
    private readonly traces: TraceStore,
    options: ExportsOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.retention = options.retention ?? new RetentionPolicy();
  }

  async create(tenantId: string, input: ExportCreate): Promise<ExportRow> {
    const issues = validate(input);
    if (issues.length) throw new RequestValidationError(issues);
    const session = await this.traces.getSession(tenantId, input.session_id).catch((error: unknown) => {
      throw error instanceof NotFoundError ? new NotFoundError(`tracing project (session_id) ${input.session_id} not found`, { cause: error }) : error;
    });
    const now = new Date(this.clock.now());
    // Runs of the project's tier that started before the cutoff are gone (or about to be): the
    // export says so rather than look as if the project had none then.
    const cutoff = this.retention.cutoff(tenantId, session.trace_tier, now);
    const expired =
      input.start_time < cutoff
        ? `runs that started before ${cutoff.toISOString()} are past the project's retention (${this.retention.days(tenantId, session.trace_tier)} days) and are not exported`
        : undefined;
    return this.db.transaction().execute(async (tx) => {
      // A share lock: the destination cannot be deleted until this export is recorded.
      const destination = await tx
        .selectFrom('destinations')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('id', '=', input.bulk_export_destination_id)
        .forShare()
        .executeTakeFirst();
      if (!destination) throw new NotFoundError(`destination ${input.bulk_export_destination_id} not found`);
      return this.store.insert(
        {
          id: randomUUID(),
          tenant_id: tenantId,
          destination_id: destination.id,
          session_id: input.session_id,
          start_time: input.start_time,
          end_time: input.end_time ?? null,
          format_version: input.format_version,
          filter: input.filter ?? null,
          export_fields: input.export_fields ?? null,
          interval_hours: input.interval_hours ?? null,
          status: input.interval_hours !== undefined ? 'SCHEDULED' : 'CREATED',
          source_bulk_export_id: null,
          interval_index: null,
          created_at: now,
          ...(expired ? { status_message: expired } : {}),
        },
        tx,
      );
    });
  }

  list(tenantId: string, page: { limit: number; offset: number }): Promise<ExportRow[]> {
    return this.store.list(tenantId, page);
  }

  get(tenantId: string, id: string): Promise<ExportRow> {
    return this.store.get(tenantId, id);
  }

  /** A final export is refused (IllegalTransitionError, a 409). */
  cancel(tenantId: string, id: string): Promise<ExportRow> {
    return this.store.cancel(tenantId, id, new Date(this.clock.now()));
  }

  async runs(tenantId: string, id: string): Promise<ExportRunRow[]> {
    await this.store.get(tenantId, id);
    return this.store.runs(id);
  }
}

/** Every rule `input` breaks (empty: none). */
function validate(input: ExportCreate): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const issue = (loc: (string | number)[], msg: string, type = 'value_error') => issues.push({ loc: ['body', ...loc], msg, type });
  if (!(FORMAT_VERSIONS as readonly string[]).includes(input.format_version)) issue(['format_version'], `must be one of ${FORMAT_VERSIONS.join(', ')}`, 'enum');
  if (input.interval_hours !== undefined) {
    if (!Number.isInteger(input.interval_hours) || input.interval_hours < 1 || input.interval_hours > MAX_INTERVAL_HOURS) {
      issue(['interval_hours'], `must be a whole number of hours from 1 to ${MAX_INTERVAL_HOURS}`, 'less_than_equal');
    }
    if (input.end_time !== undefined) issue(['end_time'], 'a scheduled export (interval_hours) has no end_time: leave it out');
  } else if (input.end_time === undefined) {
    issue(['end_time'], 'end_time is required for a one-time export (or give interval_hours for a scheduled one)', 'missing');
  } else if (input.end_time <= input.start_time) {
    issue(['end_time'], 'must be after start_time');
  }
  if (input.export_fields !== undefined) {
    if (input.export_fields.length === 0) issue(['export_fields'], 'name at least one field, or leave export_fields out to export every field', 'too_short');
    const seen = new Set<string>();
    input.export_fields.forEach((field, i) => {
      if (!(EXPORT_FIELDS as readonly string[]).includes(field))
        issue(['export_fields', i], `unknown export field ${JSON.stringify(field)}; the fields are ${EXPORT_FIELDS.join(', ')}`, 'enum');
      else if (seen.has(field)) issue(['export_fields', i], `${field} is named twice`);
      seen.add(field);
    });
  }
  if (input.filter !== undefined) {
    try {
      parseFilter(input.filter);
    } catch (error) {
      if (!(error instanceof FilterSyntaxError)) throw error;
      for (const i of error.issues) issues.push({ ...i, loc: ['body', ...i.loc] });
    }
  }
  return issues;
}
