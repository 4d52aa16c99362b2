import { describe, expect, test } from '@jest/globals';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BaseMessage } from '@langchain/core/messages';
import { Annotation, MessagesZodMeta, StateGraph } from '@langchain/langgraph';
import { withLangGraph } from '@langchain/langgraph/zod';
import { z } from 'zod';
import {
  contextValidator,
  graphDrawing,
  graphSchemas,
  loadGraphs,
  loadProjectConfig,
  type GraphSpec,
  type LoadedGraph,
  type RunnableGraph,
} from './index.js';

const fixtures = fileURLToPath(new URL('../../test-projects/', import.meta.url));

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
    const graph = new StateGraph(State).addNode('n', () => ({})).addEdge('__start__', 'n').compile();
    const schemas = await graphSchemas(inline(graph));
    expect(schemas.state_schema).toMatchObject({ type: 'object', properties: { messages: {}, count: { type: 'number' } } });
  });

  test('an Annotation.Root context schema leaves no runtime trace → null', async () => {
    const graph = new StateGraph(Annotation.Root({ a: Annotation<string> }), Annotation.Root({ model: Annotation<string> }))
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    expect((await graphSchemas(inline(graph))).context_schema).toBeNull();
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
    expect(validate({ model_name: 3 })).toEqual([
      { path: ['model_name'], message: expect.stringMatching(/string/), type: 'invalid_type' },
    ]);
    expect(validate(['x'])).toEqual([{ path: [], message: 'context must be an object', type: 'object_type' }]);
  });

  test('no context schema: any object is accepted', async () => {
    const validate = contextValidator(await loadOne('builder', 'builder'));
    expect(validate({ anything: 1 })).toEqual([]);
  });

  test('a loose context schema accepts extra keys', async () => {
    const graph = new StateGraph(Annotation.Root({ a: Annotation<string> }), { context: z.looseObject({ k: z.string().optional() }) })
      .addNode('n', () => ({}))
      .addEdge('__start__', 'n')
      .compile();
    expect(contextValidator(inline(graph))({ k: 'v', other: 1 })).toEqual([]);
  });
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
