/**
 * A one-node graph: `respond` appends `echo: <text of the last message>` to `messages`.
 * Replace `respond` with a model call to make it a real agent.
 */
import { AIMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

const State = new StateSchema({ messages: MessagesValue });

function respond(state: typeof State.State) {
  const last = state.messages.at(-1);
  return { messages: [new AIMessage(`echo: ${last?.text ?? ''}`)] };
}

export const graph = new StateGraph(State)
  .addNode('respond', respond)
  .addEdge('__start__', 'respond')
  .addEdge('respond', '__end__')
  .compile();
