/**
 * /ok and /info.
 */
import { z } from 'zod';
import { Flag } from './schemas.js';
import type { AgentApi } from './access.js';

/** What this server serves, as `/info` reports it (the LangGraph SDKs and Studio read these flags). */
export interface ServerFeatures {
  assistants: boolean;
  crons: boolean;
  store: boolean;
  /** Runs may name a `webhook` (the server has a signing secret). */
  webhooks: boolean;
  /** `POST /mcp`; off with `http.disable_mcp`. */
  mcp: boolean;
}

export function systemRoutes(
  api: AgentApi,
  deps: {
    version: string;
    langgraphVersion: string;
    features: ServerFeatures;
    checkDb(): Promise<void>;
    /** Serve `/info` (off with `http.disable_meta`). */ info: boolean;
  },
): void {
  api.route({
    method: 'get',
    path: '/ok',
    access: 'public',
    summary: 'Liveness (check_db=1 also checks Postgres)',
    tags: ['system'],
    query: z.strictObject({ check_db: Flag.optional() }),
    response: z.strictObject({ ok: z.literal(true) }),
    handler: async ({ query }) => {
      if (query.check_db) await deps.checkDb();
      return { ok: true as const };
    },
  });
  if (!deps.info) return;
  api.route({
    method: 'get',
    path: '/info',
    access: ['deployment_credential'],
    summary: 'Server version and features',
    tags: ['system'],
    response: z.strictObject({
      version: z.string(),
      langgraph_js_version: z.string(),
      context: z.literal('js'),
      flags: z.strictObject({
        assistants: z.boolean(),
        crons: z.boolean(),
        store: z.boolean(),
        webhooks: z.boolean(),
        mcp: z.boolean(),
        langsmith: z.boolean(),
        langsmith_tracing_replicas: z.boolean(),
      }),
      metadata: z.strictObject({ server: z.string() }),
    }),
    handler: () => ({
      version: deps.version,
      langgraph_js_version: deps.langgraphVersion,
      context: 'js' as const,
      flags: { ...deps.features, langsmith: false, langsmith_tracing_replicas: false },
      metadata: { server: 'berth' },
    }),
  });
}
