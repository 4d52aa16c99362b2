/**
 * Graphs the protocol v2 parity test runs on both Berth's agent server and the JS server
 * (`@langchain/langgraph-api`), to compare their event sequences. Deterministic and without an LLM:
 * the model is a subclass of core's `FakeStreamingChatModel` replaying fixed chunks.
 *
 * - `steps`: `first` → `second`, each appending its name to `steps`.
 * - `agent`: `model` streams a call of the tool `lookup` ({"q":"berth"}, its arguments in two
 *   chunks), the prebuilt `ToolNode` (`tools`) runs it (`found berth`), then `model` streams `The
 *   answer: found berth` in five chunks, usage (7 in, 5 out) on the last.
 * - `team`: `agent` as the subgraph `researcher` of a parent.
 * - `ask`: `prepare` → `ask`, which calls `interrupt({question: "Which city?"})` and writes
 *   `answer: "going to <response>"`.
 * - `pair`: `left` and `right` in parallel, each `interrupt("left?")` / `interrupt("right?")` and
 *   appending `left <answer>` / `right <answer>` to `steps`, then `join`.
 * - `report`: `report` writes custom events `{progress: 1, of: 2}` and `{progress: 2, of: 2}`, then
 *   throws `the report broke` when the input says `fail: true`.
 * - `nested_ask`: `before` → subgraph `child` (`ask`: the same interrupt, `answer`) → `after`
 *   (`steps: ["after <answer>"]`).
 * - `nest`: `prepare` → subgraph `child` (`inner` → subgraph `grandchild` (`leaf`)) → `summarize`:
 *   namespaces two deep; `trail` ends `["inner", "leaf"]`, `steps` `["prepare", "summary of 2"]`.
 */
import { AIMessageChunk, type AIMessage, type BaseMessage, type BaseMessageChunk } from '@langchain/core/messages';
import type { CallbackManagerForLLMRun } from '@langchain/core/callbacks/manager';
import { ChatGenerationChunk, type ChatResult } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { FakeStreamingChatModel } from '@langchain/core/utils/testing';
import { Annotation, interrupt, MessagesAnnotation, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';

const append = Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] });

export const steps = new StateGraph(Annotation.Root({ steps: append }))
  .addNode('first', () => ({ steps: ['first'] }))
  .addNode('second', () => ({ steps: ['second'] }))
  .addEdge('__start__', 'first')
  .addEdge('first', 'second')
  .addEdge('second', '__end__')
  .compile();

const lookup = tool(async ({ q }: { q: string }) => `found ${q}`, {
  name: 'lookup',
  description: 'Looks a word up',
  schema: z.object({ q: z.string() }),
});

/**
 * Core's fake, replaying its chunks as they are: the fake itself keeps only their content and whole
 * tool calls (no tool-call chunks, no usage), and its `invoke` without a streaming callback would
 * answer the first message's text; here `invoke` joins the chunks, so the state does not depend on
 * whether the server listens to tokens.
 */
class ReplayModel extends FakeStreamingChatModel {
  override async *_streamResponseChunks(_messages: BaseMessage[], _options: this['ParsedCallOptions'], runManager?: CallbackManagerForLLMRun): AsyncGenerator<ChatGenerationChunk> {
    for (const message of this.chunks) {
      const chunk = new ChatGenerationChunk({ message, text: message.text });
      yield chunk;
      await runManager?.handleLLMNewToken(message.text, undefined, undefined, undefined, undefined, { chunk });
    }
  }

  override async _generate(messages: BaseMessage[], options: this['ParsedCallOptions']): Promise<ChatResult> {
    let message: BaseMessageChunk | undefined;
    for await (const { message: chunk } of this._streamResponseChunks(messages, options)) message = message ? message.concat(chunk) : chunk;
    return { generations: [{ text: message!.text, message: message! }] };
  }
}

/** First turn: a call of `lookup` whose arguments arrive in two chunks. */
const callsTool = new ReplayModel({
  chunks: [
    new AIMessageChunk({ content: '', tool_call_chunks: [{ id: 'call_lookup_1', name: 'lookup', args: '{"q":', index: 0, type: 'tool_call_chunk' }] }),
    new AIMessageChunk({ content: '', tool_call_chunks: [{ args: '"berth"}', index: 0, type: 'tool_call_chunk' }] }),
  ],
});

/** After the tool answered: text in five chunks, usage on the last. */
const answers = new ReplayModel({
  chunks: ['The ', 'answ', 'er: ', 'found', ' berth'].map(
    (content, i, all) => new AIMessageChunk({ content, ...(i === all.length - 1 ? { usage_metadata: { input_tokens: 7, output_tokens: 5, total_tokens: 12 } } : {}) }),
  ),
});

