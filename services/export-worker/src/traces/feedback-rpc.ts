/**
 * The gRPC face of the feedback store: `berth.exportworker.v1.FeedbackService`. Feedback travels
 * as JSON text; text that is not JSON is a validation error, as a malformed field is.
 */
import { isBerthError, RequestValidationError, type ErrorCode } from '@berth/errors';
import { storableStrings, unsafeValueIssues } from '@berth/http';
import { isUuid } from '@berth/ids';
import type { Logger } from '@berth/log';
import { FeedbackService, type TraceService } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import type { FeedbackStore } from './feedback-store.js';
import { MAX_PAGE } from './rpc.js';

/** A bad parameter of a feedback list (the query string of GET /feedback). */
function invalid(field: string, msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['query', field], msg, type: 'value_error' }]);
}

/**
 * The feedback a client sent: its strings cleaned as the JSON routes' parser does (Postgres stores
 * no U+0000 nor lone surrogate), refused when nested deeper than any request may be.
 */
function parsed(text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new RequestValidationError([{ loc: ['body'], msg: 'is not JSON', type: 'value_error.json' }], { cause: error });
  }
  storableStrings(value);
  const issues = unsafeValueIssues('body', value);
  if (issues.length > 0) throw new RequestValidationError(issues);
  return value;
}

/** What makes one feedback of a batch refused rather than the batch failed. */
const REFUSALS = new Set<ErrorCode>(['validation_failed', 'not_found', 'conflict', 'resource_exhausted']);

const scopeOf = (sessionId: string) => (sessionId ? sessionId.toLowerCase() : undefined);

/** The ids of a list filter; one that cannot be an id is a validation error naming the field. */
function uuids(field: string, ids: string[]): string[] {
  if (ids.some((id) => !isUuid(id))) throw invalid(field, 'must be UUIDs');
  return ids.map((id) => id.toLowerCase());
}

export function feedbackHandlers(store: FeedbackStore): ServiceImplementation<typeof FeedbackService> {
  return {
    createFeedback: async (r) => ({
      feedbackJson: JSON.stringify(await store.create(r.tenantId, scopeOf(r.sessionId), parsed(r.feedbackJson))),
    }),
    ingestFeedback: async (r) => {
      const storedIds: string[] = [];
      const refused: { index: number; id: string; reason: string }[] = [];
      for (const [index, text] of r.feedbackJson.entries()) {
        let id = '';
        try {
          const input = parsed(text);
          id = typeof (input as { id?: unknown })?.id === 'string' ? (input as { id: string }).id : '';
          storedIds.push((await store.create(r.tenantId, scopeOf(r.sessionId), input)).id);
        } catch (error) {
          // A feedback the store refuses costs only itself; anything else (the database down) fails the call.
          if (!isBerthError(error) || !REFUSALS.has(error.code)) throw error;
          refused.push({ index, id, reason: error.message });
        }
      }
      return { storedIds, refused };
    },
    getFeedback: async (r) => ({ feedbackJson: JSON.stringify(await store.get(r.tenantId, scopeOf(r.sessionId), r.id)) }),
    listFeedback: async (r) => {
      const limit = r.limit || MAX_PAGE;
      if (limit < 1 || limit > MAX_PAGE) throw invalid('limit', `must be 1-${MAX_PAGE}`);
      if (r.offset < 0) throw invalid('offset', 'must be at least 0');
      const list = await store.list(r.tenantId, {
        sessionIds: uuids('session', r.sessionIds),
        runIds: uuids('run', r.runIds),
        keys: r.keys,
        sourceTypes: r.sourceTypes,
        ...(r.hasComment !== undefined ? { hasComment: r.hasComment } : {}),
        ...(r.hasScore !== undefined ? { hasScore: r.hasScore } : {}),
        limit,
        offset: r.offset,
      });
      return { feedbackJson: list.map((f) => JSON.stringify(f)) };
    },
    updateFeedback: async (r) => ({
      feedbackJson: JSON.stringify(await store.update(r.tenantId, scopeOf(r.sessionId), r.id, parsed(r.updateJson))),
    }),
    deleteFeedback: async (r) => {
      await store.delete(r.tenantId, scopeOf(r.sessionId), r.id);
      return {};
    },
  };
}

/**
 * The trace service with its ingest followed by storing the feedback that waited for the runs just
 * stored (feedback sent before its run's batch). Kept beside the trace handlers rather than in them:
 * runs know nothing of feedback.
 */
export function attachingPendingFeedback(
  handlers: ServiceImplementation<typeof TraceService>,
  store: FeedbackStore,
  logger: Logger,
): ServiceImplementation<typeof TraceService> {
  return {
    ...handlers,
    ingestRuns: async (request, context) => {
      const answer = await handlers.ingestRuns(request, context);
      const { attached, dropped } = await store.attachPending(request.tenantId, answer.storedIds ?? []);
      if (dropped.length > 0) logger.warn({ tenantId: request.tenantId, attached, dropped: dropped.slice(0, 20) }, 'feedback that waited for its run refused');
      return answer;
    },
  };
}
