import { describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type BaseMessage } from '@langchain/core/messages';
import { Annotation, MessagesZodMeta, StateGraph } from '@langchain/langgraph';
import { withLangGraph } from '@langchain/langgraph/zod';
import { z } from 'zod';
import { ManualClock } from '@berth/clock';
import { createLogger } from '@berth/log';
import { until } from '@berth/testing';
import {
  captureContextDeclarations,
  contextValidator,
  graphSchemas,
  loadGraphs,
  loadProjectConfig,
  type GraphSpec,
  type LoadedGraph,
  type RunnableGraph,
} from '@berth/langgraph-project';
import { graphDrawing, TypeSchemaReader } from './index.js';

const fixtures = fileURLToPath(new URL('../../test-projects/', import.meta.url));
const repoModules = fileURLToPath(new URL('../../../../node_modules/', import.meta.url));

async function loadOne(name: string, graphId: string): Promise<LoadedGraph> {
  return (await loadGraphs(loadProjectConfig(join(fixtures, name, 'langgraph.json')))).get(graphId)!;
}

/** A LoadedGraph around an in-test compiled graph. */
function inline(graph: RunnableGraph, graphId = 'inline'): LoadedGraph {
  const spec: GraphSpec = { graphId, spec: 'inline', file: 'inline', sourceFile: 'inline', exportName: 'graph' };
  return { graphId, spec, kind: 'compiled', template: graph, getGraph: async () => graph };
}

describe('graphSchemas', () => {
  test('echo: StateSchema messages state and a zod context schema', async () => {
    const schemas = await graphSchemas(await loadOne('echo', 'echo'));
    expect(schemas.graph_id).toBe('echo');
    expect(schemas.state_schema).toMatchObject({ type: 'object', properties: { messages: { langgraph_type: 'messages' } } });
    expect(schemas.input_schema).toMatchObject({ type: 'object', properties: { messages: expect.any(Object) } });
    expect(schemas.output_schema).toMatchObject({ type: 'object', properties: { messages: expect.any(Object) } });
    expect(schemas.context_schema).toMatchObject({
      type: 'object',
      properties: { model_name: { type: 'string' }, system_prompt: { type: 'string' } },
    });
    expect(schemas.config_schema).toEqual(schemas.context_schema);
  });

  test('Annotation.Root state: an object schema listing the channels; no context schema', async () => {
    const schemas = await graphSchemas(await loadOne('builder', 'builder'));
    expect(schemas.state_schema).toEqual({ type: 'object', properties: { messages: {}, turns: {} } });
    expect(schemas.input_schema).toEqual(schemas.state_schema);
    expect(schemas.context_schema).toBeNull();
    expect(schemas.config_schema).toBeNull();
  });

  test('factory: schemas from the graph the factory builds (with the given config)', async () => {
    const factory = await loadOne('factory', 'factory');
    expect((await graphSchemas(factory)).state_schema).toEqual({ type: 'object', properties: { messages: {} } });
    const withConfig = await graphSchemas(factory, { config: { configurable: { greeting: 'hi' } } });
    expect(withConfig.state_schema).toEqual({ type: 'object', properties: { messages: {} } });
  });

  test('zod v4 state with z.custom: falls back to a zod conversion instead of failing', async () => {
    const State = z.object({ messages: withLangGraph(z.custom<BaseMessage[]>(), MessagesZodMeta), count: z.number() });
    const graph = new StateGraph(State)
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    const schemas = await graphSchemas(inline(graph));
    expect(schemas.state_schema).toMatchObject({ type: 'object', properties: { messages: {}, count: { type: 'number' } } });
  });

  test('context schemas declared any way LangGraph.js accepts: the same JSON Schema', async () => {
    const graphs = await loadGraphs(loadProjectConfig(join(fixtures, 'context', 'langgraph.json')));
    const contextSchema = async (id: string) => (await graphSchemas(graphs.get(id)!)).context_schema;
    for (const id of ['annotation', 'zod4', 'zod3', 'state_schema']) {
      const schema = await contextSchema(id);
      expect({ id, schema }).toMatchObject({ id, schema: { type: 'object', properties: { model: expect.any(Object), temperature: expect.any(Object) } } });
      expect(Object.keys((schema as { properties: object }).properties)).toEqual(['model', 'temperature']);
      expect({ id, additional: schema!.additionalProperties }).toEqual({ id, additional: false });
      expect((await graphSchemas(graphs.get(id)!)).config_schema).toEqual(schema);
    }
    // Value types are known where the declaration has them at runtime (not Annotation.Root's).
    expect((await contextSchema('zod3'))!.properties).toEqual({ model: { type: 'string' }, temperature: { type: 'number' } });
    expect((await contextSchema('state_schema'))!.properties).toMatchObject({ model: { type: 'string' }, temperature: { type: 'number' } });
    expect((await contextSchema('annotation'))!.properties).toEqual({ model: {}, temperature: {} });
  });

  test('an Annotation.Root context passed in the options object counts too', async () => {
    await captureContextDeclarations();
    const graph = new StateGraph(Annotation.Root({ a: Annotation<string> }), { context: Annotation.Root({ model: Annotation<string> }) })
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    expect((await graphSchemas(inline(graph))).context_schema).toEqual({ type: 'object', properties: { model: {} }, additionalProperties: false });
  });
});

