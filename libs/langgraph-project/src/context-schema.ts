/**
 * A graph's context schema however the project declared it — a zod object (v3 or v4), an
 * `Annotation.Root`, a `StateSchema` or any other Standard Schema — as one JSON Schema (for
 * GET /assistants/{id}/schemas) and one check of `context` values (a 422 on an unknown key).
 *
 * LangGraph.js keeps only a zod object context at runtime (`builder._configRuntimeSchema`): its
 * StateGraph constructor drops every other declaration. So, before a project's graph modules are
 * imported, `captureContextDeclarations` wraps the step of that constructor that reads the
 * declaration (`_normalizeToStateGraphInit`), in the server's copy of `@langchain/langgraph` and in
 * the project's own, and remembers per builder what was passed as `context`. A LangGraph version
 * without that step leaves those graphs as before: a zod context still works, others report none.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { StateGraph } from '@langchain/langgraph';
import { toJSONSchema } from 'zod';

/** A JSON Schema document. */
export type JsonSchema = Record<string, unknown>;

/** One problem with a `context` value; `path` is relative to the context object. */
export interface ContextProblem {
  path: (string | number)[];
  message: string;
  type: string;
}

/** A graph's context schema: what clients are shown and how a `context` object is checked. */
export interface ContextSchema {
  json: JsonSchema | null;
  /** Problems of a context object (missing keys are not one: assistant contexts may be partial). */
  check(context: Record<string, unknown>): ContextProblem[];
}

/** What a project passed as `context` to each StateGraph builder, when LangGraph did not keep it. */
const declarations = new WeakMap<object, unknown>();
const WRAPPED = Symbol.for('berth.context-capture');

type Normalize = (this: object, ...args: unknown[]) => { context?: unknown } | undefined;

function wrap(stateGraph: unknown): void {
  const proto = (stateGraph as { prototype?: Record<PropertyKey, unknown> } | undefined)?.prototype;
  const original = proto?._normalizeToStateGraphInit as Normalize | undefined;
  if (!proto || typeof original !== 'function' || proto[WRAPPED]) return;
  proto._normalizeToStateGraphInit = function (this: object, ...args: unknown[]) {
    const init = original.apply(this, args);
    if (init?.context !== undefined) declarations.set(this, init.context);
    return init;
  };
  proto[WRAPPED] = true;
}

/** The ESM entry file of a package manifest's `exports["."]` (import/node/default conditions). */
function esmEntry(exported: unknown): string | undefined {
  if (typeof exported === 'string') return exported;
  if (typeof exported !== 'object' || exported === null) return undefined;
  const conditions = exported as Record<string, unknown>;
  for (const condition of ['import', 'node', 'default']) {
    const found = esmEntry(conditions[condition]);
    if (found) return found;
  }
  return undefined;
}

/**
 * Starts remembering the context declarations of StateGraphs built from now on by the server's
 * `@langchain/langgraph` and by the copy that `fromFile` (a project's graph module) resolves.
 */
export async function captureContextDeclarations(fromFile?: string): Promise<void> {
  wrap(StateGraph);
  if (!fromFile) return;
  let manifestPath: string;
  try {
    manifestPath = createRequire(fromFile).resolve('@langchain/langgraph/package.json');
  } catch {
    // No copy of its own (it imports the server's, wrapped above), or one that does not export its
    // manifest: then only its zod context schemas are known, as LangGraph keeps those.
    return;
  }
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { exports?: Record<string, unknown>; module?: string; main?: string };
  const entry = esmEntry(manifest.exports?.['.']) ?? manifest.module ?? manifest.main;
  if (!entry) return;
  wrap(((await import(pathToFileURL(join(dirname(manifestPath), entry)).href)) as { StateGraph?: unknown }).StateGraph);
}

/** The context declaration of a compiled graph's builder: LangGraph's own zod object, else what was captured. */
function declarationOf(builder: Record<string, unknown>): unknown {
  return builder._configRuntimeSchema ?? declarations.get(builder);
}

