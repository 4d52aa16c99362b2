/**
 * A parent graph whose node `child` is a compiled subgraph:
 * parent `prepare` → subgraph `child` (`inner_a` → `inner_b`) → parent `summarize`.
 * The two graphs share the `inner` channel; `steps` belongs to the parent only.
 */
import { Annotation, StateGraph } from '@langchain/langgraph';

const ChildState = Annotation.Root({
  inner: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const child = new StateGraph(ChildState)
  .addNode('inner_a', () => ({ inner: ['inner_a'] }))
  .addNode('inner_b', () => ({ inner: ['inner_b'] }))
  .addEdge('__start__', 'inner_a')
  .addEdge('inner_a', 'inner_b')
  .addEdge('inner_b', '__end__')
  .compile();

const ParentState = Annotation.Root({
  steps: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  // No reducer: the child's final `inner` replaces the parent's.
  inner: Annotation<string[]>,
});

export const graph = new StateGraph(ParentState)
  .addNode('prepare', () => ({ steps: ['prepare'] }))
  .addNode('child', child)
  .addNode('summarize', (state) => ({ steps: [`summary of ${state.inner.length} inner steps`] }))
  .addEdge('__start__', 'prepare')
  .addEdge('prepare', 'child')
  .addEdge('child', 'summarize')
  .addEdge('summarize', '__end__')
  .compile();
