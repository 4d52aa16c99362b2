/**
 * What the agent server derives from the graphs of a loaded project (`@berth/langgraph-project`
 * loads it): drawings, subgraph schemas, schemas read from TypeScript types, system assistant ids
 * and their LANGGRAPH_CONFIG defaults, the store's embeddings and the project's UI bundle.
 */
export { systemAssistantDefaults, type SystemAssistantDefaults } from './system-assistants.js';
export { graphSubgraphs, type SubgraphSchemas } from './subgraphs.js';
export { TypeSchemaReader } from './type-schema-reader.js';
export { graphDrawing, type DrawingEdge, type DrawingNode, type GraphDrawing } from './drawing.js';
export { GRAPH_ASSISTANT_NAMESPACE, systemAssistantId, uuidv5 } from './uuid.js';
