/** A graph module that fails while it is being imported. */
import { Annotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({ value: Annotation<string> });

throw new Error('broken fixture: this module throws at import');

// Never reached; keeps the file looking like a real graph module.
export const graph = new StateGraph(State).addNode('noop', () => ({})).addEdge('__start__', 'noop').compile();
