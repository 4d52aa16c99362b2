/**
 * A graph with nested subgraphs whose state exists only as TypeScript types: `edit` runs `outer`
 * (passed by name), which runs `inner` (compiled in its `addNode` call). The exported graph is
 * compiled from a builder declared on its own.
 */
import { Annotation, StateGraph } from '@langchain/langgraph';

const notes = () => Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] });

const Inner = Annotation.Root({ notes: notes(), verdict: Annotation<'approved' | 'rejected'> });
const inner = new StateGraph(Inner).addNode('judge', () => ({ verdict: 'approved' as const, notes: ['judged'] })).addEdge('__start__', 'judge');

const Outer = Annotation.Root({ notes: notes(), stage: Annotation<'draft' | 'review'> });
const outer = new StateGraph(Outer)
  .addNode('write', () => ({ stage: 'review' as const, notes: ['written'] }))
  .addNode('check', inner.compile())
  .addEdge('__start__', 'write')
  .addEdge('write', 'check')
  .compile();

const builder = new StateGraph(Annotation.Root({ notes: notes() })).addNode('edit', outer).addEdge('__start__', 'edit');

export const nested = builder.compile();

/** A subgraph built inside a factory has no module-level name: its schemas list channel names only. */
export const local = () => {
  const sub = new StateGraph(Inner).addNode('judge', () => ({ verdict: 'rejected' as const })).addEdge('__start__', 'judge').compile();
  return new StateGraph(Outer).addNode('check', sub).addEdge('__start__', 'check').compile();
};
