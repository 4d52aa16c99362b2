/**
 * Graphs whose schemas exist only as TypeScript types: `Annotation.Root` state and context channels
 * (`Annotation<T>` keeps no value type at runtime). The node `reply` reports the model the context
 * asked for and counts the turns.
 */
import { Annotation, MessagesAnnotation, StateGraph, type Runtime } from '@langchain/langgraph';

type Model = 'openai' | 'anthropic' | 'unknown';

const State = Annotation.Root({
  question: Annotation<string>,
  answer: Annotation<string | null>,
  turns: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
  tags: Annotation<string[]>,
  meta: Annotation<{ source: string; score?: number }>,
});

const Context = Annotation.Root({ model: Annotation<Model>, temperature: Annotation<number> });

const answer = (state: typeof State.State, runtime: Runtime<typeof Context.State>) => ({
  answer: `${runtime.context?.model ?? 'no model'}: ${state.question}`,
  turns: 1,
});

/** Typed state and context. */
export const typed = new StateGraph(State, Context).addNode('reply', answer).addEdge('__start__', 'reply').compile();

/** A second graph of the same module, so LANGGRAPH_CONFIG can name one and not the other. */
export const plain = new StateGraph(Annotation.Root({ note: Annotation<string> })).addNode('n', () => ({})).addEdge('__start__', 'n').compile();

/** Messages state: its schema names the message classes. */
export const chat = new StateGraph(MessagesAnnotation).addNode('n', () => ({})).addEdge('__start__', 'n').compile();
