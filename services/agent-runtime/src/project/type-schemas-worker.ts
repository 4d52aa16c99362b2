/**
 * Worker thread of `TypeSchemaReader` (type-schema-reader.ts): type-checks graph modules off the
 * server's main thread, one job at a time, keeping the last program so that graphs of the same
 * project reuse its parsed files.
 */
import { parentPort } from 'node:worker_threads';
import { typeSchemasOf, type GraphTypeSchemas } from './type-schemas.js';

export interface TypeSchemaJob {
  id: number;
  sourceFile: string;
  exportName: string;
}

export type TypeSchemaAnswer = { id: number; schemas: GraphTypeSchemas } | { id: number; error: string };

parentPort?.on('message', (job: TypeSchemaJob) => {
  let answer: TypeSchemaAnswer;
  try {
    answer = { id: job.id, schemas: typeSchemasOf(job.sourceFile, job.exportName) };
  } catch (error) {
    answer = { id: job.id, error: error instanceof Error ? error.message : String(error) };
  }
  parentPort!.postMessage(answer);
});
