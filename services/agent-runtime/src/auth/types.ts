/**
 * The shapes custom authentication works with: the authenticated user, what a request carries
 * after authentication, and the resource events authorization handlers are called for.
 */

/**
 * The user an `authenticate` handler returned, normalised: `identity` is always there,
 * `permissions` defaults to `[]`, `display_name` to the identity, `is_authenticated` to true;
 * any other field the handler returned is kept.
 */
export interface AuthUser {
  identity: string;
  display_name: string;
  is_authenticated: boolean;
  permissions: string[];
  [key: string]: unknown;
}

/** What an authenticated request carries: its user and the user's permissions (scopes). */
export interface AuthContext {
  user: AuthUser;
  permissions: string[];
}

/** The `auth` of a route handler: undefined when the project has no custom auth (or on public routes). */
export type RequestAuth = AuthContext | undefined;

/** Resources that authorization handlers can guard. */
export type AuthResource = 'threads' | 'assistants' | 'crons' | 'store';

/** `resource:action` events of the agent server's routes (the SDK's `EventValueMap` keys it serves). */
export type AuthEvent =
  | 'threads:create'
  | 'threads:read'
  | 'threads:update'
  | 'threads:delete'
  | 'threads:search'
  | 'threads:create_run'
  | 'assistants:create'
  | 'assistants:read'
  | 'assistants:update'
  | 'assistants:delete'
  | 'assistants:search'
  | 'crons:create'
  | 'crons:read'
  | 'crons:update'
  | 'crons:delete'
  | 'crons:search'
  | 'store:put'
  | 'store:get'
  | 'store:delete'
  | 'store:search'
  | 'store:list_namespaces';

/** The user of LangGraph Studio requests (header `x-auth-scheme: langsmith`), as the LangGraph JS server defines it. */
export const STUDIO_USER: Readonly<AuthUser> = Object.freeze({
  identity: 'langgraph-studio-user',
  display_name: 'langgraph-studio-user',
  is_authenticated: true,
  permissions: [],
  kind: 'StudioUser',
});
