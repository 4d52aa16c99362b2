/**
 * LangSmith's run ingest and read API (`/runs…`), translated to `TraceService` calls on the
 * export-worker. Ingest answers 202 listing the operations it refused: the langsmith client drops a
 * whole batch on an error status, so one malformed run must not cost the others. A single run
 * (POST /runs, PATCH /runs/{id}) that is refused is a 422 with the reason.
 */
import type { Principal } from '@berth/auth';
import { RequestValidationError } from '@berth/errors';
import { RETRY_AFTER_SECONDS } from '@berth/http';
import type { Logger } from '@berth/log';
import { RunOperationKind, timestampFromDate, type IngestRunsResponse, type RunOperationSchema } from '@berth/proto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Response } from 'express';
import type { z } from 'zod';
import type { ExportWorkerClients } from '../../export-worker.js';
import { ingestFeedbackParts, isFeedbackPart } from './feedback.js';
import { bodyChunks, boundaryOf, readParts, TraceBodyError, type MultipartPart } from './multipart.js';
import { BatchIn, IngestOut, QueryRunsIn, QueryRunsOut, RunIn, RunOut, RunPath, ValidateFilterIn, ValidateFilterOut } from './schemas.js';
import { scopedSessionIds } from './scope.js';
import { utc } from './time.js';
import type { GatewayApi } from '../../access.js';

type OperationInit = MessageInitShape<typeof RunOperationSchema>;

export interface TraceLimits {
  /** Largest ingest body, as sent and decoded. */
  maxBodyBytes: number;
  /** Most JSON text of runs in one IngestRuns call (a larger batch is split into several). */
  maxCallBytes: number;
  /** Largest single run operation; a larger one is refused with the reason. */
  maxRunBytes: number;
  /**
   * Multipart ingest requests this gateway reads and forwards at once: each holds its runs until
   * the store answers, so more are answered 503 with Retry-After before their body is read.
   */
  maxIngestsInFlight: number;
}

export interface RunRouteDeps {
  exportWorker: ExportWorkerClients;
  logger: Logger;
  limits: TraceLimits;
}

const CREATE = RunOperationKind.CREATE;
const PATCH = RunOperationKind.PATCH;

function sizeOf(op: OperationInit): number {
  let size = op.runJson?.length ?? 0;
  for (const text of Object.values(op.fieldJson ?? {})) size += text.length;
  return size;
}

/** The runs of a multipart body in part order, plus how many parts are not kept. */
export function operationsOfParts(parts: MultipartPart[]): { operations: OperationInit[]; ignored: number } {
  const byKey = new Map<string, OperationInit>();
  let ignored = 0;
  for (const part of parts) {
    const [kind, id, ...rest] = part.name.split('.');
    if ((kind !== 'post' && kind !== 'patch') || !id) {
      ignored++; // attachment.<id>.<name>: not kept by this store
      continue;
    }
    const key = `${kind}.${id}`;
    let op = byKey.get(key);
    if (!op) {
      op = { kind: kind === 'post' ? CREATE : PATCH, id, runJson: '', fieldJson: {} };
      byKey.set(key, op);
    }
    const text = part.data.toString('utf8');
    if (rest.length === 0) op.runJson = text;
    else op.fieldJson![rest.join('.')] = text;
  }
  return { operations: [...byKey.values()], ignored };
}

function ingestAnswer(results: IngestRunsResponse[], operations: OperationInit[], tooLarge: { index: number; reason: string }[]) {
  const refused = [
    ...tooLarge.map((r) => ({ id: operations[r.index]!.id ?? '', reason: r.reason })),
    ...results.flatMap((r) => r.refused.map((x) => ({ id: x.id, reason: x.reason }))),
  ];
  return {
    stored: results.reduce((n, r) => n + r.storedIds.length, 0),
    pending: results.reduce((n, r) => n + r.pendingIds.length, 0),
    refused,
  };
}

/** A JSON run as an operation: its JSON text, with the path's id for a patch. */
function jsonOperation(kind: RunOperationKind, run: Record<string, unknown>, id?: string): OperationInit {
  return { kind, runJson: JSON.stringify(run), ...(id ? { id } : {}) };
}

