// Logs through the LangGraph SDK's getLogger(), at module level (as many projects do) and in a node.
import { Annotation, StateGraph } from '@langchain/langgraph';
import { getLogger } from '@langchain/langgraph-sdk/logging';

const logger = getLogger();
logger.info('logging graph module loaded');

const State = Annotation.Root({ question: Annotation<string>(), answer: Annotation<string>() });

export const graph = new StateGraph(State)
  .addNode('respond', (state: typeof State.State) => {
    logger.warn('answering', { question: state.question });
    logger.error(new Error('not really an error'));
    return { answer: `you asked: ${state.question}` };
  })
  .addEdge('__start__', 'respond')
  .compile();
