/**
 * Who may call an agent server's route, as routes declare it in `access`:
 * - `'public'`: anyone who reaches the port (only `GET /ok`, the liveness probe);
 * - `deployment_credential`: requests the gateway forwarded (they carry the deployment credential,
 *   when the server has one); the project's auth handler is not asked (`/info`, UI bundle files);
 * - `custom_auth`: as `deployment_credential`, and then the project's auth handler (`auth.path`),
 *   when it has one, which says who the user is.
 * The table of every route and what it takes is checked in (route-access.txt, route-access.test.ts).
 */
import type { Api } from '@berth/http';
import type { RequestAuth } from '../auth/index.js';

export type AgentCredential = 'deployment_credential' | 'custom_auth';

/** The agent server's route registry. */
export type AgentApi = Api<RequestAuth, AgentCredential>;
