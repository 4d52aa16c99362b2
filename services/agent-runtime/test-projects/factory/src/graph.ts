/**
 * Exports a factory: the server calls it with the run's config each time it needs the graph.
 * The reply names `configurable.greeting` (default "hello") to show which config built it.
 */
import { AIMessage } from '@langchain/core/messages';
import { MessagesAnnotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';

/** How many times the factory ran (tests check it runs once per use). */
export let calls = 0;

export async function makeGraph(config: LangGraphRunnableConfig) {
  calls += 1;
  const greeting = String(config.configurable?.greeting ?? 'hello');
  return new StateGraph(MessagesAnnotation)
    .addNode('greet', () => ({ messages: [new AIMessage(`${greeting} from factory`)] }))
    .addEdge('__start__', 'greet')
    .addEdge('greet', '__end__')
    .compile();
}
