/**
 * A LangGraph.js project, loaded without a build step: `langgraph.json` read and validated, the
 * graph specs it names resolved, its `env`, its graph modules imported and classified, and the
 * JSON Schemas of each graph. The agent server serves what this loads; the control plane's build
 * step loads a project with it to validate it before deploying.
 */
export { GraphLoadError, ProjectConfigError } from './errors.js';
export {
  MAX_THREAD_TTL_MINUTES,
  langGraphJsonSchema,
  loadProjectConfig,
  resolveModuleSpec,
  servedFeatures,
  type ServedFeatures,
  type GraphSpec,
  type LangGraphJson,
  type ProjectConfig,
} from './config.js';
export { loadProjectEnv, parseDotenv } from './env.js';
export { inspectionGraph, loadGraph, loadGraphs, type GetGraphOptions, type GraphExportKind, type LoadedGraph, type RunnableGraph } from './graphs.js';
export { ensureTypeScriptLoader, importProjectExport, noteLoadedFile, onFileLoaded } from './import-module.js';
export { registerSdkLogger } from './sdk-logger.js';
export { captureContextDeclarations } from './context-schema.js';
export {
  compiledGraphSchemas,
  contextValidator,
  graphSchemas,
  namesOnly,
  prepareTypeSchemas,
  withTypes,
  type ContextProblem,
  type ContextValidator,
  type GraphSchemas,
  type JsonSchema,
  type TypeSchemas,
  type TypeSchemaSource,
} from './schemas.js';
