/**
 * Exports an uncompiled StateGraph as the module's default export (the spec has no `:export`),
 * with an `Annotation.Root` state (MessagesAnnotation plus a counter).
 */
import { AIMessage } from '@langchain/core/messages';
import { Annotation, MessagesAnnotation, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({
  ...MessagesAnnotation.spec,
  turns: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
});

const builder = new StateGraph(State)
  .addNode('reply', (state) => ({ messages: [new AIMessage(`turn ${state.turns + 1}`)], turns: 1 }))
  .addEdge('__start__', 'reply')
  .addEdge('reply', '__end__');

export default builder;
