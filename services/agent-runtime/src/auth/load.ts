/**
 * Loading the `Auth` object that `auth.path` of langgraph.json names. The `Auth` class of
 * `@langchain/langgraph-sdk/auth` keeps its handlers in a `~handlerCache` field
 * (`authenticate` and `callbacks` keyed by `"*"`, `"threads"`, `"threads:create"`, `"*:read"`…);
 * the server reads them from there, as the LangGraph JS server does. The project may have its own
 * copy of the SDK, so the object is recognised by that field, not with `instanceof`.
 */
import { importProjectExport, type ProjectConfig } from '@berth/langgraph-project';
import { AuthLoadError } from './errors.js';

/** The argument of an authorization handler (`auth.on(...)`). */
export interface AuthorizationInput {
  event: string;
  resource: string;
  action: string;
  value: unknown;
  permissions: string[];
  user: Record<string, unknown>;
}

/** An authorization handler: nothing/true allows, false refuses, an object is a metadata filter. */
export type AuthorizationCallback = (input: AuthorizationInput) => unknown;

/** The handlers of an `Auth` object, read live from it (handlers added later are seen too). */
export interface HandlerCache {
  authenticate?: (request: Request) => unknown;
  callbacks?: Record<string, AuthorizationCallback>;
}

/** A loaded custom auth: the `Auth` object's handlers plus the `auth` options of langgraph.json. */
export interface CustomAuth {
  /** `auth.path` as written. */
  spec: string;
  handlers: HandlerCache;
  /** When false, requests with `x-auth-scheme: langsmith` act as the Studio user without `authenticate`. */
  disableStudioAuth: boolean;
}

function isHandlerCache(value: unknown): value is HandlerCache {
  if (typeof value !== 'object' || value === null) return false;
  const cache = value as HandlerCache;
  return (
    (cache.authenticate === undefined || typeof cache.authenticate === 'function') &&
    (cache.callbacks === undefined || (typeof cache.callbacks === 'object' && cache.callbacks !== null))
  );
}

/**
 * Imports the project's `auth.path` module and returns its `Auth` handlers, or undefined when
 * the project declares no `auth`.
 * @throws AuthLoadError when the module fails to import, lacks the export, the export is not an
 *   `Auth`, or the `Auth` has no `authenticate` handler (its authorization handlers would
 *   otherwise never run).
 */
export async function loadCustomAuth(project: ProjectConfig): Promise<CustomAuth | undefined> {
  if (!project.auth) return undefined;
  const { exportName } = project.auth;
  const spec = project.json.auth?.path ?? `${project.auth.file}:${exportName}`;
  const exported = await importProjectExport(project.projectDir, project.auth, (problem, cause) => new AuthLoadError(spec, problem, { cause }));
  const cache = typeof exported === 'object' && exported !== null ? (exported as Record<string, unknown>)['~handlerCache'] : undefined;
  if (!isHandlerCache(cache)) {
    throw new AuthLoadError(
      spec,
      `export "${exportName}" is not an Auth instance (expected \`new Auth()\` from "@langchain/langgraph-sdk/auth", got ${describe(exported)})`,
    );
  }
  if (!cache.authenticate) {
    throw new AuthLoadError(spec, `the Auth object has no authenticate handler: register one with auth.authenticate(async (request) => ...)`);
  }
  return { spec, handlers: cache, disableStudioAuth: project.auth.disableStudioAuth };
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'function') return `a function${value.name ? ` (${value.name})` : ''}`;
  if (typeof value === 'object') return `an object${value.constructor?.name ? ` (${value.constructor.name})` : ''}`;
  return `a ${typeof value}`;
}
