/**
 * Graphs for the Threads tab's tests (gates as in graph.ts: files in STUDIO_GATE_DIR the test
 * creates, so nothing here waits on time). `chat`: a chat model that streams its reply token by
 * token and waits at `<message>.tokens` after the first, so a test sees the reply half written.
 * `approvals`: a question (interrupt), then two approvals at once (two interrupts in parallel
 * branches, HITL-shaped), then a reply. `forever`: a node that waits until its run is cancelled.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, AIMessageChunk, type BaseMessage } from '@langchain/core/messages';
import { ChatGenerationChunk, type ChatResult } from '@langchain/core/outputs';
import { interrupt, MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
import { z } from 'zod';

const lastHumanText = (messages: BaseMessage[]) => messages.findLast((m) => m.getType() === 'human')?.text ?? '';

/** Resolves when `<STUDIO_GATE_DIR>/<name>` exists (at once without gates), or rejects when `signal` aborts. */
async function gate(name: string, signal?: AbortSignal): Promise<void> {
  const dir = process.env.STUDIO_GATE_DIR;
  if (!dir) return;
  while (!existsSync(join(dir, name))) {
    signal?.throwIfAborted();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A chat model that answers `echo: <message>` in three tokens, waiting at the gate after the first. */
class GatedEcho extends BaseChatModel {
  _llmType() {
    return 'gated-echo';
  }

  async _generate(messages: BaseMessage[], options: this['ParsedCallOptions'], runManager?: CallbackManagerForLLMRun): Promise<ChatResult> {
    let text = '';
    for await (const chunk of this._streamResponseChunks(messages, options, runManager)) text += chunk.text;
    return { generations: [{ text, message: new AIMessage(text) }] };
  }

  async *_streamResponseChunks(messages: BaseMessage[], options: this['ParsedCallOptions'], runManager?: CallbackManagerForLLMRun) {
    const said = lastHumanText(messages);
    const tokens = ['echo', ': ', said];
    for (const [i, token] of tokens.entries()) {
      if (i === 1) await gate(`${said}.tokens`, options.signal);
      const chunk = new ChatGenerationChunk({ text: token, message: new AIMessageChunk({ content: token }) });
      yield chunk;
      await runManager?.handleLLMNewToken(token, undefined, undefined, undefined, undefined, { chunk });
    }
  }
}

const Messages = new StateSchema({ messages: MessagesValue });
const model = new GatedEcho({});

export const chat = new StateGraph(Messages)
  .addNode('model', async (state) => ({ messages: [await model.invoke(state.messages)] }))
  .addEdge('__start__', 'model')
  .addEdge('model', '__end__')
  .compile();

const Approvals = new StateSchema({ messages: MessagesValue, answer: z.string().default(''), firstDecision: z.string().default(''), secondDecision: z.string().default('') });

/** What a human-in-the-loop request looks like (langchain's HITL middleware). */
const approval = (action: string) => ({ action_request: { action, args: { target: action } }, allowed_decisions: ['approve', 'edit', 'reject'] });

export const approvals = new StateGraph(Approvals)
  .addNode('ask', () => ({ answer: String(interrupt({ question: 'Which colour?' })) }))
  .addNode('first', () => ({ firstDecision: JSON.stringify(interrupt(approval('first'))) }))
  .addNode('second', () => ({ secondDecision: JSON.stringify(interrupt(approval('second'))) }))
  .addNode('reply', (state) => ({ messages: [new AIMessage(`answer ${state.answer}; first ${state.firstDecision}; second ${state.secondDecision}`)] }))
  .addEdge('__start__', 'ask')
  .addEdge('ask', 'first')
  .addEdge('ask', 'second')
  .addEdge(['first', 'second'], 'reply')
  .addEdge('reply', '__end__')
  .compile();

export const forever = new StateGraph(Messages)
  .addNode('wait', async (state, config) => {
    // No test opens this gate: the run ends only when it is cancelled (its signal aborts).
    await gate(`${lastHumanText(state.messages)}.never`, config.signal);
    return { messages: [new AIMessage('never')] };
  })
  .addEdge('__start__', 'wait')
  .addEdge('wait', '__end__')
  .compile();
