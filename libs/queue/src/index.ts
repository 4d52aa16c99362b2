export { defineJobCatalog } from './catalog.js';
export type { AnyJobCatalog, JobBackoff, JobCatalog, JobDefinition, JobDefinitions, JobInput, JobName, JobPayload, JobRetention } from './catalog.js';
export { DEFAULT_POSTGRES_SCHEMA, DEFAULT_REDIS_PREFIX } from './backend.js';
export type { QueueBackendConfig } from './backend.js';
export { pingQueueBackend, selectQueueBackend } from './probe.js';
export { JobQueue } from './queue.js';
export type { EnqueueOptions, JobInfo, JobInfoOf, JobQueueOptions, JobState } from './queue.js';
export { JobWorker } from './worker.js';
export type { JobCompletedEvent, JobContext, JobFailedEvent, JobHandler, JobHandlers, JobWorkerEvents, JobWorkerOptions } from './worker.js';
export {
  InvalidJobPayloadError,
  InvalidJobResultError,
  JobLockLostError,
  JobTimeoutError,
  QueueBackendError,
  QueueClosedError,
  UnknownJobError,
} from './errors.js';