/**
 * The context schema of a graph builder, or null when it declares none. `zodJson` is LangGraph's
 * own conversion of the builder's zod object context (it honours `withLangGraph` metadata); plain
 * zod v4 conversion is the fallback.
 */
export function contextSchemaOf(builder: Record<string, unknown>, zodJson: () => JsonSchema | null): ContextSchema | null {
  const declared = declarationOf(builder);
  if (typeof declared !== 'object' || declared === null) return null;
  if (isAnnotationRoot(declared)) return keysOnly(Object.keys(declared.spec));
  if (isStateSchema(declared)) return stateSchemaContext(declared);
  if (isZodObject(declared)) return zodObjectContext(declared, zodJson);
  if (isStandardSchema(declared)) return standardSchemaContext(declared);
  return null;
}

// --- declarations ------------------------------------------------------------------------------

interface StandardSchema {
  '~standard': {
    validate(value: unknown): StandardResult | Promise<StandardResult>;
    jsonSchema?: { input?(options: { target: string }): unknown };
  };
}
type StandardResult = { issues?: readonly { message: string; path?: readonly (PropertyKey | { key: PropertyKey })[] }[] };

function isStandardSchema(value: unknown): value is StandardSchema {
  const standard = (value as Partial<StandardSchema> | null)?.['~standard'];
  return typeof standard === 'object' && standard !== null && typeof standard.validate === 'function';
}

function isAnnotationRoot(value: object): value is { spec: Record<string, unknown> } {
  const root = value as { lc_graph_name?: unknown; spec?: unknown };
  return root.lc_graph_name === 'AnnotationRoot' && typeof root.spec === 'object' && root.spec !== null;
}

interface StateSchemaLike {
  fields: Record<string, unknown>;
  getJsonSchema(): JsonSchema;
}

function isStateSchema(value: object): value is StateSchemaLike {
  return (value as Record<symbol, unknown>)[Symbol.for('langgraph.state.state_schema')] === true;
}

/** A zod object schema, v3 (`_def.shape()`) or v4 (`_zod.def.shape`). */
function isZodObject(value: object): value is { safeParse(v: unknown): ZodResult } {
  const v4 = (value as { _zod?: { def?: { type?: string } } })._zod?.def?.type;
  const v3 = (value as { _def?: { typeName?: string } })._def?.typeName;
  return (v4 === 'object' || v3 === 'ZodObject') && typeof (value as { safeParse?: unknown }).safeParse === 'function';
}
type ZodResult = { success: boolean; error?: { issues: { path: PropertyKey[]; message: string; code?: string }[] } };

// --- checks -------------------------------------------------------------------------------------

function unknownKeys(context: Record<string, unknown>, known: string[]): ContextProblem[] {
  const hint = known.length ? `; the graph's context accepts: ${known.join(', ')}` : '';
  return Object.keys(context)
    .filter((key) => !known.includes(key))
    .map((key) => ({ path: [key], message: `Extra inputs are not permitted${hint}`, type: 'extra_forbidden' }));
}

function segment(part: PropertyKey | { key: PropertyKey }): string | number {
  const key = typeof part === 'object' && part !== null ? part.key : part;
  return typeof key === 'symbol' ? String(key) : key;
}

/** A Standard Schema's verdict on `value`; an asynchronous schema is left to the graph. */
function standardProblems(schema: StandardSchema, value: unknown, prefix: (string | number)[]): ContextProblem[] {
  const result = schema['~standard'].validate(value);
  if (result instanceof Promise) {
    // Requests are checked synchronously: an asynchronous verdict is not waited for (and must not
    // become an unhandled rejection).
    result.catch(() => undefined);
    return [];
  }
  return (result.issues ?? []).map((issue) => ({ path: [...prefix, ...(issue.path ?? []).map(segment)], message: issue.message, type: 'value_error' }));
}

const namesOnly = new WeakSet<JsonSchema>();

