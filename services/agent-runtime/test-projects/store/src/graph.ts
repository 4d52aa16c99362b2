/**
 * The `store` fixture's graph: one node that works on the server's long-term store, through
 * `config.store` for writes and `getStore()` for reads, as its input says:
 * `{op: 'put', namespace, key, value}`, `{op: 'get', namespace, key}`,
 * or `{op: 'search', namespace, filter?, query?}`. (No listNamespaces: LangGraph JS hands nodes
 * an AsyncBatchedStore, whose listNamespaces throws.)
 * What it found goes to `result`.
 */
import { Annotation, StateGraph, getStore, type LangGraphRunnableConfig } from '@langchain/langgraph';

const State = Annotation.Root({
  op: Annotation<'put' | 'get' | 'search'>,
  namespace: Annotation<string[]>,
  key: Annotation<string | undefined>,
  value: Annotation<Record<string, unknown> | undefined>,
  filter: Annotation<Record<string, unknown> | undefined>,
  query: Annotation<string | undefined>,
  result: Annotation<unknown>,
});

async function useStore(state: typeof State.State, config: LangGraphRunnableConfig) {
  if (!config.store) throw new Error('no store in config');
  switch (state.op) {
    case 'put':
      await config.store.put(state.namespace, state.key!, state.value!);
      return { result: 'stored' };
    case 'get': {
      const item = await getStore()!.get(state.namespace, state.key!);
      return { result: item ? { value: item.value, key: item.key, namespace: item.namespace } : null };
    }
    case 'search': {
      const items = await getStore()!.search(state.namespace, { filter: state.filter, query: state.query, limit: 10 });
      return { result: items.map((i) => ({ key: i.key, value: i.value, score: i.score ?? null })) };
    }
  }
}

export const graph = new StateGraph(State).addNode('use_store', useStore).addEdge('__start__', 'use_store').addEdge('use_store', '__end__').compile();
