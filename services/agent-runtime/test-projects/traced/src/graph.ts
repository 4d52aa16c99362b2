/**
 * The tracing test graph: two nodes, `plan` (plain code) then `answer`, which calls a chat model
 * that reports its token usage (as provider models do). A human message `fail` makes `answer`
 * throw, so the trace records an error.
 */
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, type BaseMessage } from '@langchain/core/messages';
import type { ChatResult } from '@langchain/core/outputs';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

/** Answers `model: <last message>` and reports 11 input and 7 output tokens. */
class UsageReportingModel extends BaseChatModel {
  _llmType(): string {
    return 'usage-reporting-fake';
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const message = new AIMessage({
      content: `model: ${messages.at(-1)?.text ?? ''}`,
      usage_metadata: { input_tokens: 11, output_tokens: 7, total_tokens: 18 },
    });
    return { generations: [{ text: message.text, message }], llmOutput: {} };
  }
}

const model = new UsageReportingModel({});
const State = new StateSchema({ messages: MessagesValue });

export const graph = new StateGraph(State)
  .addNode('plan', async (state: typeof State.State) => ({ messages: [new AIMessage(`planned: ${state.messages.at(-1)?.text ?? ''}`)] }))
  .addNode('answer', async (state: typeof State.State) => {
    if (state.messages.some((m) => m.getType() === 'human' && m.text === 'fail')) throw new Error('the answer node failed on purpose');
    return { messages: [await model.invoke(state.messages)] };
  })
  .addEdge('__start__', 'plan')
  .addEdge('plan', 'answer')
  .addEdge('answer', '__end__')
  .compile();
