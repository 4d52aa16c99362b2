/**
 * Errors of project loading. Both are BerthErrors, so the HTTP and gRPC mappings know them.
 */
import { BerthError } from '@berth/errors';

/**
 * `langgraph.json` (or a file it names) is missing or invalid. The message names the config
 * file and the offending key, e.g. `/app/langgraph.json: graphs.agent: file not found: ./src/a.ts`.
 */
export class ProjectConfigError extends BerthError {
  /** Absolute path of the config (or env) file at fault. */
  readonly file: string;
  /** Dotted key inside the config, when one is at fault (e.g. `graphs.agent`, `http.cors`). */
  readonly key: string | undefined;

  constructor(file: string, key: string | undefined, problem: string, options?: { cause?: unknown }) {
    super('invalid_argument', `${file}: ${key ? `${key}: ` : ''}${problem}`, options);
    this.file = file;
    this.key = key;
  }
}

/**
 * A graph could not be obtained: its file failed to import, the export is missing, the export
 * (or what a factory returned) is not a graph, or a factory threw. `cause` holds the original.
 */
export class GraphLoadError extends BerthError {
  /** The graph id from `langgraph.json`. */
  readonly graphId: string;

  constructor(graphId: string, problem: string, options?: { cause?: unknown }) {
    super('internal', `graph "${graphId}": ${problem}`, options);
    this.graphId = graphId;
  }
}
