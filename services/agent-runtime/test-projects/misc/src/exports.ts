/**
 * Exports that are (mostly) not valid graphs, for the loader's error cases. Load them one by
 * one with `loadGraph`; `loadGraphs` on this project stops at the first bad one.
 */
import { Annotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ value: Annotation<string> });

const compiled = new StateGraph(State)
  .addNode('set', () => ({ value: 'set' }))
  .addEdge('__start__', 'set')
  .addEdge('set', '__end__')
  .compile();

/** A promise of a compiled graph (top-level async setup); the loader awaits it. */
export const promisedGraph = Promise.resolve(compiled);

export const notAGraph = { hello: 'world' };

export class NotAFactory {}

export function throwingFactory(): never {
  throw new Error('factory exploded');
}

export function badFactory(): number {
  return 42;
}
