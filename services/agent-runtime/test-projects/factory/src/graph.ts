/**
 * Exports a factory: the server calls it with the run's config each time it needs the graph.
 * The reply names `configurable.greeting` (default "hello") to show which config built it.
 */
import { AIMessage } from '@langchain/core/messages';
import { Annotation, MessagesAnnotation, StateGraph, type LangGraphRunnableConfig } from '@langchain/langgraph';

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

/**
 * A factory whose graph differs by config: one node, named `configurable.node_name` (default
 * "default"), which appends its name to `visited`. A state update `as_node` that name only works
 * on the graph built with the thread's config.
 */
export function makeNamedNodeGraph(config: LangGraphRunnableConfig) {
  const node = String(config.configurable?.node_name ?? 'default');
  const State = Annotation.Root({ visited: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  return new StateGraph(State)
    .addNode(node, () => ({ visited: [node] }))
    .addEdge('__start__', node)
    .addEdge(node, '__end__')
    .compile();
}
