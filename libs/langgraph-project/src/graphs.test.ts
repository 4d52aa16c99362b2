import { describe, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { HumanMessage } from '@langchain/core/messages';
import { Command, InMemoryStore, MemorySaver } from '@langchain/langgraph';
import { GraphLoadError, loadGraph, loadGraphs, loadProjectConfig, type LoadedGraph } from './index.js';

const fixtures = fileURLToPath(new URL('../../../services/agent-runtime/test-projects/', import.meta.url));

async function load(name: string): Promise<Map<string, LoadedGraph>> {
  return loadGraphs(loadProjectConfig(join(fixtures, name, 'langgraph.json')));
}

async function loadOne(name: string, graphId: string): Promise<LoadedGraph> {
  const graph = (await load(name)).get(graphId);
  if (!graph) throw new Error(`no graph ${graphId}`);
  return graph;
}

function loadError(promise: Promise<unknown>): Promise<GraphLoadError> {
  return promise.then(
    () => {
      throw new Error('expected a GraphLoadError');
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(GraphLoadError);
      return error as GraphLoadError;
    },
  );
}

const thread = (id: string) => ({ configurable: { thread_id: id } });

describe('loadGraphs', () => {
  test('echo: compiled graph; runs with our checkpointer and sees the context', async () => {
    const echo = await loadOne('echo', 'echo');
    expect(echo).toMatchObject({ graphId: 'echo', kind: 'compiled', description: expect.stringContaining('echo') });
    const checkpointer = new MemorySaver();
    const graph = await echo.getGraph(undefined, { checkpointer });
    const out = await graph.invoke({ messages: [new HumanMessage('hi there')] }, { ...thread('e1'), context: { system_prompt: 'v2' } });
    expect(out.messages.map((m: { content: unknown }) => m.content)).toEqual(['hi there', 'echo: hi there [v2]']);
    // The state went to our checkpointer.
    expect((await checkpointer.getTuple(thread('e1')))?.checkpoint.channel_values.messages).toHaveLength(2);
    const again = await graph.invoke({ messages: [new HumanMessage('second')] }, thread('e1'));
    expect(again.messages.at(-1).content).toBe('echo: second');
    expect(again.messages).toHaveLength(4);
  });

  test('the checkpointer/store override never mutates the exported graph', async () => {
    const echo = await loadOne('echo', 'echo');
    const store = new InMemoryStore();
    const a = await echo.getGraph(undefined, { checkpointer: new MemorySaver(), store });
    const b = await echo.getGraph(undefined, { checkpointer: null });
    expect(a).not.toBe(b);
    expect(a.store).toBe(store);
    expect(b.checkpointer).toBeUndefined();
    expect(echo.template?.checkpointer).toBeUndefined();
    expect(a.checkpointer).toBeInstanceOf(MemorySaver);
  });

  test('builder: default export, compiled with our checkpointer per use', async () => {
    const builder = await loadOne('builder', 'builder');
    expect(builder.kind).toBe('builder');
    const checkpointer = new MemorySaver();
    const first = await (await builder.getGraph(undefined, { checkpointer })).invoke({ messages: [new HumanMessage('a')] }, thread('b1'));
    expect(first.messages.at(-1).content).toBe('turn 1');
    const second = await (await builder.getGraph(undefined, { checkpointer })).invoke({ messages: [new HumanMessage('b')] }, thread('b1'));
    expect(second.turns).toBe(2);
    expect(second.messages.at(-1).content).toBe('turn 2');
  });

  test('factory: called with the run config on every use', async () => {
    const factory = await loadOne('factory', 'factory');
    expect(factory.kind).toBe('factory');
    expect(factory.template).toBeDefined(); // probed once at load with {configurable: {}}
    const module = (await import(join(fixtures, 'factory/src/graph.ts'))) as { calls: number };
    const before = module.calls;
    const config = { configurable: { thread_id: 'f1', greeting: 'bonjour' } };
    const graph = await factory.getGraph(config, { checkpointer: new MemorySaver() });
    const out = await graph.invoke({ messages: [new HumanMessage('x')] }, config);
    expect(out.messages.at(-1).content).toBe('bonjour from factory');
    await factory.getGraph(undefined, { checkpointer: null });
    expect(module.calls).toBe(before + 2);
  });

  test('interrupt: stops at interrupt(), resumes with Command({resume})', async () => {
    const graph = await (await loadOne('interrupt', 'interrupt')).getGraph(undefined, { checkpointer: new MemorySaver() });
    const paused = await graph.invoke({ question: 'proceed?' }, thread('i1'));
    expect(paused.__interrupt__).toEqual([expect.objectContaining({ value: { question: 'proceed?' } })]);
    const state = await graph.getState(thread('i1'));
    expect(state.next).toEqual(['ask']);
    const done = await graph.invoke(new Command({ resume: 'yes' }), thread('i1'));
    expect(done).toMatchObject({ answer: 'yes', result: 'done: yes' });
  });

  test('interrupt without a checkpointer fails (stateless runs get none)', async () => {
    const graph = await (await loadOne('interrupt', 'interrupt')).getGraph(undefined, { checkpointer: null });
    await expect(graph.invoke({ question: 'q' })).rejects.toThrow(/checkpointer/i);
  });

  test('subgraph: parent runs its child graph; subgraph updates are namespaced', async () => {
    const graph = await (await loadOne('subgraph', 'parent')).getGraph(undefined, { checkpointer: new MemorySaver() });
    const namespaces = new Set<string>();
    for await (const [ns] of await graph.stream({}, { ...thread('s1'), streamMode: 'updates', subgraphs: true })) {
      namespaces.add((ns as string[]).join('|').split(':')[0]!);
    }
    expect(namespaces).toEqual(new Set(['', 'child']));
    expect((await graph.getState(thread('s1'))).values).toEqual({
      steps: ['prepare', 'summary of 2 inner steps'],
      inner: ['inner_a', 'inner_b'],
    });
  });

  test('slow: custom stream events, and the abort signal stops the wait', async () => {
    const slow = await loadOne('slow', 'slow');
    const graph = await slow.getGraph(undefined, { checkpointer: new MemorySaver() });
    const events: unknown[] = [];
    for await (const chunk of await graph.stream({}, { ...thread('w1'), streamMode: 'custom', context: { delay_ms: 20 } })) events.push(chunk);
    expect(events).toEqual([{ phase: 'start', delay_ms: 20 }, { phase: 'done' }]);

    // An hour-long wait, aborted once it began: the stream ends only because the signal stopped the
    // wait (were it ignored, the test's timeout would fail it).
    const controller = new AbortController();
    const aborted = (async () => {
      for await (const chunk of await graph.stream({}, { ...thread('w2'), streamMode: 'custom', context: { delay_ms: 3_600_000 }, signal: controller.signal }))
        if ((chunk as { phase?: string }).phase === 'start') controller.abort(new Error('cancelled by test'));
    })();
    await expect(aborted).rejects.toThrow('cancelled by test');
  });

  test('server: one project naming files of the other fixtures loads every graph', async () => {
    const graphs = await load('server');
    expect([...graphs.values()].map((g) => [g.graphId, g.kind])).toEqual([
      ['echo', 'compiled'],
      ['slow', 'compiled'],
      ['interrupt', 'compiled'],
      ['nested_interrupt', 'compiled'],
      ['subgraph', 'compiled'],
      ['builder', 'builder'],
      ['factory', 'factory'],
      ['named_node_factory', 'factory'],
      ['trip', 'compiled'],
    ]);
  });

  test('broken: a module that throws at import → GraphLoadError with cause', async () => {
    const error = await loadError(load('broken'));
    expect(error.graphId).toBe('broken');
    expect(error.message).toMatch(/graph "broken": cannot import \.\/src\/graph\.ts: broken fixture: this module throws at import/);
    expect((error.cause as Error).message).toMatch(/throws at import/);
  });

  describe('export problems (misc project)', () => {
    const config = loadProjectConfig(join(fixtures, 'misc/langgraph.json'));

    test('a promise of a graph is awaited', async () => {
      const graph = await loadGraph(config.graphs.promised!);
      expect(graph.kind).toBe('compiled');
      const out = await (await graph.getGraph(undefined, { checkpointer: new MemorySaver() })).invoke({ value: '' }, thread('m1'));
      expect(out.value).toBe('set');
    });

    test('missing export lists what the module exports', async () => {
      const error = await loadError(loadGraph(config.graphs.missing!));
      expect(error.message).toMatch(/module has no export "doesNotExist" \(exports: .*notAGraph.*\)/);
    });

    test('an object or a class is not a graph', async () => {
      expect((await loadError(loadGraph(config.graphs.not_a_graph!))).message).toMatch(
        /export "notAGraph" of .* is not a graph: expected a compiled graph, a StateGraph builder or a factory function, got object/,
      );
      expect((await loadError(loadGraph(config.graphs.a_class!))).message).toMatch(/is not a graph: .*got class NotAFactory/);
    });

    test('factories that throw or return a non-graph fail on use, not at load', async () => {
      const throwing = await loadGraph(config.graphs.throwing_factory!);
      expect(throwing.template).toBeUndefined();
      const thrown = await loadError(throwing.getGraph(undefined, { checkpointer: null }));
      expect(thrown.message).toMatch(/graph factory .* threw: factory exploded/);
      expect((thrown.cause as Error).message).toBe('factory exploded');
      const bad = await loadGraph(config.graphs.bad_factory!);
      expect((await loadError(bad.getGraph(undefined, { checkpointer: null }))).message).toMatch(
        /the value returned by the factory .* is not a graph: .*got number/,
      );
    });

    test('loadGraphs stops at the first bad graph', async () => {
      expect((await loadError(loadGraphs(config))).graphId).toBe('not_a_graph');
    });
  });

  test('plain Node (no jest): graph modules load through the tsx loader', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [join(fixtures, 'node-load.mjs')], { cwd: fixtures, timeout: 60_000 });
    expect(JSON.parse(stdout.trim())).toEqual({
      reply: 'echo: from node [plain]',
      contextKeys: ['model_name', 'system_prompt'],
      messagesType: 'messages',
    });
  }, 60_000);
});
