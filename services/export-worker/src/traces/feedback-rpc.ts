/**
 * The gRPC face of the feedback store: `berth.exportworker.v1.FeedbackService`. Feedback travels
 * as JSON text; text that is not JSON is a validation error, as a malformed field is.
 */
import { isBerthError, RequestValidationError, type ErrorCode } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { FeedbackService } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import type { FeedbackStore } from './feedback-store.js';
import { MAX_PAGE } from './rpc.js';

function invalid(field: string, msg: string): RequestValidationError {
  return new RequestValidationError([{ loc: ['body', field], msg, type: 'value_error' }]);
}

function parsed(text: string, field = 'feedback'): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new RequestValidationError([{ loc: ['body', field], msg: 'is not JSON', type: 'value_error.json' }], { cause: error });
  }
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
