/**
 * JSON Schemas of a graph (GET /assistants/{id}/schemas) and validation of run/assistant
 * `context` against the graph's context schema, both derived at runtime from the compiled graph.
 *
 * Sources, in order: `@langchain/langgraph/zod/schema` (zod and `StateSchema` states, zod context
 * schemas, honouring `withLangGraph` metadata such as `langgraph_type: "messages"`); then a plain
 * zod v4 conversion that renders unrepresentable parts (`z.custom`) as `{}`; then, for
 * `Annotation.Root` states, an object schema listing the channel names. LangGraph 1.7 keeps a
 * context schema at runtime only when it is a zod object (`builder._configRuntimeSchema`); an
 * `Annotation.Root` context leaves no trace, so such graphs report `context_schema: null`.
 */
import type { LangGraphRunnableConfig } from '@langchain/langgraph';
import {
  getConfigTypeSchema,
  getInputTypeSchema,
  getOutputTypeSchema,
  getStateTypeSchema,
} from '@langchain/langgraph/zod/schema';
import { toJSONSchema, type ZodType } from 'zod';
import type { LoadedGraph, RunnableGraph } from './graphs.js';

/** A JSON Schema document. */
export type JsonSchema = Record<string, unknown>;

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

/** One problem with a `context` value; `path` is relative to the context object. */
export interface ContextProblem {
  path: (string | number)[];
  message: string;
  type: string;
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
  _configRuntimeSchema?: unknown;
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

/** One schema: LangGraph's converter, then plain zod v4, then the channel names. */
function derive(
  graph: RunnableGraph,
  fn: SchemaFn,
  runtimeDefinition: unknown,
  channels: Record<string, unknown> | undefined,
  io: 'input' | 'output',
): JsonSchema | null {
  const builder = builderOf(graph);
  if (!builder) return null;
  try {
    // The graph's own registry: a project with its own copy of LangGraph has its own.
    const schema = asSchema(fn(graph, builder._metaRegistry as never));
    if (schema) return schema;
  } catch {
    // Fall through to the simpler conversions.
  }
  if (isZodV4(runtimeDefinition)) {
    try {
      return asSchema(toJSONSchema(runtimeDefinition, { unrepresentable: 'any', io }));
    } catch {
      // Fall through.
    }
  }
  if (channels && Object.keys(channels).length > 0) {
    const names = Object.keys(channels).filter((name) => !name.startsWith('__'));
    return { type: 'object', properties: Object.fromEntries(names.map((name) => [name, {}])) };
  }
  return null;
}

/** The schemas of one compiled graph. */
function schemasOf(graph: RunnableGraph, graphId: string): GraphSchemas {
  const b = builderOf(graph) ?? {};
  const input = b._inputRuntimeDefinition;
  const context = derive(graph, getConfigTypeSchema as SchemaFn, b._configRuntimeSchema, undefined, 'input');
  return {
    graph_id: graphId,
    input_schema: derive(
      graph,
      getInputTypeSchema as SchemaFn,
      isZodV4(input) ? input : b._schemaRuntimeDefinition,
      b._inputDefinition,
      'input',
    ),
    output_schema: derive(
      graph,
      getOutputTypeSchema as SchemaFn,
      b._outputRuntimeDefinition,
      b._outputDefinition,
      'output',
    ),
    state_schema: derive(graph, getStateTypeSchema as SchemaFn, b._schemaRuntimeDefinition, b._schemaDefinition, 'output'),
    config_schema: context,
    context_schema: context,
  };
}

const cache = new WeakMap<RunnableGraph, GraphSchemas>();

function cachedSchemasOf(graph: RunnableGraph, graphId: string): GraphSchemas {
  let schemas = cache.get(graph);
  if (!schemas) cache.set(graph, (schemas = schemasOf(graph, graphId)));
  return schemas;
}

/**
 * The JSON Schemas of a graph (`null` where nothing is known), computed from its `template`
 * and cached (treat the result as read-only). A factory is called with `config` when one is
 * given, or when it has no template.
 * @throws GraphLoadError when a factory has to be called and fails.
 */
export async function graphSchemas(
  loaded: LoadedGraph,
  options: { config?: LangGraphRunnableConfig } = {},
): Promise<GraphSchemas> {
  if (loaded.template && (options.config === undefined || loaded.kind !== 'factory')) {
    return cachedSchemasOf(loaded.template, loaded.graphId);
  }
  const graph = await loaded.getGraph(options.config ?? { configurable: {} }, { checkpointer: null });
  return schemasOf(graph, loaded.graphId);
}

interface SafeParser {
  safeParse(value: unknown): { success: boolean; error?: { issues: { path: PropertyKey[]; message: string; code?: string }[] } };
}

/**
 * A validator for `context` values of a graph, built from its `template`. It reports keys the
 * context schema does not define (`extra_forbidden`, unless the schema allows additional
 * properties) and values of defined keys that do not match (the zod issue code as `type`).
 * Keys the schema requires but the context lacks are not reported: assistant contexts may be
 * partial. A graph without a (zod) context schema, or a factory without a template, accepts any
 * object; `null`/`undefined` are always accepted.
 */
export function contextValidator(loaded: LoadedGraph): ContextValidator {
  const schema = loaded.template ? cachedSchemasOf(loaded.template, loaded.graphId).context_schema : null;
  if (!schema) return (context) => (context == null || isPlainObject(context) ? [] : [notAnObject()]);
  const runtime = builderOf(loaded.template!)?._configRuntimeSchema;
  const parser = typeof (runtime as SafeParser | undefined)?.safeParse === 'function' ? (runtime as SafeParser) : undefined;
  const properties = asSchema(schema.properties) ?? {};
  const known = Object.keys(properties);
  const allowsExtra = allowsUnknownKeys(runtime, schema);

  return (context) => {
    if (context == null) return [];
    if (!isPlainObject(context)) return [notAnObject()];
    const problems: ContextProblem[] = [];
    if (!allowsExtra) {
      for (const key of Object.keys(context)) {
        if (Object.hasOwn(properties, key)) continue;
        const hint = known.length ? `; the graph's context accepts: ${known.join(', ')}` : '';
        problems.push({ path: [key], message: `Extra inputs are not permitted${hint}`, type: 'extra_forbidden' });
      }
    }
    const result = parser?.safeParse(context);
    for (const issue of result && !result.success ? (result.error?.issues ?? []) : []) {
      const top = issue.path[0];
      // Missing keys are fine (partial contexts); unknown keys are reported above.
      if (typeof top !== 'string' || !Object.hasOwn(context, top) || !Object.hasOwn(properties, top)) continue;
      problems.push({
        path: issue.path.filter((p): p is string | number => typeof p !== 'symbol'),
        message: issue.message,
        type: issue.code ?? 'value_error',
      });
    }
    return problems;
  };
}

/**
 * Whether a context schema accepts keys it does not define: from the zod object itself when
 * there is one (LangGraph's JSON Schema conversion drops `.loose()`/`.catchall()`), else from
 * `additionalProperties`.
 */
function allowsUnknownKeys(runtime: unknown, schema: JsonSchema): boolean {
  const v4 = (runtime as { _zod?: { def?: { catchall?: { _zod?: { def?: { type?: string } } } } } } | undefined)?._zod;
  if (v4?.def) return v4.def.catchall !== undefined && v4.def.catchall._zod?.def?.type !== 'never';
  const v3 = (runtime as { _def?: { unknownKeys?: string; catchall?: { _def?: { typeName?: string } } } } | undefined)?._def;
  if (v3?.unknownKeys !== undefined) {
    return v3.unknownKeys === 'passthrough' || (v3.catchall?._def?.typeName ?? 'ZodNever') !== 'ZodNever';
  }
  const additional = schema.additionalProperties;
  return additional === true || (typeof additional === 'object' && additional !== null);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function notAnObject(): ContextProblem {
  return { path: [], message: 'context must be an object', type: 'object_type' };
}
