/**
 * Agent runtime: the agent server of a deployment (its API arrives with the agent-server issue).
 * For now it serves the standard gRPC health service, which the gateway's /readyz checks.
 */
import { fileURLToPath } from 'node:url';
import type { GrpcServerConfig } from '@berth/config';
import { createLogger, type Logger } from '@berth/log';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';

export { loadAgentRuntimeConfig } from './env.js';

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.agentruntime.v1';

export type AgentRuntimeConfig = GrpcServerConfig;

export async function start(
  config: AgentRuntimeConfig,
  logger: Logger = createLogger({ name: 'agent-runtime', level: config.logLevel }),
): Promise<RunningGrpcService> {
  return startGrpcService({ name: SERVICE_NAME, host: config.grpcHost, port: config.grpcPort, logger, internalToken: config.internalToken });
}

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