export function runRoutes(api: GatewayApi, deps: RunRouteDeps): void {
  const tags = ['traces'];
  const rpc = () => deps.exportWorker.traces;
  const { limits } = deps;
  let ingestsInFlight = 0;

  /** Sends the operations in calls of at most maxCallBytes each, in order. */
  const ingest = async (auth: Principal, operations: OperationInit[]) => {
    const tooLarge: { index: number; reason: string }[] = [];
    const calls: OperationInit[][] = [[]];
    let callBytes = 0;
    operations.forEach((op, index) => {
      const size = sizeOf(op);
      if (size > limits.maxRunBytes) {
        tooLarge.push({ index, reason: `the run is ${size} bytes, more than the ${limits.maxRunBytes} one run may have` });
        return;
      }
      if (callBytes + size > limits.maxCallBytes && calls.at(-1)!.length > 0) {
        calls.push([]);
        callBytes = 0;
      }
      calls.at(-1)!.push(op);
      callBytes += size;
    });
    const project = auth.tracingProject ? { id: auth.tracingProject.id, name: auth.tracingProject.name } : undefined;
    const results: IngestRunsResponse[] = [];
    for (const call of calls) {
      if (call.length === 0) continue;
      results.push(await rpc().ingestRuns({ tenantId: auth.tenantId, operations: call, ...(project ? { project } : {}) }, { timeoutMs: 120_000 }));
    }
    const answer = ingestAnswer(results, operations, tooLarge);
    if (tooLarge.length > 0) deps.logger.warn({ tenantId: auth.tenantId, refused: answer.refused.slice(0, 20) }, 'runs refused at ingest');
    return answer;
  };

  /** A single-run write: its refusal is the request's 422. */
  const ingestOne = async (auth: Principal, op: OperationInit) => {
    const answer = await ingest(auth, [op]);
    const refused = answer.refused[0];
    if (refused) throw new RequestValidationError([{ loc: ['body'], msg: refused.reason, type: 'value_error.run' }]);
    return answer;
  };

  api
    .route({
      method: 'post',
      path: '/runs/multipart',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Ingest a batch of runs (multipart)',
      description:
        "The langsmith client's default ingest. `multipart/form-data` with parts `post.<run_id>` and `patch.<run_id>` " +
        '(the run as JSON) and `post.<run_id>.<field>` for inputs, outputs, events, extra, error and serialized; ' +
        '`Content-Encoding: gzip` allowed. `feedback.<id>` parts are stored as `POST /feedback` stores them; attachments ' +
        'are accepted and not kept. Answers 202 with the runs and feedback refused (the rest are stored): a client drops ' +
        'its whole batch on an error status. ' +
        `413 above ${limits.maxBodyBytes} bytes. 503 with Retry-After when the gateway or the store is busy with ` +
        'other batches (the client retries a batch on 503).',
      tags,
      consumes: ['multipart/form-data'],
      status: 202,
      response: IngestOut,
      errors: [413, 415, 503],
      handler: async ({ auth, req, res }) => {
        if (ingestsInFlight >= limits.maxIngestsInFlight) {
          res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
          return refuse(res, 503, 'The gateway is forwarding as many batches as it may: retry shortly');
        }
        ingestsInFlight++;
        try {
          let parts: MultipartPart[];
          try {
            const boundary = boundaryOf(req.get('content-type'));
            parts = await readParts(bodyChunks(req, limits.maxBodyBytes), boundary);
          } catch (error) {
            if (error instanceof TraceBodyError) return refuse(res, error.status, error.message);
            throw error;
          }
          // Feedback is stored after the runs: it may be on a run of this same batch.
          const { operations, ignored } = operationsOfParts(parts.filter((part) => !isFeedbackPart(part)));
          const answer = await ingest(auth, operations);
          const feedback = await ingestFeedbackParts(deps.exportWorker, auth, parts.filter(isFeedbackPart));
          return { ...answer, refused: [...answer.refused, ...feedback.refused], ignored_parts: ignored };
        } finally {
          ingestsInFlight--;
        }
      },
    })
    .route({
      method: 'post',
      path: '/runs/batch',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Ingest a batch of runs (JSON)',
      description:
        '`{"post": [runs], "patch": [runs]}`: what the langsmith client sends when multipart is off. Answers 202 with ' +
        'the runs refused as malformed; the rest are stored.',
      tags,
      body: BatchIn,
      status: 202,
      response: IngestOut,
      errors: [413, 503],
      handler: async ({ auth, body }) =>
        ingest(auth, [...(body.post ?? []).map((run) => jsonOperation(CREATE, run)), ...(body.patch ?? []).map((run) => jsonOperation(PATCH, run))]),
    })
    .route({
      method: 'post',
      path: '/runs',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Create a run',
      description: 'The run goes to `session_id`, else the project named `session_name` (created when missing), else "default".',
      tags,
      body: RunIn,
      status: 202,
      response: IngestOut,
      errors: [503],
      handler: async ({ auth, body }) => ingestOne(auth, jsonOperation(CREATE, body)),
    })
    .route({
      method: 'patch',
      path: '/runs/{run_id}',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Update a run',
      description: "Sets the fields given (end_time, outputs, error, ...). A patch that comes before its run's create waits for it.",
      tags,
      params: RunPath,
      body: RunIn,
      status: 202,
      response: IngestOut,
      errors: [503],
      handler: async ({ auth, params, body }) => ingestOne(auth, jsonOperation(PATCH, body, params.run_id)),
    })
    .route({
      method: 'get',
      path: '/runs/{run_id}',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Get a run',
      tags,
      params: RunPath,
      response: RunOut,
      errors: [404, 503],
      handler: async ({ auth, params }) => {
        const answer = await rpc().getRun({ tenantId: auth.tenantId, id: params.run_id, sessionId: auth.tracingProject?.id ?? '' });
        return JSON.parse(answer.runJson) as z.input<typeof RunOut>;
      },
    })
    .route({
      method: 'post',
      path: '/runs/query',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Query runs',
      description:
        'What `client.listRuns` sends. Conditions combine with AND; `filter`, `trace_filter` and `tree_filter` use the ' +
        'filter language (a bad one is a 422 whose `detail[].ctx.position` is the character offset of the problem). ' +
        'Pages hold `limit` runs (at most 100); pass `cursors.next` back as `cursor` for the next page (null on the last): ' +
        'keyset paging on (start_time, id), so each run comes once even while new ones arrive. `select` reads only the ' +
        'fields named, which keeps a table of many runs fast.',
      tags,
      body: QueryRunsIn,
      response: QueryRunsOut,
      errors: [403, 503],
      handler: async ({ auth, body }) => {
        const sessionIds = scopedSessionIds(auth, body.session ?? []);
        const reference = Array.isArray(body.reference_example) ? body.reference_example[0] : body.reference_example;
        const isRoot = body.is_root ?? (body.execution_order === 1 ? true : undefined);
        const answer = await rpc().queryRuns({
          tenantId: auth.tenantId,
          sessionIds,
          ids: body.id ?? [],
          traceId: body.trace ?? '',
          parentRunId: body.parent_run ?? '',
          referenceExampleId: reference ?? '',
          runType: body.run_type ?? '',
          ...(body.error != null ? { error: body.error } : {}),
          ...(isRoot !== undefined ? { isRoot } : {}),
          ...(body.start_time ? { startTime: timestampFromDate(utc(body.start_time)) } : {}),
          ...(body.end_time ? { endTime: timestampFromDate(utc(body.end_time)) } : {}),
          filter: body.filter ?? '',
          traceFilter: body.trace_filter ?? '',
          treeFilter: body.tree_filter ?? '',
          query: body.query ?? '',
          limit: body.limit ?? 100,
          cursor: body.cursor ?? '',
          ascending: body.order === 'asc',
          select: body.select ?? [],
        });
        const runs = answer.runsJson.map((text) => JSON.parse(text) as z.input<typeof RunOut>);
        return { runs, cursors: { next: answer.nextCursor || null } };
      },
    })
    .route({
      method: 'post',
      path: '/runs/filter/validate',
      access: ['api_key', 'access_token', 'session', 'tracing_credential'],
      summary: 'Check filters without running a query (a Berth addition)',
      description:
        'For checking a filter as it is typed: 200 when every filter given parses, else the 422 `POST /runs/query` would ' +
        'answer, whose `detail[].loc` names the field and `detail[].ctx.position` the 0-based character offset of the ' +
        'problem (with `ctx.expected` and `ctx.found`).',
      tags,
      body: ValidateFilterIn,
      response: ValidateFilterOut,
      errors: [503],
      handler: async ({ body }) => {
        const filters = Object.fromEntries(Object.entries(body).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
        await rpc().validateFilter({ filters });
        return { valid: true as const };
      },
    });
}

/** Answers directly (the body may still be arriving, so the connection closes after). */
function refuse(res: Response, status: number, detail: string): void {
  res.setHeader('Connection', 'close');
  res.status(status).json({ detail });
}
