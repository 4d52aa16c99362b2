/**
 * The LangSmith-compatible trace API at the gateway's root (`/info`, `/runs…`, `/sessions…`, `/feedback…`):
 * point the `langsmith` client at the gateway (LANGSMITH_ENDPOINT) with a Berth API key
 * (LANGSMITH_API_KEY) and it records and reads traces unchanged. Runs and projects live in the
 * export-worker's trace store.
 */
import { hasCredentialHeader, httpErrorBody, JSON_TYPES, storableString } from '@berth/http';
import type { Logger } from '@berth/log';
import { systemClock, type Clock } from '@berth/clock';
import express, { type Request, type RequestHandler } from 'express';
import type { ExportWorkerClients } from '../../export-worker.js';
import { BERTH_VERSION } from '../../version.js';
import { readV2Routes } from './read-v2.js';
import { feedbackRoutes } from './feedback.js';
import { runRoutes, type TraceLimits } from './runs.js';
import { shareRoutes } from './share.js';
import type { RateLimiter } from '../../rate-limit.js';
import { InfoOut } from './schemas.js';
import { sessionRoutes } from './sessions.js';
import { routeSpec, type GatewayApi } from '../../access.js';

export const DEFAULT_TRACE_LIMITS: TraceLimits = {
  maxBodyBytes: 100 * 1024 * 1024,
  maxCallBytes: 16 * 1024 * 1024,
  maxRunBytes: 60 * 1024 * 1024,
  maxIngestsInFlight: 32,
};

/**
 * What clients are told to send per request (uncompressed): well below the body limit, so a
 * batch plus one large run still fits.
 */
export const BATCH_SIZE_LIMIT_BYTES = 20 * 1024 * 1024;

/**
 * The LangSmith version whose API this one matches, which `/info` reports as `version`: the SDK
 * compares it with the least version each of its resource clients needs (0.12.0: 0.16.0 for runs,
 * traces and threads, 0.18.0 for sessions) and warns when it is older. Berth's own version is
 * `berth_version`.
 */
export const LANGSMITH_API_VERSION = '0.18.0';

export interface TraceRouteDeps {
  exportWorker: ExportWorkerClients;
  logger: Logger;
  /** Gives "now" for the reads' default time window. @default systemClock */
  clock?: Clock;
  limits?: Partial<TraceLimits>;
  /** Counts the reads of shared traces per client address. */
  publicLimiter: RateLimiter;
}

export function traceRoutes(api: GatewayApi, deps: TraceRouteDeps): void {
  const limits = { ...DEFAULT_TRACE_LIMITS, ...deps.limits };
  const info = infoOf(limits);
  const infoRoute = routeSpec({
    method: 'get',
    access: 'public',
    summary: 'What this server supports (LangSmith clients read it first)',
    description:
      `\`version\` is the LangSmith version whose API this matches (${LANGSMITH_API_VERSION}: the langsmith SDK warns ` +
      "below the version its clients need), `berth_version` the platform's own. Ingest through `POST /runs/multipart`, " +
      'gzip bodies accepted (zstd is not), at most `size_limit` runs and `size_limit_bytes` per request.',
    tags: ['traces'],
    response: InfoOut,
    handler: () => info,
  });
  api.route({ ...infoRoute, path: '/info' }).route({ ...infoRoute, path: '/api/v1/info' });
  runRoutes(api, { exportWorker: deps.exportWorker, logger: deps.logger, limits });
  sessionRoutes(api, { exportWorker: deps.exportWorker });
  readV2Routes(api, { exportWorker: deps.exportWorker, clock: deps.clock ?? systemClock });
  shareRoutes(api, { exportWorker: deps.exportWorker, publicLimiter: deps.publicLimiter });
  feedbackRoutes(api, { exportWorker: deps.exportWorker });
}

function infoOf(limits: TraceLimits) {
  return {
    version: LANGSMITH_API_VERSION,
    berth_version: BERTH_VERSION,
    license_expiration_time: null,
    batch_ingest_config: {
      use_multipart_endpoint: true,
      scale_up_qsize_trigger: 1000,
      scale_up_nthreads_limit: 16,
      scale_down_nempty_trigger: 4,
      size_limit: 100,
      size_limit_bytes: Math.min(BATCH_SIZE_LIMIT_BYTES, limits.maxBodyBytes),
    },
    instance_flags: {
      gzip_body_enabled: true,
      zstd_compression_enabled: false,
      dataset_examples_multipart_enabled: false,
      examples_multipart_enabled: false,
    },
  };
}

/**
 * The JSON parser of the run ingest routes, mounted before the app's own: their batches are larger
 * than other requests (up to the trace body limit), and a run's odd string must not fail its batch.
 */
export function traceJsonParser(limits: Partial<TraceLimits> = {}): RequestHandler {
  const parse = express.json({
    limit: limits.maxBodyBytes ?? DEFAULT_TRACE_LIMITS.maxBodyBytes,
    // As any JSON route (libs/http json-body.ts): another or no content type is JSON when credentialed.
    type: (req) => (req as Request).is(JSON_TYPES) !== false || hasCredentialHeader(req as Request),
    // Postgres cannot store U+0000 or a lone surrogate: such strings are cleaned instead of failing a batch.
    reviver: (_key, value: unknown) => (typeof value === 'string' ? storableString(value) : value),
  });
  return (req, res, next) => {
    const path = req.path;
    if (!(path === '/runs' || path === '/runs/batch' || (req.method === 'PATCH' && path.startsWith('/runs/')))) return next();
    parse(req, res, (error?: unknown) => {
      if (!error) return next();
      // Mounted ahead of the app's error handler: answer through the same one mapping.
      const answer = httpErrorBody(error);
      res.set(answer.headers).status(answer.status).json(answer.body);
    });
  };
}
