/**
 * What the HTTP routes of the agent server need: stores, the project's graphs, the executor.
 */
import type { Logger } from '@berth/log';
import type { Authorizer } from '../auth/index.js';
import type { Assistant, AssistantStore } from '../storage/assistants.js';
import type { CronStore } from '../storage/crons.js';
import type { RunStore } from '../storage/runs.js';
import type { ThreadStore } from '../storage/threads.js';
import type { PostgresStore } from '../storage/store.js';
import type { CronScheduler } from '../runs/cron-scheduler.js';
import type { RunService } from '../runs/run-service.js';
import type { ThreadStateService } from '../runs/thread-state.js';
import type { MetadataFilter } from '../storage/sql.js';
import type { ContextProblem, GraphSchemas } from '@berth/langgraph-project';
import type { GraphDrawing, SubgraphSchemas } from '../project/index.js';

export interface ServerContext {
  assistants: AssistantStore;
  threads: ThreadStore;
  runs: RunStore;
  /** The long-term store (also handed to graphs as their BaseStore). */
  store: PostgresStore;
  runService: RunService;
  crons: CronStore;
  /** Queues crons' ticks (fired in the worker role). */
  cronScheduler: CronScheduler;
  state: ThreadStateService;
  /** Runs the project's authorization handlers (allows everything without custom auth). */
  authz: Authorizer;
  /** For failures no client hears of (a cancel after the client went away). */
  log: Logger;
  /** The loaded graph of that id; NotFoundError (404) when the project has none. */
  graph(graphId: string): { graphId: string };
  /** An assistant by UUID, or a graph name for that graph's system assistant; 404 otherwise (also when it does not match `filter`). */
  resolveAssistant(ref: string, filter?: MetadataFilter): Promise<Assistant>;
  /** Context keys the graph's context schema does not accept. */
  contextProblems(graphId: string, context: Record<string, unknown>): ContextProblem[];
  schemas(graphId: string): Promise<GraphSchemas>;
  deleteCheckpoints(threadId: string): Promise<void>;
  copyCheckpoints(fromThreadId: string, toThreadId: string): Promise<void>;
  drawing(assistant: Assistant, xray: boolean | number): Promise<GraphDrawing>;
  /** The schemas of the assistant's graph's subgraphs under `namespace` (all below it with `recurse`). */
  subgraphs(assistant: Assistant, namespace: string | undefined, recurse: boolean): Promise<Record<string, SubgraphSchemas>>;
}
