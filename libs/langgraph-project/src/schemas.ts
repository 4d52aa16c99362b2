/**
 * JSON Schemas of a graph (GET /assistants/{id}/schemas) and validation of run/assistant
 * `context` against the graph's context schema, both derived at runtime from the compiled graph.
 *
 * Sources, in order: `@langchain/langgraph/zod/schema` (zod and `StateSchema` states, zod context
 * schemas, honouring `withLangGraph` metadata such as `langgraph_type: "messages"`); then a plain
 * zod v4 conversion that renders unrepresentable parts (`z.custom`) as `{}`; then, for
 * `Annotation.Root` states, the TypeScript types of the graph's module (a `TypeSchemaSource`), else
 * an object schema listing the channel names. Context schemas declared
 * any other way than as a zod object (`Annotation.Root`, `StateSchema`, other Standard Schemas)
 * come from `context-schema.ts`.
 */
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import { getConfigTypeSchema, getInputTypeSchema, getOutputTypeSchema, getStateTypeSchema } from '@langchain/langgraph/zod/schema';
import { toJSONSchema, type ZodType } from 'zod';
import { contextSchemaOf, isNamesOnly, markNamesOnly, type ContextProblem, type ContextSchema, type JsonSchema } from './context-schema.js';
import type { LoadedGraph, RunnableGraph } from './graphs.js';

export type { ContextProblem, JsonSchema };

/** The schemas a graph's TypeScript types declare, for what exists only as types at runtime. */
export interface TypeSchemas {
  input: JsonSchema | null;
  output: JsonSchema | null;
  context: JsonSchema | null;
}

/**
 * Reads the TypeScript-declared schemas of a graph module's export (the agent server's
 * TypeSchemaReader, which runs the compiler in a worker); null when they cannot be read.
 */
export interface TypeSchemaSource {
  read(graphId: string, sourceFile: string, exportName: string, urgent?: boolean): Promise<TypeSchemas | null>;
}

/** The body of GET /assistants/{id}/schemas. */
export interface GraphSchemas {
  graph_id: string;
  input_schema: JsonSchema | null;
  output_schema: JsonSchema | null;
  state_schema: JsonSchema | null;
  /** Same as `context_schema`: the LangGraph.js server reports the context schema for both. */
  config_schema: JsonSchema | null;
  context_schema: JsonSchema | null;
}

/** Checks a `context` object against a graph's context schema. */
export type ContextValidator = (context: unknown) => ContextProblem[];

interface BuilderInternals {
  _metaRegistry?: unknown;
  _schemaDefinition?: Record<string, unknown>;
  _inputDefinition?: Record<string, unknown>;
  _outputDefinition?: Record<string, unknown>;
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
}

type SchemaFn = (graph: unknown, registry?: never) => unknown;

function builderOf(graph: RunnableGraph): BuilderInternals | undefined {
  const builder = (graph as unknown as { builder?: unknown }).builder;
  return typeof builder === 'object' && builder !== null ? (builder as BuilderInternals) : undefined;
}

function isZodV4(value: unknown): value is ZodType {
  return typeof value === 'object' && value !== null && '_zod' in value;
}

function asSchema(value: unknown): JsonSchema | null {
  return typeof value === 'object' && value !== null ? (value as JsonSchema) : null;
}

/** LangGraph's own conversion of one of a graph's schemas, with the graph's registry (a project with its own copy of LangGraph has its own). */
function langGraphJson(graph: RunnableGraph, fn: SchemaFn): JsonSchema | null {
  const builder = builderOf(graph);
  if (!builder) return null;
  try {
    return asSchema(fn(graph, builder._metaRegistry as never));
  } catch {
    return null; // The callers fall back to simpler conversions.
  }
}

/** One schema: LangGraph's converter, then plain zod v4, then the channel names. */
function derive(
  graph: RunnableGraph,
  fn: SchemaFn,
  runtimeDefinition: unknown,
  channels: Record<string, unknown> | undefined,
  io: 'input' | 'output',
): JsonSchema | null {
  if (!builderOf(graph)) return null;
  const schema = langGraphJson(graph, fn);
  if (schema) return schema;
  if (isZodV4(runtimeDefinition)) {
    try {
      return asSchema(toJSONSchema(runtimeDefinition, { unrepresentable: 'any', io }));
    } catch {
      // Fall through.
    }
  }
  if (channels && Object.keys(channels).length > 0) {
    const names = Object.keys(channels).filter((name) => !name.startsWith('__'));
    return markNamesOnly({ type: 'object', properties: Object.fromEntries(names.map((name) => [name, {}])) });
  }
  return null;
}

/** What is derived from one compiled graph: its schemas and its context schema's check. */
interface Derived {
  schemas: GraphSchemas;
  context: ContextSchema | null;
}