describe('contextValidator', () => {
  test('echo: rejects keys the context schema does not define, accepts the ones it does', async () => {
    const validate = contextValidator(await loadOne('echo', 'echo'));
    expect(validate({ model_name: 'gpt', system_prompt: 'be brief' })).toEqual([]);
    expect(validate({})).toEqual([]);
    expect(validate(undefined)).toEqual([]);
    expect(validate({ modle_name: 'x' })).toEqual([
      {
        path: ['modle_name'],
        message: "Extra inputs are not permitted; the graph's context accepts: model_name, system_prompt",
        type: 'extra_forbidden',
      },
    ]);
    expect(validate({ model_name: 3 })).toEqual([{ path: ['model_name'], message: expect.stringMatching(/string/), type: 'invalid_type' }]);
    expect(validate(['x'])).toEqual([{ path: [], message: 'context must be an object', type: 'object_type' }]);
  });

  test('no context schema: any object is accepted', async () => {
    const validate = contextValidator(await loadOne('builder', 'builder'));
    expect(validate({ anything: 1 })).toEqual([]);
  });

  test('every context declaration refuses unknown keys and checks the values it can', async () => {
    const graphs = await loadGraphs(loadProjectConfig(join(fixtures, 'context', 'langgraph.json')));
    for (const id of ['annotation', 'zod4', 'zod3', 'state_schema']) {
      const validate = contextValidator(graphs.get(id)!);
      expect({ id, problems: validate({ model: 'm', temperature: 0.2 }) }).toEqual({ id, problems: [] });
      expect({ id, problems: validate({ model: 'm', modle: 'x' }) }).toEqual({
        id,
        problems: [{ path: ['modle'], message: "Extra inputs are not permitted; the graph's context accepts: model, temperature", type: 'extra_forbidden' }],
      });
    }
    for (const id of ['zod4', 'zod3', 'state_schema']) {
      expect({ id, problems: contextValidator(graphs.get(id)!)({ temperature: 'hot' }) }).toEqual({
        id,
        problems: [{ path: ['temperature'], message: expect.stringMatching(/number/i), type: expect.any(String) }],
      });
    }
  });

  test('another Standard Schema (here a zod pipe, which LangGraph does not keep) is its own judge', async () => {
    await captureContextDeclarations();
    // LangGraph's runtime takes any Standard Schema as context (valibot, arktype, ...); its types want an object schema.
    const context = z.object({ model: z.string() }).transform((c) => ({ ...c, upper: c.model.toUpperCase() })) as unknown as z.ZodObject;
    const graph = new StateGraph({ state: Annotation.Root({ a: Annotation<string> }), context })
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    const validate = contextValidator(inline(graph));
    expect(validate({ model: 'm' })).toEqual([]);
    expect(validate({ model: 1 })).toEqual([{ path: ['model'], message: expect.stringMatching(/string/), type: 'value_error' }]);
    expect((await graphSchemas(inline(graph))).context_schema).toMatchObject({ type: 'object', properties: { model: { type: 'string' } } });
  });

  test('a loose context schema accepts extra keys', async () => {
    const graph = new StateGraph(Annotation.Root({ a: Annotation<string> }), { context: z.looseObject({ k: z.string().optional() }) })
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    expect(contextValidator(inline(graph))({ k: 'v', other: 1 })).toEqual([]);
  });
  test('a project with its own copy of @langchain/langgraph: its context declarations are captured too', async () => {
    // The context fixture in a folder whose node_modules has a copy of LangGraph (everything else linked).
    const dir = mkdtempSync(join(tmpdir(), 'berth-own-langgraph-'));
    try {
      mkdirSync(join(dir, 'node_modules', '@langchain'), { recursive: true });
      for (const name of readdirSync(repoModules))
        if (name !== '@langchain' && !name.startsWith('.')) symlinkSync(join(repoModules, name), join(dir, 'node_modules', name));
      for (const name of readdirSync(join(repoModules, '@langchain'))) {
        const from = join(repoModules, '@langchain', name);
        if (name === 'langgraph') cpSync(from, join(dir, 'node_modules', '@langchain', name), { recursive: true });
        else symlinkSync(from, join(dir, 'node_modules', '@langchain', name));
      }
      cpSync(join(fixtures, 'context'), dir, { recursive: true });
      writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
      const { stdout } = await promisify(execFile)(process.execPath, [join(fixtures, 'context-load.mjs'), join(dir, 'langgraph.json')], {
        cwd: fixtures,
        timeout: 60_000,
      });
      const expected = { contextKeys: ['model', 'temperature'], problems: ['bogus: extra_forbidden'], ownCopy: true };
      expect(JSON.parse(stdout.trim())).toEqual({ annotation: expected, zod4: expected, zod3: expected, state_schema: expected });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('graphDrawing', () => {
  test('echo: __start__ → respond → __end__', async () => {
    const drawing = await graphDrawing(await loadOne('echo', 'echo'));
    expect(drawing.nodes.map((n) => n.id)).toEqual(['__start__', 'respond', '__end__']);
    expect(drawing.nodes[1]).toMatchObject({ id: 'respond', type: 'runnable', data: { name: 'respond' } });
    expect(drawing.edges).toEqual([
      { source: '__start__', target: 'respond', conditional: false },
      { source: 'respond', target: '__end__', conditional: false },
    ]);
  });

  test('subgraph: xray expands the child graph', async () => {
    const parent = await loadOne('subgraph', 'parent');
    const flat = await graphDrawing(parent, { xray: false });
    expect(flat.nodes.map((n) => n.id)).toContain('child');
    const xray = await graphDrawing(parent, { xray: true });
    const ids = xray.nodes.map((n) => String(n.id));
    expect(ids).toEqual(expect.arrayContaining(['child:inner_a', 'child:inner_b']));
  });
});

describe('TypeSchemaReader', () => {
  test('a type check over its time limit is ended: the graph keeps its runtime schemas, and a warning says why', async () => {
    const lines: string[] = [];
    const destination = new PassThrough();
    destination.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
    const clock = new ManualClock();
    const reader = new TypeSchemaReader({ log: createLogger({ name: 'test', destination }), timeoutMs: 50, clock });
    const typed = await loadOne('typed', 'typed');
    const reading = graphSchemas(typed, { types: reader });
    // The check has begun (its limit is on the clock); the limit passes long before a type check
    // (seconds) could end: the answer comes from the limit, not from the check.
    await until('the type check to begin', () => (clock.pending === 1 ? true : undefined), 10_000, 5);
    await clock.advance(50);
    const schemas = await reading;
    expect(schemas.context_schema).toEqual({ type: 'object', properties: { model: {}, temperature: {} }, additionalProperties: false });
    await reader.close();
    expect(lines.map((line) => JSON.parse(line) as Record<string, unknown>)).toContainEqual(
      expect.objectContaining({ graph_id: 'typed', level: 40, msg: expect.stringContaining('took too long') }),
    );
  });
});
