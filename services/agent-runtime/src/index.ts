/**
 * Agent runtime: the agent server of one deployed revision (`startAgentServer`, run by `serve.ts`),
 * and the scripts the platform runs: the agent server and the init container's artifact fetch.
 */
import { fileURLToPath } from 'node:url';

export { AGENT_SERVER_VERSION, startAgentServer } from './server.js';
export { loadAgentServeConfig } from './env.js';
export type { AgentServeConfig } from './env.js';

/**
 * The built script that serves one deployed revision (`node <this>` with the environment of
 * `loadAgentServeConfig`). Resolved from the package root, so it is the same from src and dist.
 */
export const AGENT_SERVE_SCRIPT: string = fileURLToPath(new URL('../dist/serve.js', import.meta.url));
/** The built script an init container runs to fetch a revision's artifact (`loadArtifactFetchConfig`). */
export const ARTIFACT_FETCH_SCRIPT: string = fileURLToPath(new URL('../dist/fetch-artifact.js', import.meta.url));
export { ArtifactChecksumError, ArtifactFetchError, fetchArtifact, sha256File, unpackArchive, type ArtifactFetchOptions } from './artifact/fetch.js';
export type { AgentServerConfig, RunningAgentServer } from './server.js';
