/**
 * A batch of run operations from a LangSmith client into the store: each parsed on its own (a
 * malformed one is refused with its reason, the rest go on), creates routed to their project —
 * got or created by name, as LangSmith does — and the whole batch written in one transaction.
 */
import { ConflictError, isBerthError, UnavailableError } from '@berth/errors';
import type { Logger } from '@berth/log';
import { parseOperation, type RunOperationInput, type SessionRef } from './run-document.js';
import type { RunWrite } from './run-fields.js';
import type { TraceStore, UpsertResult } from './trace-store.js';

/** The one project a writer is bound to (a deployment's tracing credential). */
export interface ProjectBinding {
  id: string;
  name: string;
}

export interface TraceIngestOptions {
  /**
   * Batches this process writes at once. One more is refused as unavailable (the gateway's 503
   * with Retry-After, which the langsmith client retries) rather than queued: a store that cannot
   * keep up must not gather a backlog of held batches until clients time out and drop them.
   * @default 20 (twice the database pool)
   */
  maxBatchesInFlight?: number;
}

/** Refused because the store has as many batches in flight as it may: retry later. */
export class TraceStoreBusyError extends UnavailableError {
  constructor() {
    super('The trace store is busy writing other batches: retry shortly');
    this.name = 'TraceStoreBusyError';
  }
}

export class TraceIngest {
  private readonly maxBatchesInFlight: number;
  private inFlight = 0;

  constructor(
    private readonly store: TraceStore,
    private readonly logger: Logger,
    options: TraceIngestOptions = {},
  ) {
    this.maxBatchesInFlight = options.maxBatchesInFlight ?? 20;
  }

  /** Batches being written now. */
  get batchesInFlight(): number {
    return this.inFlight;
  }

  async ingest(tenantId: string, operations: RunOperationInput[], binding?: ProjectBinding): Promise<UpsertResult> {
    if (this.inFlight >= this.maxBatchesInFlight) throw new TraceStoreBusyError();
    this.inFlight++;
    try {
      return await this.write(tenantId, operations, binding);
    } finally {
      this.inFlight--;
    }
  }

  private async write(tenantId: string, operations: RunOperationInput[], binding?: ProjectBinding): Promise<UpsertResult> {
    const refused: UpsertResult['rejected'] = [];
    const writes: { index: number; write: RunWrite; session: SessionRef | undefined }[] = [];
    operations.forEach((operation, index) => {
      const parsed = parseOperation(operation);
      if (parsed.ok) writes.push({ index, write: parsed.write, session: parsed.session });
      else refused.push({ index, id: parsed.id, reason: parsed.reason });
    });

    // A bound writer's runs (creates and patches alike) live in its project as the store has it.
    const bound = binding && (await this.bindingSession(tenantId, binding));
    const sessions = binding ? new Map<string, string | { reason: string }>() : await this.resolveSessions(tenantId, writes);
    const accepted: typeof writes = [];
    for (const entry of writes) {
      const { write, session } = entry;
      // A patch never moves a run to another project.
      delete write.session_id;
      if (binding) write.scope_session_id = typeof bound === 'string' ? bound : binding.id;
      if (write.op === 'create') {
        const resolved = bound ?? sessions.get(refKey(session!));
        if (typeof resolved === 'object') {
          refused.push({ index: entry.index, id: write.id, reason: resolved.reason });
          continue;
        }
        write.session_id = resolved ?? (session as { id: string }).id;
      }
      accepted.push(entry);
    }

    const result = await this.store.upsertRuns(
      tenantId,
      accepted.map((a) => a.write),
    );
    for (const rejected of result.rejected) refused.push({ ...rejected, index: accepted[rejected.index]!.index });
    refused.sort((a, b) => a.index - b.index);
    if (refused.length > 0) {
      this.logger.warn({ tenantId, refused: refused.slice(0, 20), refusedCount: refused.length, total: operations.length }, 'runs refused at ingest');
    }
    return { stored: result.stored, pending: result.pending, rejected: refused };
  }

  /**
   * The project id of every project the creates name by name (created when missing), or why it
   * cannot be had. Projects named by id are checked by the store.
   */
  private async resolveSessions(
    tenantId: string,
    writes: { write: RunWrite; session: SessionRef | undefined }[],
  ): Promise<Map<string, string | { reason: string }>> {
    const resolved = new Map<string, string | { reason: string }>();
    const names = new Set(writes.flatMap((w) => (w.write.op === 'create' && w.session && 'name' in w.session ? [w.session.name] : [])));
    for (const name of names) {
      try {
        const { session, created } = await this.store.ensureSession(tenantId, { name });
        if (created) this.logger.info({ tenantId, sessionId: session.id, name }, 'tracing project created by ingest');
        resolved.set(refKey({ name }), session.id);
      } catch (error) {
        if (!isBerthError(error)) throw error;
        resolved.set(refKey({ name }), { reason: error.message });
      }
    }
    return resolved;
  }

  /**
   * The bound project: the one with its id, else the tenant's project with its name (a deployment
   * named after a project that already exists — the folder `berth dev` traced, or a deleted
   * deployment of the same name — traces into it rather than losing every run to the name clash),
   * else created with its id and name.
   */
  private async bindingSession(tenantId: string, binding: ProjectBinding): Promise<string | { reason: string }> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const byId = await this.store.getSession(tenantId, binding.id).catch((error: unknown) => {
        if (isBerthError(error) && error.code === 'not_found') return undefined;
        throw error;
      });
      if (byId) return byId.id;
      const byName = await this.store.findSessionByName(tenantId, binding.name);
      if (byName) return byName.id;
      try {
        await this.store.createSession(tenantId, { id: binding.id, name: binding.name });
        this.logger.info({ tenantId, sessionId: binding.id, name: binding.name }, 'bound tracing project created by ingest');
        return binding.id;
      } catch (error) {
        // Created by a concurrent batch: found by id or name on the next attempt.
        if (!(error instanceof ConflictError)) throw error;
      }
    }
    return { reason: `the tracing project ${JSON.stringify(binding.name)} (${binding.id}) could not be created` };
  }
}

function refKey(ref: SessionRef): string {
  return 'id' in ref ? `id:${ref.id}` : `name:${ref.name}`;
}
