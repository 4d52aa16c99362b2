/**
 * Human in the loop: `ask` calls `interrupt()` with a question, then stores the resume value as
 * `answer`; `finish` writes `done: <answer>` to `result`.
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
