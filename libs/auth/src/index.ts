import { fileURLToPath } from 'node:url';

export { assertPlatformAdmin, assertTenantAdmin, authenticateHeaders } from './authenticate.js';
export { ACCESS_TOKEN_PREFIX, API_KEY_PREFIX, digest, generateAccessToken, generateApiKey } from './secrets.js';
export { ConsoleSessions, DEFAULT_SESSION_LIMITS, sessionCsrfToken } from './sessions.js';
export type { SessionClock, SessionLimits, SessionRecord } from './sessions.js';
export { AuthStore } from './store.js';
export type { ApiKeyRecord, CreateApiKeyInput, Principal, Role, Tenant } from './store.js';
export type { AuthTables } from './tables.js';

/** Folder of this package's SQL migrations (applied into the gateway's schema). */
export const authMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));
