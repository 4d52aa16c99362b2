/**
 * The validation process of a build: loads a built project with the agent server's own loader
 * (`@berth/langgraph-project`: `langgraph.json`, then every graph module) and reports what it found over IPC. It runs apart
 * from the control plane so that project code that crashes, exits or hangs only ends this process.
 *
 * It starts (and imports the loader) while dependencies are still installing, says `ready`, and
 * validates when the builder sends `validate`; then it exits. Output of project code goes to
 * stdout/stderr, which the builder streams into the build log.
 *
 * Run as `node validate-child.js` (built), or `node --conditions=berth-source --import tsx
 * validate-child.ts` from sources.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ensureTypeScriptLoader, graphSchemas, loadGraphs, loadProjectConfig, loadProjectEnv, registerSdkLogger } from '@berth/langgraph-project';
import { createLogger } from '@berth/log';

// Graph modules may call the SDK's getLogger() as they load; what they log goes to the build log.
registerSdkLogger(createLogger({ name: 'build-validate', destination: process.stderr }));
// Registered now, while dependencies install, with the tsconfig `loadGraphs` will name (the
// project's, beside langgraph.json, which is this process's folder).
await ensureTypeScriptLoader(existsSync('tsconfig.json') ? resolve('tsconfig.json') : false);

/** builder → child */
export interface ValidateRequest {
  type: 'validate';
  /** Absolute path of `langgraph.json`. */
  configPath: string;
  /** Variables the project sees (the deployment's secrets), besides its own `env`. */
  env: Record<string, string>;
}

/** One graph as the loader classified it. */
export interface ValidatedGraph {
  id: string;
  kind: 'compiled' | 'builder' | 'factory';
  description?: string;
}

/** child → builder */
export type ValidateMessage =
  { type: 'ready' } | { type: 'result'; graphs: ValidatedGraph[]; warnings: string[] } | { type: 'failed'; name: string; message: string; causes: string[] };

function send(message: ValidateMessage, exitCode?: number): void {
  process.send!(message, () => {
    // Graph modules may leave timers or sockets open; this process has done its job.
    if (exitCode !== undefined) process.exit(exitCode);
  });
}

/** The messages of `error.cause`, `error.cause.cause`, … (a GraphLoadError wraps the import's). */
function causes(error: unknown): string[] {
  const list: string[] = [];
  let cause = (error as { cause?: unknown } | undefined)?.cause;
  for (let depth = 0; cause !== undefined && depth < 5; depth += 1) {
    const text = cause instanceof Error ? cause.message : String(cause);
    if (text && !list.includes(text)) list.push(text);
    cause = (cause as { cause?: unknown } | undefined)?.cause;
  }
  return list;
}

let done = false;

function fail(error: unknown): void {
  if (done) return;
  done = true;
  const err = error instanceof Error ? error : new Error(String(error));
  send({ type: 'failed', name: err.name, message: err.message, causes: causes(err) }, 1);
}

async function validate(request: ValidateRequest): Promise<void> {
  const config = loadProjectConfig(request.configPath);
  // As the agent server does: the deployment's values win over the project's own `env`; a
  // missing env file is fine (`.env` files are never uploaded; their values come as secrets).
  // Graph code reads them from process.env (this child process exists to load it).
  /* eslint-disable berth/no-process-env -- handing the project's env to graph code, not reading a setting */
  for (const [key, value] of Object.entries(request.env)) process.env[key] = value;
  for (const [key, value] of Object.entries(loadProjectEnv(config, { missingFileOk: true }))) process.env[key] ??= value;
  /* eslint-enable berth/no-process-env */
  const warnings = [...config.warnings];
  const graphs = await loadGraphs(config);
  const result: ValidatedGraph[] = [];
  for (const graph of graphs.values()) {
    result.push({ id: graph.graphId, kind: graph.kind, ...(graph.description !== undefined ? { description: graph.description } : {}) });
    if (graph.kind === 'factory' && !graph.template) {
      warnings.push(`graph "${graph.graphId}": the factory did not return a graph when called without configuration; runs will call it with theirs`);
      continue;
    }
    try {
      await graphSchemas(graph);
    } catch (error) {
      warnings.push(`graph "${graph.graphId}": its JSON schemas cannot be derived (${(error as Error).message}); /assistants/{id}/schemas will fail`);
    }
  }
  if (!done) {
    done = true;
    send({ type: 'result', graphs: result, warnings }, 0);
  }
}

process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
process.on('message', (message: ValidateRequest) => {
  if (message?.type === 'validate') validate(message).catch(fail);
});
// The builder may go away (cancelled, crashed): do not outlive it.
process.on('disconnect', () => process.exit(2));
send({ type: 'ready' });
