/**
 * JSON Schemas of a graph read from its TypeScript types, for what exists only as types at runtime:
 * the value types of `Annotation.Root` channels (`Annotation<"a" | "b">` is just a channel there).
 * As the LangGraph.js server does, the TypeScript compiler checks a small generated module that
 * imports the graph's export and names its builder's input, output and context types; those
 * types are then converted to JSON Schema (draft-07).
 *
 * Bounded: one program per graph module (later ones reuse the earlier's parsed files), at most
 * MAX_NODES schema nodes and MAX_DEPTH levels per schema; types of libraries (node_modules) are
 * named in `definitions` rather than expanded. Any failure returns null: callers keep what they
 * derive at runtime.
 */
import { dirname, extname, basename, join } from 'node:path';
import ts from 'typescript';
import type { JsonSchema, TypeSchemas } from '@berth/langgraph-project';
import { findSubgraphSources } from './type-subgraphs.js';

export const DRAFT_07 = 'http://json-schema.org/draft-07/schema#';
const MAX_NODES = 2000;
const MAX_DEPTH = 8;

/** Thrown (and caught by callers) when a module's types cannot be read. */
export class TypeSchemaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TypeSchemaError';
  }
}

let previous: ts.Program | undefined;

function compilerOptions(dir: string): ts.CompilerOptions {
  const base: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    allowJs: true,
  };
  const found = ts.findConfigFile(dir, ts.sys.fileExists, 'tsconfig.json');
  let options = base;
  if (found) {
    const read = ts.readConfigFile(found, ts.sys.readFile);
    if (!read.error) options = { ...base, ...ts.parseJsonConfigFileContent(read.config, ts.sys, dirname(found)).options };
  }
  // Types only: nothing is emitted, and the generated module imports the graph file by its own name.
  return { ...options, noEmit: true, strict: true, allowImportingTsExtensions: true, types: [], incremental: false, composite: false };
}

/** Schemas of a graph module's export and of the subgraphs found in its source. */
export interface GraphTypeSchemas extends TypeSchemas {
  /** By namespace (`outer|inner`), for the subgraphs whose types could be read. */
  subgraphs: Record<string, TypeSchemas>;
}

const TS_SOURCE = /\.(ts|mts|cts|tsx)$/;

/**
 * The generated module: for the value of `exportName` (graph, builder or factory) and for each
 * subgraph candidate (a type exported by the module's copy), its builder's input, output and context types.
 */
function reflectModule(sourceFile: string, exportName: string, copy: { file: string; count: number } | undefined): string {
  const types = (prefix: string, value: string) => `export type ${prefix}Input = InputOf<${value}>;
export type ${prefix}Output = OutputOf<${value}>;
export type ${prefix}Context = ContextOf<${value}>;
`;
  return `import type { StateType, UpdateType, StateDefinition } from "@langchain/langgraph";
import type * as M from ${JSON.stringify(`./${basename(sourceFile)}`)};
${copy ? `import type * as S from ${JSON.stringify(`./${basename(copy.file)}`)};` : ''}
type D<V> = V extends (...args: any[]) => infer R ? Awaited<R> : Awaited<V>;
type G<V> = D<V> extends { compile(...args: any[]): infer C } ? C : D<V>;
type B<V> = G<V> extends { builder: infer X } ? X : never;
type Def<T> = T extends StateDefinition ? T : never;
// An update may overwrite a reduced channel ({__overwrite__: value}): not part of the data's shape.
type Plain<T> = { [K in keyof T]: Exclude<T[K], { __overwrite__: any }> };
type InputOf<V> = B<V> extends { _inputDefinition: infer S } ? Plain<UpdateType<Def<S>>> : never;
type OutputOf<V> = B<V> extends { _outputDefinition: infer S } ? StateType<Def<S>> : never;
type ContextOf<V> = B<V> extends { _configSchema: infer S } ? UpdateType<Def<Exclude<S, undefined>>> : never;
${types('Berth', `(typeof M)[${JSON.stringify(exportName)}]`)}
${Array.from({ length: copy?.count ?? 0 }, (_, i) => types(`BerthSub${i}`, `S.BerthSub${i}`)).join('')}`;
}

/**
 * The TypeScript-declared schemas of export `exportName` of `sourceFile` (a graph module), and of
 * the subgraphs its source defines (type-subgraphs.ts): those are read through a copy of the module
 * that exports the type of each one's module-level name.
 * @throws TypeSchemaError when the module cannot be type-checked or its types not read.
 */
