/**
 * A graph for Studio's run-form tests (console-studio-runs.test.ts): its input schema has a field of
 * each shape the form makes an input for (a string, an integer, a boolean, an enum), and its one
 * node writes a `custom` event per repetition (`config.writer`) before its reply, so each stream
 * mode chosen has something of its own to show.
 */
import { StateGraph, StateSchema } from '@langchain/langgraph';
import { z } from 'zod';

const Order = new StateSchema({
  topic: z.string().describe('What to repeat'),
  times: z.number().int().default(1),
  loud: z.boolean().default(false),
  tone: z.enum(['plain', 'warm']).default('plain'),
  result: z.string().default(''),
});

export const repeat = new StateGraph(Order)
  .addNode('repeat', (state, config) => {
    const word = state.loud ? state.topic.toUpperCase() : state.topic;
    for (let i = 1; i <= state.times; i++) config.writer?.({ repetition: i, word });
    return { result: `${state.tone}: ${Array.from({ length: state.times }, () => word).join(' ')}` };
  })
  .addEdge('__start__', 'repeat')
  .addEdge('repeat', '__end__')
  .compile();
