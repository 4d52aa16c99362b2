/**
 * The benchmark/test graph: one node `respond` that appends `echo: <last human content>` to
 * `messages`. When the run's context has a `system_prompt`, the reply ends with
 * ` [<system_prompt>]` so tests can see which assistant version (context) ran.
 */
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema, type Runtime } from '@langchain/langgraph';
import { z } from 'zod';

export const EchoState = new StateSchema({ messages: MessagesValue });

export const EchoContext = z.object({
  model_name: z.string().optional(),
  system_prompt: z.string().optional(),
});

function lastHumanText(messages: BaseMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const message = messages[i]!;
    if (message.getType() === 'human') return message.text;
  }
  return '';
}

async function respond(state: typeof EchoState.State, runtime: Runtime<z.infer<typeof EchoContext>>) {
  const prompt = runtime.context?.system_prompt;
  const text = `echo: ${lastHumanText(state.messages)}${prompt ? ` [${prompt}]` : ''}`;
  return { messages: [new AIMessage(text)] };
}

export const graph = new StateGraph(EchoState, { context: EchoContext })
  .addNode('respond', respond)
  .addEdge('__start__', 'respond')
  .addEdge('respond', '__end__')
  .compile();