const lastIsTool = (messages: BaseMessage[]) => messages.at(-1)?.getType() === 'tool';

export const agent = new StateGraph(MessagesAnnotation)
  .addNode('model', async (state) => {
    const model = lastIsTool(state.messages) ? answers : callsTool;
    return { messages: [await model.invoke(state.messages)] };
  })
  .addNode('tools', new ToolNode([lookup]))
  .addEdge('__start__', 'model')
  .addConditionalEdges('model', (state) => ((state.messages.at(-1) as AIMessage).tool_calls?.length ? 'tools' : '__end__'), ['tools', '__end__'])
  .addEdge('tools', 'model')
  .compile();

/** `agent` as the subgraph `researcher` of a parent: its model and tool calls one namespace deeper. */
export const team = new StateGraph(MessagesAnnotation)
  .addNode('researcher', agent)
  .addEdge('__start__', 'researcher')
  .addEdge('researcher', '__end__')
  .compile();

export const ask = new StateGraph(Annotation.Root({ steps: append, answer: Annotation<string> }))
  .addNode('prepare', () => ({ steps: ['prepare'] }))
  .addNode('ask', () => {
    const city = interrupt<{ question: string }, string>({ question: 'Which city?' });
    return { steps: ['ask'], answer: `going to ${city}` };
  })
  .addEdge('__start__', 'prepare')
  .addEdge('prepare', 'ask')
  .addEdge('ask', '__end__')
  .compile();

/** `left` and `right` run in one superstep and each interrupt; `join` runs once both are answered. */
export const pair = new StateGraph(Annotation.Root({ steps: append }))
  .addNode('left', () => ({ steps: [`left ${interrupt<string, string>('left?')}`] }))
  .addNode('right', () => ({ steps: [`right ${interrupt<string, string>('right?')}`] }))
  .addNode('join', () => ({ steps: ['join'] }))
  .addEdge('__start__', 'left')
  .addEdge('__start__', 'right')
  .addEdge(['left', 'right'], 'join')
  .addEdge('join', '__end__')
  .compile();

/** `report` writes two custom events through the stream writer, `fail` then throws. */
export const report = new StateGraph(Annotation.Root({ steps: append, fail: Annotation<boolean> }))
  .addNode('report', (state, config) => {
    config.writer?.({ progress: 1, of: 2 });
    config.writer?.({ progress: 2, of: 2 });
    if (state.fail) throw new Error('the report broke');
    return { steps: ['report'] };
  })
  .addEdge('__start__', 'report')
  .addEdge('report', '__end__')
  .compile();

const asking = new StateGraph(Annotation.Root({ answer: Annotation<string> }))
  .addNode('ask', () => ({ answer: `going to ${interrupt<{ question: string }, string>({ question: 'Which city?' })}` }))
  .addEdge('__start__', 'ask')
  .addEdge('ask', '__end__')
  .compile();

export const nestedAsk = new StateGraph(Annotation.Root({ steps: append, answer: Annotation<string> }))
  .addNode('before', () => ({ steps: ['before'] }))
  .addNode('child', asking)
  .addNode('after', (state) => ({ steps: [`after ${state.answer}`] }))
  .addEdge('__start__', 'before')
  .addEdge('before', 'child')
  .addEdge('child', 'after')
  .addEdge('after', '__end__')
  .compile();

/** No reducer: each node writes the whole trail, so a subgraph's result replaces its parent's. */
const trail = Annotation.Root({ trail: Annotation<string[]> });
const walk = (name: string) => (state: typeof trail.State) => ({ trail: [...(state.trail ?? []), name] });

const grandchild = new StateGraph(trail)
  .addNode('leaf', walk('leaf'))
  .addEdge('__start__', 'leaf')
  .addEdge('leaf', '__end__')
  .compile();

const child = new StateGraph(trail)
  .addNode('inner', walk('inner'))
  .addNode('grandchild', grandchild)
  .addEdge('__start__', 'inner')
  .addEdge('inner', 'grandchild')
  .addEdge('grandchild', '__end__')
  .compile();

export const nest = new StateGraph(Annotation.Root({ steps: append, trail: Annotation<string[]> }))
  .addNode('prepare', () => ({ steps: ['prepare'] }))
  .addNode('child', child)
  .addNode('summarize', (state) => ({ steps: [`summary of ${state.trail.length}`] }))
  .addEdge('__start__', 'prepare')
  .addEdge('prepare', 'child')
  .addEdge('child', 'summarize')
  .addEdge('summarize', '__end__')
  .compile();