/** Marks a schema that lists channel names only (their value types exist in TypeScript, not at runtime). */
export function markNamesOnly(schema: JsonSchema): JsonSchema {
  namesOnly.add(schema);
  return schema;
}

/** Whether a schema lists channel names only: the graph module's TypeScript types may say more. */
export function isNamesOnly(schema: JsonSchema | null): boolean {
  return schema !== null && namesOnly.has(schema);
}

/** `Annotation.Root`: channel names only (the value types exist in TypeScript, not at runtime). */
function keysOnly(keys: string[]): ContextSchema {
  return {
    json: markNamesOnly({ type: 'object', properties: Object.fromEntries(keys.map((key) => [key, {}])), additionalProperties: false }),
    check: (context) => unknownKeys(context, keys),
  };
}

function stateSchemaContext(schema: StateSchemaLike): ContextSchema {
  const keys = Object.keys(schema.fields);
  const json = withoutUndefined({ ...schema.getJsonSchema(), additionalProperties: false });
  return {
    json,
    check: (context) => [
      ...unknownKeys(context, keys),
      ...keys.flatMap((key) => {
        const field = schema.fields[key];
        return key in context && isStandardSchema(field) ? standardProblems(field, context[key], [key]) : [];
      }),
    ],
  };
}

function zodObjectContext(schema: { safeParse(v: unknown): ZodResult }, zodJson: () => JsonSchema | null): ContextSchema {
  let json = zodJson();
  if (!json && '_zod' in schema) json = toJSONSchema(schema as never, { unrepresentable: 'any', io: 'input' }) as JsonSchema;
  const properties = Object.keys((json?.properties as Record<string, unknown> | undefined) ?? {});
  const loose = allowsUnknownKeys(schema);
  return {
    json,
    check: (context) => {
      const problems = loose ? [] : unknownKeys(context, properties);
      const result = schema.safeParse(context);
      for (const issue of result.success ? [] : (result.error?.issues ?? [])) {
        const top = issue.path[0];
        // Missing keys are fine (partial contexts); unknown keys are reported above.
        if (typeof top !== 'string' || !Object.hasOwn(context, top) || !properties.includes(top)) continue;
        problems.push({
          path: issue.path.filter((p): p is string | number => typeof p !== 'symbol'),
          message: issue.message,
          type: issue.code ?? 'value_error',
        });
      }
      return problems;
    },
  };
}

/** Any other Standard Schema (e.g. a zod pipe, valibot): its own verdict, and its JSON Schema when it offers one. */
function standardSchemaContext(schema: StandardSchema): ContextSchema {
  let json: JsonSchema | null = null;
  try {
    const offered =
      schema['~standard'].jsonSchema?.input?.({ target: 'draft-2020-12' }) ??
      ('_zod' in schema ? toJSONSchema(schema as never, { unrepresentable: 'any', io: 'input' }) : null);
    json = typeof offered === 'object' && offered !== null ? (offered as JsonSchema) : null;
  } catch {
    json = null; // Not representable as JSON Schema: the schemas endpoint shows none, validation still applies.
  }
  return { json, check: (context) => standardProblems(schema, context, []) };
}

/**
 * Whether a zod object accepts keys it does not define (`.loose()`, `.passthrough()`,
 * `.catchall()`): LangGraph's JSON Schema conversion does not say.
 */
function allowsUnknownKeys(schema: object): boolean {
  const v4 = (schema as { _zod?: { def?: { catchall?: { _zod?: { def?: { type?: string } } } } } })._zod?.def;
  if (v4) return v4.catchall !== undefined && v4.catchall._zod?.def?.type !== 'never';
  const v3 = (schema as { _def?: { unknownKeys?: string; catchall?: { _def?: { typeName?: string } } } })._def;
  return v3?.unknownKeys === 'passthrough' || (v3?.catchall?._def?.typeName ?? 'ZodNever') !== 'ZodNever';
}

function withoutUndefined(json: JsonSchema): JsonSchema {
  return Object.fromEntries(Object.entries(json).filter(([, v]) => v !== undefined));
}