export function typeSchemasOf(sourceFile: string, exportName: string): GraphTypeSchemas {
  const dir = dirname(sourceFile);
  const ext = extname(sourceFile);
  const virtualExt = ext === '.mts' || ext === '.mjs' ? '.mts' : ext === '.cts' || ext === '.cjs' ? '.cts' : '.ts';
  const virtualPath = join(dir, `__berth_types_${process.pid}${virtualExt}`);
  const source = TS_SOURCE.test(sourceFile) ? ts.sys.readFile(sourceFile) : undefined;
  const found = source === undefined ? [] : findSubgraphSources(ts.createSourceFile(sourceFile, source, ts.ScriptTarget.Latest, true), exportName);
  const candidates = [...new Set(found.flatMap((f) => f.candidates))];
  const copyPath = join(dir, `__berth_source_${process.pid}${ext}`);
  const virtual = new Map([[virtualPath, reflectModule(sourceFile, exportName, candidates.length ? { file: copyPath, count: candidates.length } : undefined)]]);
  if (candidates.length) virtual.set(copyPath, `${source}\n${candidates.map((name, i) => `export type BerthSub${i} = typeof ${name};`).join('\n')}\n`);
  const options = compilerOptions(dir);
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    const text = virtual.get(fileName);
    return text !== undefined ? ts.createSourceFile(fileName, text, languageVersion, true) : getSourceFile(fileName, languageVersion, onError, shouldCreate);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (fileName) => virtual.has(fileName) || fileExists(fileName);
  let program: ts.Program;
  try {
    program = ts.createProgram({ rootNames: [virtualPath], options, host, ...(previous ? { oldProgram: previous } : {}) });
  } catch (error) {
    throw new TypeSchemaError(`cannot type-check ${sourceFile}: ${(error as Error).message}`, { cause: error });
  }
  previous = program;
  const file = program.getSourceFile(virtualPath);
  const checker = program.getTypeChecker();
  const moduleSymbol = file && checker.getSymbolAtLocation(file);
  if (!moduleSymbol) throw new TypeSchemaError(`cannot read the types of ${sourceFile}`);
  const exports = new Map(checker.getExportsOfModule(moduleSymbol).map((s) => [s.name, s]));
  const schemaOf = (name: string): JsonSchema | null => {
    const symbol = exports.get(name);
    if (!symbol) return null;
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    if (type.flags & (ts.TypeFlags.Never | ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return null;
    if (checker.getPropertiesOfType(type).length === 0) return null;
    return new Converter(checker, program).document(type);
  };
  const schemasOf = (prefix: string): TypeSchemas => ({
    input: schemaOf(`${prefix}Input`),
    output: schemaOf(`${prefix}Output`),
    context: schemaOf(`${prefix}Context`),
  });
  // Each candidate's types are read once; a subgraph's are those of its first candidate that is a graph.
  const read = new Map<string, TypeSchemas>();
  const subgraphs: Record<string, TypeSchemas> = {};
  for (const { namespace, candidates: names } of found) {
    for (const name of names) {
      if (!read.has(name)) read.set(name, schemasOf(`BerthSub${candidates.indexOf(name)}`));
      const schemas = read.get(name)!;
      if (schemas.input || schemas.output || schemas.context) {
        subgraphs[namespace] = schemas;
        break;
      }
    }
  }
  return { ...schemasOf('Berth'), subgraphs };
}

/** One ts.Type → JSON Schema conversion, bounded in size and depth. */
class Converter {
  private nodes = 0;
  private readonly definitions: Record<string, JsonSchema> = {};
  private readonly visiting = new Set<ts.Type>();

  private subtypes: Map<ts.Type, ts.Type[]> | undefined;

  constructor(
    private readonly checker: ts.TypeChecker,
    private readonly program: ts.Program,
  ) {}

  document(type: ts.Type): JsonSchema {
    const schema = this.convert(type, 0);
    return { ...schema, ...(Object.keys(this.definitions).length ? { definitions: this.definitions } : {}), $schema: DRAFT_07 };
  }

  private convert(type: ts.Type, depth: number): JsonSchema {
    this.nodes += 1;
    if (this.nodes > MAX_NODES || depth > MAX_DEPTH) return {};
    const f = type.flags;
    if (f & (ts.TypeFlags.Any | ts.TypeFlags.Unknown | ts.TypeFlags.Never)) return {};
    if (f & ts.TypeFlags.StringLiteral) return { type: 'string', const: (type as ts.StringLiteralType).value };
    if (f & ts.TypeFlags.NumberLiteral) return { type: 'number', const: (type as ts.NumberLiteralType).value };
    if (f & ts.TypeFlags.BooleanLiteral) return { type: 'boolean', const: this.checker.typeToString(type) === 'true' };
    if (f & ts.TypeFlags.StringLike) return { type: 'string' };
    if (f & ts.TypeFlags.NumberLike) return { type: 'number' };
    if (f & ts.TypeFlags.BooleanLike) return { type: 'boolean' };
    if (f & ts.TypeFlags.BigIntLike) return { type: 'integer' };
    if (f & ts.TypeFlags.Null) return { type: 'null' };
    if (type.isUnion()) return this.union(type, depth);
    if (this.checker.isArrayType(type)) {
      const [item] = this.checker.getTypeArguments(type as ts.TypeReference);
      return { type: 'array', items: item ? this.convert(item, depth + 1) : {} };
    }
    if (this.checker.isTupleType(type)) {
      return { type: 'array', items: this.checker.getTypeArguments(type as ts.TypeReference).map((t) => this.convert(t, depth + 1)) };
    }
    if (f & ts.TypeFlags.Object || type.isIntersection()) return this.object(type, depth);
    return {};
  }

  private union(type: ts.UnionType, depth: number): JsonSchema {
    const members = type.types.filter((t) => !(t.flags & (ts.TypeFlags.Undefined | ts.TypeFlags.Void)));
    // `boolean` is the union `true | false`.
    const booleans = members.filter((t) => t.flags & ts.TypeFlags.BooleanLiteral);
    const rest = members.filter((t) => !(t.flags & ts.TypeFlags.BooleanLiteral));
    const parts = [
      ...rest.map((t) => this.convert(t, depth + 1)),
      ...(booleans.length === 2 ? [{ type: 'boolean' }] : booleans.map((t) => this.convert(t, depth + 1))),
    ];
    if (parts.length === 1) return parts[0]!;
    const literals = parts.filter((p) => 'const' in p);
    if (literals.length === parts.length && parts.every((p) => p.type === parts[0]!.type)) {
      return { type: parts[0]!.type, enum: literals.map((p) => p.const).sort() };
    }
    if (parts.every((p) => Object.keys(p).length === 1 && typeof p.type === 'string')) return { type: parts.map((p) => p.type) };
    return { anyOf: parts };
  }

  private object(type: ts.Type, depth: number): JsonSchema {
    const symbol = type.getSymbol() ?? type.aliasSymbol;
    const external = symbol?.declarations?.some((d) => d.getSourceFile().fileName.includes('/node_modules/'));
    if (external && symbol && !(symbol.flags & ts.SymbolFlags.TypeLiteral)) return this.named(type, symbol);
    if (this.visiting.has(type)) return {};
    this.visiting.add(type);
    try {
      const properties: Record<string, JsonSchema> = {};
      const required: string[] = [];
      for (const property of this.checker.getPropertiesOfType(type)) {
        const declaration = property.valueDeclaration ?? property.declarations?.[0];
        const propertyType = declaration ? this.checker.getTypeOfSymbolAtLocation(property, declaration) : this.checker.getTypeOfSymbol(property);
        if (propertyType.getCallSignatures().length > 0) continue; // Methods are not data.
        properties[property.name] = this.convert(propertyType, depth + 1);
        const optional =
          property.flags & ts.SymbolFlags.Optional || (propertyType.isUnion() && propertyType.types.some((t) => t.flags & ts.TypeFlags.Undefined));
        if (!optional) required.push(property.name);
      }
      const index = this.checker.getIndexTypeOfType(type, ts.IndexKind.String);
      return {
        type: 'object',
        properties,
        ...(required.length ? { required } : {}),
        ...(index ? { additionalProperties: this.convert(index, depth + 1) } : {}),
      };
    } finally {
      this.visiting.delete(type);
    }
  }

  /**
   * A library type (a message class, Date…): a named definition carrying its documentation. An
   * abstract class is only ever one of its subclasses: its definition is `oneOf` those of the
   * program that extend it as it is used here (same type arguments), as the LangGraph.js server has it.
   */
  private named(type: ts.Type, symbol: ts.Symbol): JsonSchema {
    const name = this.checker
      .typeToString(type, undefined, ts.TypeFormatFlags.NoTruncation)
      .replace(/\s+/g, '')
      .replace(/import\([^)]*\)\./g, '');
    if (!this.definitions[name]) {
      const description = ts.displayPartsToString(symbol.getDocumentationComment(this.checker)).trim();
      const definition: JsonSchema = { type: 'object', ...(description ? { description } : {}) };
      this.definitions[name] = definition;
      const abstract = symbol.declarations?.some((d) => ts.isClassDeclaration(d) && ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Abstract);
      const subtypes = abstract ? (this.subtypeIndex().get(type) ?? []) : [];
      if (subtypes.length > 0) {
        definition.oneOf = subtypes.map((subtype) => {
          const subSymbol = subtype.getSymbol();
          return subSymbol ? this.named(subtype, subSymbol) : {};
        });
      }
    }
    return { $ref: `#/definitions/${name}` };
  }

  /** Every class and interface of the program by each type it directly extends (built once). */
  private subtypeIndex(): Map<ts.Type, ts.Type[]> {
    if (this.subtypes) return this.subtypes;
    const index = new Map<ts.Type, ts.Type[]>();
    const visit = (node: ts.Node): void => {
      if (ts.isClassDeclaration(node) || ts.isInterfaceDeclaration(node)) {
        const type = node.name && this.checker.getTypeAtLocation(node.name);
        for (const base of (type?.isClassOrInterface() && type.getBaseTypes()) || []) {
          index.set(base, [...(index.get(base) ?? []), type!]);
        }
      } else if (ts.isModuleDeclaration(node) || ts.isModuleBlock(node) || ts.isSourceFile(node)) {
        ts.forEachChild(node, visit);
      }
    };
    for (const file of this.program.getSourceFiles()) visit(file);
    this.subtypes = index;
    return index;
  }
}
