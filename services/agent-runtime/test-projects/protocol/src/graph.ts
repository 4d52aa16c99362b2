/**
 * Protocol v2 fixtures. `chat`: node `agent` streams a fake model's reply token by token
 * (`reply: <last human text>`); a human message `tool` makes it call the `lookup` tool first
 * (node `tools`), whose result it then repeats; one starting with `slowly` waits 50 ms before each
 * token (so that a browser renders them one by one). `ask`: `interrupt({question})` then `answer`.
 */
import { AIMessage, AIMessageChunk, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import type { ChatGenerationChunk, ChatResult } from '@langchain/core/outputs';
import { ChatGenerationChunk as Chunk } from '@langchain/core/outputs';
import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

/** Streams `reply: <last text>` in three-character tokens, with usage on the last chunk. */
class TokenModel extends BaseChatModel {
  override _llmType(): string {
    return 'protocol-fake';
  }

  override async *_streamResponseChunks(messages: BaseMessage[], _options: this['ParsedCallOptions'], runManager?: CallbackManagerForLLMRun): AsyncGenerator<ChatGenerationChunk> {
    const last = messages.at(-1)!;
    if (last.getType() === 'human' && last.text === 'tool') {
      yield new Chunk({ text: '', message: new AIMessageChunk({ content: '', tool_call_chunks: [{ id: 'call_1', name: 'lookup', args: '{"q":"tool"}', index: 0, type: 'tool_call_chunk' }] }) });
      return;
    }
    const text = `reply: ${last.text}`;
    const pause = last.text.startsWith('slowly') ? 50 : 0;
    for (let i = 0; i < text.length; i += 3) {
      if (pause) await new Promise((resolve) => setTimeout(resolve, pause));
      const token = text.slice(i, i + 3);
      const done = i + 3 >= text.length;
      const message = new AIMessageChunk({ content: token, ...(done ? { usage_metadata: { input_tokens: 5, output_tokens: 4, total_tokens: 9 } } : {}) });
      yield new Chunk({ text: token, message });
      await runManager?.handleLLMNewToken(token);
    }
  }

  async _generate(messages: BaseMessage[], options: this['ParsedCallOptions']): Promise<ChatResult> {
    let message: AIMessageChunk | undefined;
    for await (const chunk of this._streamResponseChunks(messages, options)) message = message ? message.concat(chunk.message as AIMessageChunk) : (chunk.message as AIMessageChunk);
    return { generations: [{ text: message!.text, message: message! }] };
  }
}

const model = new TokenModel({});
const lookup = tool(async ({ q }: { q: string }) => `looked up ${q}`, { name: 'lookup', description: 'Looks a word up', schema: z.object({ q: z.string() }) });
const State = new StateSchema({ messages: MessagesValue });

export const chat = new StateGraph(State)
  .addNode('agent', async (state: typeof State.State) => ({ messages: [await model.invoke(state.messages)] }))
  .addNode('tools', async (state: typeof State.State) => {
    const call = (state.messages.at(-1) as AIMessage).tool_calls![0]!;
    return { messages: [await lookup.invoke({ ...call, type: 'tool_call' })] };
  })
  .addEdge('__start__', 'agent')
  .addConditionalEdges('agent', (state: typeof State.State) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : '__end__'), ['tools', '__end__'])
  .addEdge('tools', 'agent')
  .compile();
