/**
 * Graphs for Studio's tests. `steps`: plan → (conditional) act → reply, or plan → reply; each node
 * waits until the test opens its gate — the file `<STUDIO_GATE_DIR>/<message>.<node>` — so a test
 * sees which node executes, one at a time, with no timing of its own. Without STUDIO_GATE_DIR the
 * nodes do not wait. `nested`: a node that is a subgraph (`one` → `two`), a second graph for the
 * picker, drawn with the subgraph's nodes (`xray`).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

const State = new StateSchema({ messages: MessagesValue });

const lastHumanText = (messages: BaseMessage[]) => messages.findLast((m) => m.getType() === 'human')?.text ?? '';

/** Waits for the gate of `node` for this message, when the test runs with gates. */
async function gate(node: string, messages: BaseMessage[]): Promise<void> {
  const dir = process.env.STUDIO_GATE_DIR;
  if (!dir) return;
  const file = join(dir, `${lastHumanText(messages)}.${node}`);
  while (!existsSync(file)) await new Promise((resolve) => setTimeout(resolve, 20));
}

export const graph = new StateGraph(State)
  .addNode('plan', async (state) => {
    await gate('plan', state.messages);
    return { messages: [new AIMessage(`plan for ${lastHumanText(state.messages)}`)] };
  })
  .addNode('act', async (state) => {
    await gate('act', state.messages);
    return { messages: [new AIMessage('acted')] };
  })
  .addNode('reply', async (state) => {
    await gate('reply', state.messages);
    return { messages: [new AIMessage(`done: ${lastHumanText(state.messages)}`)] };
  })
  .addEdge('__start__', 'plan')
  .addConditionalEdges('plan', (state) => (lastHumanText(state.messages).startsWith('quick') ? 'reply' : 'act'), ['act', 'reply'])
  .addEdge('act', 'reply')
  .addEdge('reply', '__end__')
  .compile();

const inner = new StateGraph(State)
  .addNode('one', (state) => ({ messages: [new AIMessage(`one: ${lastHumanText(state.messages)}`)] }))
  .addNode('two', () => ({ messages: [new AIMessage('two')] }))
  .addEdge('__start__', 'one')
  .addEdge('one', 'two')
  .addEdge('two', '__end__')
  .compile();

export const nested = new StateGraph(State)
  .addNode('inner', inner)
  .addEdge('__start__', 'inner')
  .addEdge('inner', '__end__')
  .compile();
