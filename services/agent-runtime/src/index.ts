/**
 * Agent runtime: the agent server of one deployed revision (`startAgentServer`, run by `serve.ts`),
 * and the pieces the platform hands to it (its serve and artifact-fetch scripts).
 */
import { fileURLToPath } from 'node:url';

export { AGENT_SERVER_VERSION, startAgentServer } from './server.js';
export { redisAclRules, redisKeyPrefix } from './redis-acl.js';
export { loadAgentServeConfig } from './env.js';
export { InvalidWebhookSecretError, generateWebhookSecret, webhookKey } from './runs/webhooks.js';
export type { AgentServeConfig } from './env.js';

/**
 * The built script that serves one deployed revision (`node <this>` with the environment of
 * `loadAgentServeConfig`). Resolved from the package root, so it is the same from src and dist.
 */
export const AGENT_SERVE_SCRIPT: string = fileURLToPath(new URL('../dist/serve.js', import.meta.url));
/** The built script an init container runs to fetch a revision's artifact (`loadArtifactFetchConfig`). */
export const ARTIFACT_FETCH_SCRIPT: string = fileURLToPath(new URL('../dist/fetch-artifact.js', import.meta.url));
export { ARTIFACT_AUTH_SCHEME, ArtifactChecksumError, ArtifactFetchError, fetchArtifact, sha256File, unpackArchive, type ArtifactFetchOptions } from './artifact/fetch.js';
export type { AgentServerConfig, RunningAgentServer } from './server.js';

// Project loading, for the control plane's build step (it validates a project in a child process).
export {
  GraphLoadError,
  ProjectConfigError,
  ensureTypeScriptLoader,
  graphSchemas,
  loadGraphs,
  loadProjectConfig,
  loadProjectEnv,
  onFileLoaded,
  registerSdkLogger,
} from './project/index.js';
export type { LoadedGraph, ProjectConfig } from './project/index.js';
