/**
 * Human in the loop: `ask` calls `interrupt()` with a question, then stores the resume value as
 * `answer`; `finish` writes `done: <answer>` to `result`. `nested` interrupts inside a subgraph.
 */
import { Annotation, StateGraph, interrupt } from '@langchain/langgraph';

const State = Annotation.Root({
  question: Annotation<string>,
  answer: Annotation<string>,
  result: Annotation<string>,
});

export const graph = new StateGraph(State)
  .addNode('ask', (state) => {
    const answer = interrupt<{ question: string }, string>({ question: state.question });
    return { answer };
  })
  .addNode('finish', (state) => ({ result: `done: ${state.answer}` }))
  .addEdge('__start__', 'ask')
  .addEdge('ask', 'finish')
  .addEdge('finish', '__end__')
  .compile();

const Nested = Annotation.Root({ step: Annotation<string>, answer: Annotation<string> });

/** `interrupt()` inside a subgraph: parent `before` → subgraph `child` (`ask`) → parent `after`. */
export const nested = new StateGraph(Nested)
  .addNode('before', () => ({ step: 'before' }))
  .addNode(
    'child',
    new StateGraph(Nested)
      .addNode('ask', () => ({ answer: interrupt<string, string>('child asks') }))
      .addEdge('__start__', 'ask')
      .compile(),
  )
  .addNode('after', (state) => ({ step: `after ${state.answer}` }))
  .addEdge('__start__', 'before')
  .addEdge('before', 'child')
  .addEdge('child', 'after')
  .compile();