function schemasOf(graph: RunnableGraph, graphId: string): Derived {
  const b = builderOf(graph) ?? {};
  const input = b._inputRuntimeDefinition;
  const context = contextSchemaOf(b as Record<string, unknown>, () => langGraphJson(graph, getConfigTypeSchema as SchemaFn));
  const schemas: GraphSchemas = {
    graph_id: graphId,
    input_schema: derive(graph, getInputTypeSchema as SchemaFn, isZodV4(input) ? input : b._schemaRuntimeDefinition, b._inputDefinition, 'input'),
    output_schema: derive(graph, getOutputTypeSchema as SchemaFn, b._outputRuntimeDefinition, b._outputDefinition, 'output'),
    state_schema: derive(graph, getStateTypeSchema as SchemaFn, b._schemaRuntimeDefinition, b._schemaDefinition, 'output'),
    config_schema: context?.json ?? null,
    context_schema: context?.json ?? null,
  };
  return { schemas, context };
}

const cache = new WeakMap<RunnableGraph, Derived>();

function cachedSchemasOf(graph: RunnableGraph, graphId: string): Derived {
  let derived = cache.get(graph);
  if (!derived) cache.set(graph, (derived = schemasOf(graph, graphId)));
  return derived;
}

/** The JSON Schemas of one compiled graph, e.g. a subgraph (cached; treat as read-only). */
export function compiledGraphSchemas(graph: RunnableGraph, graphId: string): GraphSchemas {
  return cachedSchemasOf(graph, graphId).schemas;
}

/**
 * The JSON Schemas of a graph (`null` where nothing is known), computed from its `template`
 * and cached (treat the result as read-only). A factory is called with `config` when one is
 * given, or when it has no template.
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function graphSchemas(loaded: LoadedGraph, options: { config?: LangGraphRunnableConfig; types?: TypeSchemaSource } = {}): Promise<GraphSchemas> {
  const schemas =
    loaded.template && (options.config === undefined || loaded.kind !== 'factory')
      ? cachedSchemasOf(loaded.template, loaded.graphId).schemas
      : schemasOf(await loaded.getGraph(options.config ?? { configurable: {} }, { checkpointer: null }), loaded.graphId).schemas;
  if (!options.types || !namesOnly(schemas)) return schemas;
  return withTypes(schemas, await options.types.read(loaded.graphId, loaded.spec.sourceFile, loaded.spec.exportName, true));
}

/**
 * Starts reading the TypeScript types of a graph whose schemas need them (in `types`' worker), so
 * that a later `graphSchemas` finds them read. Graphs built per run (no template) are left to it.
 */
export function prepareTypeSchemas(loaded: LoadedGraph, types: TypeSchemaSource): void {
  if (loaded.template && namesOnly(cachedSchemasOf(loaded.template, loaded.graphId).schemas)) {
    void types.read(loaded.graphId, loaded.spec.sourceFile, loaded.spec.exportName);
  }
}

/** Whether some of `schemas` list channel names only (their types are needed). */
export function namesOnly(schemas: GraphSchemas): boolean {
  return (['input_schema', 'output_schema', 'state_schema', 'context_schema'] as const).some((key) => isNamesOnly(schemas[key]));
}

/** `schemas` with channel-name-only schemas replaced by their TypeScript-declared ones. */
export function withTypes(schemas: GraphSchemas, types: TypeSchemas | null): GraphSchemas {
  if (!types) return schemas;
  const pick = (derived: JsonSchema | null, typed: JsonSchema | null) =>
    typed && isNamesOnly(derived) ? { ...typed, ...(derived?.additionalProperties === false ? { additionalProperties: false } : {}) } : derived;
  const context = pick(schemas.context_schema, types.context);
  return {
    ...schemas,
    input_schema: pick(schemas.input_schema, types.input),
    output_schema: pick(schemas.output_schema, types.output),
    // The channels of the state a thread holds: those the graph outputs, as declared.
    state_schema: pick(schemas.state_schema, types.output),
    config_schema: context,
    context_schema: context,
  };
}

/**
 * A validator for `context` values of a graph, built from its `template`, for every way LangGraph.js
 * accepts a context schema (see `context-schema.ts`). It reports keys the schema does not define
 * (`extra_forbidden`, unless a zod object allows unknown keys) and values of defined keys that do
 * not match (zod's issue code as `type`, else `value_error`). Keys the schema requires but the
 * context lacks are not reported: assistant contexts may be partial. A graph without a context
 * schema, or a factory without a template, accepts any object; `null`/`undefined` are always accepted.
 */
export function contextValidator(loaded: LoadedGraph): ContextValidator {
  const schema = loaded.template ? cachedSchemasOf(loaded.template, loaded.graphId).context : null;
  return (context) => {
    if (context == null) return [];
    if (!isPlainObject(context)) return [notAnObject()];
    return schema ? schema.check(context) : [];
  };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function notAnObject(): ContextProblem {
  return { path: [], message: 'context must be an object', type: 'object_type' };
}
