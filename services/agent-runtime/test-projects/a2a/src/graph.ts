/**
 * Graphs for the A2A tests, all on a `messages` state, none calling a model:
 * - `approve` asks `Approve "<last human text>"?` with `interrupt()` and then replies
 *   `approved: <resume value>` (a string as it is, anything else as JSON);
 * - `slow` waits the milliseconds of the last human text (`wait 5000`), honouring the abort
 *   signal, and replies `waited <ms> ms`;
 * - `fail` throws `the agent broke`;
 * - `structured` replies `here it is` with a `structured_response` of `{ text, length }`.
 */
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import { Annotation, MessagesAnnotation, StateGraph, interrupt, type LangGraphRunnableConfig } from '@langchain/langgraph';
import { sleep } from '../../slow/src/graph.js';

function lastHumanText(messages: BaseMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    if (messages[i]!.getType() === 'human') return messages[i]!.text;
  }
  return '';
}

export const approve = new StateGraph(MessagesAnnotation)
  .addNode('ask', (state) => {
    const answer = interrupt<string, unknown>(`Approve "${lastHumanText(state.messages)}"?`);
    return { messages: [new AIMessage(`approved: ${typeof answer === 'string' ? answer : JSON.stringify(answer)}`)] };
  })
  .addEdge('__start__', 'ask')
  .addEdge('ask', '__end__')
  .compile();

export const slow = new StateGraph(MessagesAnnotation)
  .addNode('wait', async (state, config: LangGraphRunnableConfig) => {
    const ms = Number(/wait (\d+)/.exec(lastHumanText(state.messages))?.[1] ?? 0);
    await sleep(ms, config.signal);
    return { messages: [new AIMessage(`waited ${ms} ms`)] };
  })
  .addEdge('__start__', 'wait')
  .addEdge('wait', '__end__')
  .compile();

export const fail = new StateGraph(MessagesAnnotation)
  .addNode('broken', () => {
    throw new Error('the agent broke');
  })
  .addEdge('__start__', 'broken')
  .addEdge('broken', '__end__')
  .compile();

const Structured = Annotation.Root({ ...MessagesAnnotation.spec, structured_response: Annotation<{ text: string; length: number }> });

export const structured = new StateGraph(Structured)
  .addNode('answer', (state) => {
    const text = lastHumanText(state.messages);
    return { messages: [new AIMessage('here it is')], structured_response: { text, length: text.length } };
  })
  .addEdge('__start__', 'answer')
  .addEdge('answer', '__end__')
  .compile();
