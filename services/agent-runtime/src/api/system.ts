/**
 * /ok and /info.
 */
import type { Api } from '@berth/http';
import { z } from 'zod';
import type { RequestAuth } from '../auth/index.js';
import { Flag } from './schemas.js';

export function systemRoutes(api: Api<RequestAuth>, deps: { version: string; langgraphVersion: string; checkDb(): Promise<void> }): void {
  api
    .route({
      method: 'get',
      path: '/ok',
      summary: 'Liveness (check_db=1 also checks Postgres)',
      tags: ['system'],
      public: true,
      query: z.strictObject({ check_db: Flag.optional() }),
      response: z.object({ ok: z.literal(true) }),
      handler: async ({ query }) => {
        if (query.check_db) await deps.checkDb();
        return { ok: true as const };
      },
    })
    .route({
      method: 'get',
      path: '/info',
      summary: 'Server version and features',
      tags: ['system'],
      public: true,
      response: z.unknown(),
      handler: () => ({
        version: deps.version,
        langgraph_js_version: deps.langgraphVersion,
        context: 'js',
        flags: { assistants: true, crons: false, langsmith: false, langsmith_tracing_replicas: false },
        metadata: { server: 'berth' },
      }),
    });
}
