/**
 * Custom authentication and authorization of the agent server (`auth.path` in langgraph.json),
 * compatible with `Auth` from `@langchain/langgraph-sdk/auth` as the LangGraph JS server uses it.
 */
export { createAuthenticator, fromHandlerError, isHttpException, normalizeUser, toFetchRequest } from './authenticate.js';
export { Authorizer, metadataOf, toMetadataFilter, type Authorization } from './authorize.js';
export { AuthHandlerError, AuthHttpError, AuthLoadError } from './errors.js';
export { authErrorHandler } from './http.js';
export { loadCustomAuth, type AuthorizationCallback, type AuthorizationInput, type CustomAuth, type HandlerCache } from './load.js';
export { STUDIO_USER, type AuthContext, type AuthEvent, type AuthResource, type AuthUser, type RequestAuth } from './types.js';
