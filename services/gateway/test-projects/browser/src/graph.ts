/**
 * A chat graph without an LLM, for browsers talking to a deployment through the gateway: `reply`
 * streams a fake chat model's answer token by token (`You said: <last human text>`), `approve`
 * asks a human (`interrupt({question})`) and `finish` appends `Approved: <answer>`.
 */
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import { FakeListChatModel } from '@langchain/core/utils/testing';
import { MessagesValue, StateGraph, StateSchema, interrupt } from '@langchain/langgraph';

const State = new StateSchema({ messages: MessagesValue });

const lastHumanText = (messages: BaseMessage[]) => messages.findLast((m) => m.getType() === 'human')?.text ?? '';

export const graph = new StateGraph(State)
  .addNode('reply', async (state) => {
    // A new model per call: FakeListChatModel cycles through its responses.
    const model = new FakeListChatModel({ responses: [`You said: ${lastHumanText(state.messages)}`], sleep: 5 });
    return { messages: [await model.invoke(state.messages)] };
  })
  .addNode('approve', () => {
    const answer = interrupt<{ question: string }, string>({ question: 'Send it?' });
    return { messages: [new AIMessage(`Approved: ${answer}`)] };
  })
  .addEdge('__start__', 'reply')
  .addEdge('reply', 'approve')
  .addEdge('approve', '__end__')
  .compile();
