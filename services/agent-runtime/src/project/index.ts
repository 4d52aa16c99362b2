/**
 * Loading a LangGraph.js project (`langgraph.json` and the graphs it names) without a build
 * step, and what the agent server derives from its graphs: JSON Schemas, context validation,
 * drawings and system assistant ids.
 */
export { GraphLoadError, ProjectConfigError } from './errors.js';
export {
  langGraphJsonSchema,
  loadProjectConfig,
  resolveModuleSpec,
  servedFeatures,
  type ServedFeatures,
  type GraphSpec,
  type LangGraphJson,
  type ProjectConfig,
} from './config.js';
export { loadProjectEnv, parseDotenv, systemAssistantDefaults, type SystemAssistantDefaults } from './env.js';
export {
  inspectionGraph,
  loadGraph,
  loadGraphs,
  type GetGraphOptions,
  type GraphExportKind,
  type LoadedGraph,
  type RunnableGraph,
} from './graphs.js';
export { ensureTypeScriptLoader, importSourceFile, onFileLoaded } from './import-module.js';
export { registerSdkLogger } from './sdk-logger.js';
export { captureContextDeclarations } from './context-schema.js';
export {
  contextValidator,
  graphSchemas,
  prepareTypeSchemas,
  type ContextProblem,
  type ContextValidator,
  type GraphSchemas,
  type JsonSchema,
} from './schemas.js';
export { graphSubgraphs, type SubgraphSchemas } from './subgraphs.js';
export { TypeSchemaReader } from './type-schema-reader.js';
export { graphDrawing, type DrawingEdge, type DrawingNode, type GraphDrawing } from './drawing.js';
export { GRAPH_ASSISTANT_NAMESPACE, systemAssistantId, uuidv5 } from './uuid.js';
